"""Every code block of README.md and docs/*.md runs as written, so the docs cannot drift.

How the blocks are run (the conventions the docs follow; docs/index.md repeats them):

- ```python blocks of one file run in order in one namespace, in a fresh empty folder (the
  working directory). Expected output is checked where the doc shows it, in one of two ways:
  comment lines ``# prints: <line>`` inside the block (each one printed line, in order), or an
  ```output (or ```text) block directly after the block (its lines are the whole printed output).
- ```bash / ```sh / ```shell / ```console blocks run with bash in the same folder as the file's
  python blocks, with this interpreter's bin folder first on PATH (so ``ledger`` and ``python``
  are this installation's). A block whose lines start with ``$ `` is a session: each ``$ `` line
  is a command run in its own bash, and the lines under it, up to the next ``$ ``, are its exact
  standard output (a line ``...`` stands for any number of lines). Any other block is a script
  run with ``bash -euo pipefail``, whose standard output is checked against an ```output (or
  ```text) block right after it, if there is one. Every command must exit with status 0.
  ``ledger`` is the command of this checkout: a small script handing its arguments, folder,
  environment and standard input to the test process, which runs the command there through
  click's test runner (a fresh interpreter costs a second of imports per call) and hands back
  its output and exit status; with ``--debug`` it is ``python -m ledger`` (tests/test_cli.py
  runs the entry point itself as a process).
- A block that cannot run here (a cluster, real AWS, an install step) is marked with an HTML
  comment ``<!-- no-run: why -->`` on the line before its fence; there must stay only a few.
- A python block marked ``<!-- spark -->`` runs with the test session's Spark bound to ``spark``
  (a spark-marked test); later blocks of the file must not depend on it.
- Blocks in other languages (```text not right after a runnable block, ```json, ```sql, or no
  language) are prose, never run.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from ledger.cli import cli
from tests.support.scripts import run_as_script

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
PYTHON_FENCES = {"python", "py"}
SHELL_FENCES = {"bash", "sh", "shell", "console"}
# A block of these directly after a runnable one (nothing but blank lines between) is its output.
OUTPUT_FENCES = {"output", "text"}
# Blocks that cannot run on a test machine (a cluster, real AWS, installing); keep this small.
MAX_NO_RUN_BLOCKS = 5
SHELL_TIMEOUT_S = 300

_FENCE = re.compile(r"^```\s*([\w+-]*)\s*$")
_NO_RUN = re.compile(r"^<!--\s*no-run:\s*(\S.*?)\s*-->$")
_SPARK = re.compile(r"^<!--\s*spark\s*-->$")
_PRINTS = "# prints:"


@dataclass(frozen=True)
class Block:
    """One fenced code block of a doc file, with how it must be run."""

    path: Path
    index: int  # among the file's runnable-language blocks, from 0
    line: int  # 1-based line of the opening fence
    language: str
    code: str
    no_run_reason: str | None = None
    spark: bool = False
    output: str | None = None  # the ```output block right after it, if any

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def is_python(self) -> bool:
        return self.language in PYTHON_FENCES


def _fenced_blocks(path: Path) -> list[tuple[int, str, str, str]]:
    """(opening line, language, code, the non-blank line before the fence) of every fence."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[tuple[int, str, str, str]] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), len(lines))
        before = next((lines[j].strip() for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        found.append((i + 1, match.group(1).lower(), "\n".join(lines[i + 1 : end]) + "\n", before))
        i = end + 1
    return found


def doc_blocks(path: Path) -> list[Block]:
    """The python and shell blocks of one doc file, in order."""
    fences = _fenced_blocks(path)
    blocks: list[Block] = []
    for position, (line, language, code, before) in enumerate(fences):
        if language not in PYTHON_FENCES | SHELL_FENCES:
            continue
        following = fences[position + 1] if position + 1 < len(fences) else None
        output = None
        if following is not None and following[1] in OUTPUT_FENCES and following[3] == "```":
            output = following[2]
        no_run = _NO_RUN.match(before)
        blocks.append(
            Block(
                path=path,
                index=len(blocks),
                line=line,
                language=language,
                code=code,
                no_run_reason=no_run.group(1) if no_run else None,
                spark=bool(_SPARK.match(before)),
                output=output,
            )
        )
    return blocks


ALL_BLOCKS = [block for path in DOC_FILES for block in doc_blocks(path)]


# --- running ------------------------------------------------------------------------------------


@dataclass
class _FileRun:
    """The shared state of one doc file's blocks: its folder, namespace and progress."""

    folder: Path
    namespace: dict[str, Any] = field(default_factory=lambda: {"__name__": "__doc__"})
    done: set[int] = field(default_factory=set)
    failed: set[int] = field(default_factory=set)


_RUNS: dict[Path, _FileRun] = {}


def _expected_python_output(block: Block) -> list[str] | None:
    printed = [
        line.strip()[len(_PRINTS) :].strip()
        for line in block.code.splitlines()
        if line.strip().startswith(_PRINTS)
    ]
    if block.output is not None:
        assert not printed, f"{block.name}: use `# prints:` lines or an output block, not both"
        return block.output.rstrip("\n").splitlines()
    return printed or None


def _run_python(block: Block, run: _FileRun) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block.code, block.name, "exec"), run.namespace)
    expected = _expected_python_output(block)
    if expected is not None:
        printed = [line.rstrip() for line in out.getvalue().rstrip("\n").splitlines()]
        assert printed == [line.rstrip() for line in expected], f"{block.name} printed otherwise"


# The shell blocks' ``ledger``: hands the command to the test process (``_InProcessLedger``)
# over a local socket, in files of a request folder, and prints what the command printed.
_LEDGER_SCRIPT = """#!/bin/bash
set -euo pipefail
for argument in "$@"; do
    if [ "$argument" = --debug ]; then exec "{python}" -m ledger "$@"; fi
done
request=$(mktemp -d "{folder}/request.XXXXXX")
printf '%s\\0' "$PWD" "$@" > "$request/argv"
env -0 > "$request/env"
cat > "$request/stdin"
exec 3<>/dev/tcp/127.0.0.1/{port}
echo "$request" >&3
read -r status <&3
exec 3>&-
cat "$request/stdout"
cat "$request/stderr" >&2
rm -rf "$request"
exit "$status"
"""


class _InProcessLedger:
    """Runs the ``ledger`` commands of the shell blocks in this process, one at a time, as
    tests/test_cli.py's ``run_ledger`` does: in the command's folder and environment, with its
    standard input; an exception the command lets through is printed as the interpreter would
    print it, with exit status 1."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="ledger-doc-commands-"))
        self._server = socket.create_server(("127.0.0.1", 0))
        port = self._server.getsockname()[1]
        self.script = self.folder / "ledger"
        self.script.write_text(
            _LEDGER_SCRIPT.format(python=sys.executable, folder=self.folder, port=port)
        )
        self.script.chmod(0o755)
        threading.Thread(target=self._serve, name="doc-ledger-command", daemon=True).start()

    def _serve(self) -> None:
        while True:
            connection, _ = self._server.accept()
            with connection, connection.makefile("rwb") as stream:
                request = Path(stream.readline().decode().strip())
                try:
                    status = self._run(request)
                except BaseException as error:  # the script still gets an answer
                    (request / "stderr").write_text(f"the test harness failed: {error!r}\n")
                    status = 1
                stream.write(f"{status}\n".encode())
                stream.flush()

    def _run(self, request: Path) -> int:
        folder, *argv = os.fsdecode((request / "argv").read_bytes()).split("\0")[:-1]
        pairs = os.fsdecode((request / "env").read_bytes()).split("\0")
        env = dict(pair.split("=", 1) for pair in pairs if "=" in pair)
        environment: dict[str, str | None] = {
            **{name: None for name in os.environ if name not in env},
            **{name: value for name, value in env.items() if os.environ.get(name) != value},
        }
        with contextlib.chdir(folder):
            outcome = CliRunner().invoke(
                cli,
                argv,
                input=(request / "stdin").read_bytes(),
                env=environment,
                prog_name="ledger",
            )
        stderr = outcome.stderr_bytes or b""
        if outcome.exception is not None and not isinstance(outcome.exception, SystemExit):
            assert outcome.exc_info is not None
            # What the interpreter prints for an exception the command let through.
            stderr += "".join(traceback.format_exception(*outcome.exc_info)).encode()
        (request / "stdout").write_bytes(outcome.stdout_bytes)
        (request / "stderr").write_bytes(stderr)
        return outcome.exit_code


_LEDGER: _InProcessLedger | None = None


def _ledger_command() -> Path:
    """The shell blocks' ``ledger`` script (its server starts with the first shell block)."""
    global _LEDGER
    if _LEDGER is None:
        _LEDGER = _InProcessLedger()
    return _LEDGER.script


def _shell_env() -> dict[str, str]:
    env = dict(os.environ)
    commands = _ledger_command().parent
    path = [str(commands), str(Path(sys.executable).parent), env.get("PATH", "")]
    env["PATH"] = os.pathsep.join(path)
    # `python -m ledger` and the `ledger` script import this checkout, not another install.
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def _bash(script: str, folder: Path, name: str) -> str:
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=_shell_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SHELL_TIMEOUT_S,
    )
    assert result.returncode == 0, (
        f"{name}: `{script.strip()}` exited {result.returncode}\n{result.stdout}\n{result.stderr}"
    )
    return result.stdout


def session_steps(code: str) -> list[tuple[str, list[str]]]:
    """A ``$ `` session as (command, expected output lines) pairs; [] if it is a plain script."""
    steps: list[tuple[str, list[str]]] = []
    for line in code.rstrip("\n").splitlines():
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif steps:
            steps[-1][1].append(line.rstrip())
        elif line.strip():
            return []  # text before the first `$ `: a plain script
    return steps


def output_matches(expected: list[str], printed: list[str]) -> bool:
    """Line by line equality, where an expected ``...`` line stands for any number of lines."""
    if not expected:
        return not printed
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(output_matches(rest, printed[skip:]) for skip in range(len(printed) + 1))
    return bool(printed) and printed[0] == head and output_matches(rest, printed[1:])


def _run_shell(block: Block, run: _FileRun) -> None:
    steps = session_steps(block.code)
    if not steps:
        printed = [line.rstrip() for line in _bash(block.code, run.folder, block.name).splitlines()]
        if block.output is not None:
            expected = [line.rstrip() for line in block.output.rstrip("\n").splitlines()]
            assert output_matches(expected, printed), f"{block.name} printed\n" + "\n".join(printed)
        return
    for command, expected in steps:
        printed = [line.rstrip() for line in _bash(command, run.folder, block.name).splitlines()]
        while expected and not expected[-1]:
            expected = expected[:-1]
        assert output_matches(expected, printed), (
            f"{block.name}: `{command}` printed\n" + "\n".join(printed)
        )


def _run_block(block: Block, run: _FileRun, spark: Any = None) -> None:
    if spark is not None:
        run.namespace["spark"] = spark
    try:
        if block.is_python:
            _run_python(block, run)
        else:
            _run_shell(block, run)
    except BaseException:
        run.failed.add(block.index)
        raise
    run.done.add(block.index)


def _file_run(path: Path, factory: pytest.TempPathFactory) -> _FileRun:
    if path not in _RUNS:
        _RUNS[path] = _FileRun(factory.mktemp(path.stem.lower()))
    return _RUNS[path]


def _blocks_params() -> list[Any]:
    params = []
    for block in ALL_BLOCKS:
        marks = [pytest.mark.spark] if block.spark else []
        params.append(pytest.param(block, id=block.name, marks=marks))
    return params


@pytest.mark.parametrize("block", _blocks_params())
def test_doc_block_runs_as_written(
    block: Block,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    if block.no_run_reason is not None:
        pytest.skip(f"marked no-run: {block.no_run_reason}")
    run = _file_run(block.path, tmp_path_factory)
    monkeypatch.chdir(run.folder)
    # The blocks before this one set up its names and files: run those not run yet, in order.
    for earlier in ALL_BLOCKS:
        if earlier.path != block.path or earlier.index >= block.index:
            continue
        if earlier.no_run_reason is not None or earlier.spark or earlier.index in run.done:
            continue
        if earlier.index in run.failed:
            pytest.fail(f"an earlier block of the file failed: {earlier.name}")
        _run_block(earlier, run)
    spark = request.getfixturevalue("spark") if block.spark else None
    _run_block(block, run, spark)


# --- the conventions themselves -----------------------------------------------------------------


def test_every_doc_has_runnable_blocks_and_few_are_marked_no_run() -> None:
    no_run = [block.name for block in ALL_BLOCKS if block.no_run_reason is not None]
    assert len(no_run) <= MAX_NO_RUN_BLOCKS, f"too many blocks marked no-run: {no_run}"
    assert any(block.path.name == "README.md" and block.is_python for block in ALL_BLOCKS)


def test_no_run_and_spark_markers_sit_right_before_a_runnable_block() -> None:
    """A marker before a prose block (or mistyped) would silently run nothing: refuse it."""
    for path in DOC_FILES:
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.startswith("<!-- no-run") and not _SPARK.match(line):
                continue
            assert _NO_RUN.match(line) or _SPARK.match(line), f"{path.name}:{number}: {line}"
            following = next((text for text in lines[number:] if text.strip()), "")
            fence = _FENCE.match(following)
            assert fence and fence.group(1).lower() in PYTHON_FENCES | SHELL_FENCES, (
                f"{path.name}:{number}: the marker is not followed by a python or shell block"
            )


def test_shell_blocks_run_the_ledger_command_of_this_checkout(tmp_path: Path) -> None:
    printed = _bash(
        "command -v ledger; python -c 'import ledger; print(ledger.__file__)'", tmp_path, "probe"
    )
    command, module = printed.splitlines()
    assert Path(command) == _ledger_command()
    assert Path(module).resolve() == ROOT / "ledger" / "__init__.py"


def test_the_shell_blocks_ledger_answers_as_the_process_does(tmp_path: Path) -> None:
    """Arguments, the folder, the environment, standard input, standard error and the exit
    status pass through the blocks' ``ledger`` as through ``python -m ledger``."""
    script = """
        {ledger} init
        echo "SELECT 42 AS answer" | {ledger} sql
        LEDGER_WAREHOUSE=./nowhere {ledger} tables 2>&1 || echo "exit $?"
        """
    answers = []
    for name, ledger in [("in-process", "ledger"), ("process", f'"{sys.executable}" -m ledger')]:
        shutil.rmtree(tmp_path / "warehouse", ignore_errors=True)  # the same folder, anew
        answers.append(_bash(script.format(ledger=ledger), tmp_path, name))
    assert answers[0] == answers[1]
    assert "answer\n42\n" in answers[0] and "exit " in answers[0]


def test_the_harness_reads_sessions_and_wildcards() -> None:
    steps = session_steps("$ echo a\na\n$ printf 'x\\ny\\nz\\n'\nx\n...\n")
    assert steps == [("echo a", ["a"]), ("printf 'x\\ny\\nz\\n'", ["x", "..."])]
    assert session_steps("echo a\n$ echo b\n") == []
    assert output_matches(["x", "..."], ["x", "y", "z"])
    assert output_matches(["...", "z"], ["x", "y", "z"])
    assert not output_matches(["x", "z"], ["x", "y", "z"])
    assert not output_matches(["x"], [])


def test_the_demo_runs_end_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    run_as_script(ROOT / "examples" / "quickstart.py", monkeypatch, str(tmp_path / "wh"))
    printed = capfd.readouterr().out
    assert "history()" in printed and "time travel" in printed
    assert "merge (version" in printed
    assert (tmp_path / "wh" / "payments" / "_log" / "00000000000000000000.jsonl").exists()


# --- links ---------------------------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
# Pages written together with the code they document, on another branch: a link to one is
# checked once the page exists.
PAGES_LANDING_WITH_THEIR_CODE = {"cli.md"}


def heading_anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = heading.lstrip("#").strip().lower()
    kept = "".join(c for c in text if c.isalnum() or c in " -_")
    return kept.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    lines, inside = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = not inside
        elif not inside and line.startswith("#"):
            lines.append(heading_anchor(line))
    return set(lines)


@pytest.mark.parametrize("path", DOC_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_name_files_and_headings_that_exist(path: Path) -> None:
    broken = []
    for target in _LINK.findall(path.read_text(encoding="utf-8")):
        if "://" in target or target.startswith("mailto:"):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists() and linked.name in PAGES_LANDING_WITH_THEIR_CODE:
            continue
        missing_anchor = anchor and linked.suffix == ".md" and anchor not in _anchors(linked)
        if not linked.exists() or missing_anchor:
            broken.append(target)
    assert not broken, f"{path.name}: links to nothing: {broken}"


def test_heading_anchors_follow_github() -> None:
    assert heading_anchor("### 4.4 Transaction timeout") == "44-transaction-timeout"
    assert heading_anchor("## 7. Data files [ledger/writer.py, ledger/schema.py]") == (
        "7-data-files-ledgerwriterpy-ledgerschemapy"
    )
    assert heading_anchor("## 6. `views.connect(warehouse)` / `views.register(con, wh)`") == (
        "6-viewsconnectwarehouse--viewsregistercon-wh"
    )


# --- the module map (docs/concepts.md, "Module map") ------------------------------------------

MAP_PACKAGES = ("ledger", "merge_policies", "views")
_MAP_ROW = re.compile(r"^\| `([\w/]+/)` \|(.*)\|\s*$")
_MAP_PATH = re.compile(r"`([\w/]+(?:\.py|/))`")


def module_map(text: str) -> dict[str, set[str]]:
    """Folder -> the module paths its row of the map names (relative to the repository)."""
    section = text.split("## 13. Module map", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in section.splitlines():
        row = _MAP_ROW.match(line)
        if row:
            folder, described = row.groups()
            found[folder] = {folder + name for name in _MAP_PATH.findall(described)}
    return found


def test_the_map_reader_reads_rows() -> None:
    text = "## 13. Module map\n| `a/` | x `b.py`, `c/d.py`, `connect()` |\n## 14. Next\n| `e/` | |"
    assert module_map(text) == {"a/": {"a/b.py", "a/c/d.py"}}


def test_the_module_map_names_every_module_and_only_modules_that_exist() -> None:
    rows = module_map((ROOT / "docs" / "concepts.md").read_text(encoding="utf-8"))
    named = {path for paths in rows.values() for path in paths}
    missing_folders = sorted(f for f in rows if not (ROOT / f).is_dir())
    missing = sorted(p for p in named if not (ROOT / p).exists())
    modules = {
        path.relative_to(ROOT).as_posix()
        for package in MAP_PACKAGES
        for path in (ROOT / package).rglob("*.py")
    }
    # A package's __init__.py is its folder's row.
    folders = {m.removesuffix("__init__.py") for m in modules if m.endswith("/__init__.py")}
    unnamed = sorted(
        m for m in modules if m not in named and m.removesuffix("__init__.py") not in rows
    )
    assert not missing_folders and not missing, (missing_folders, missing)
    assert not unnamed, f"docs/concepts.md's module map does not name {unnamed}"
    assert folders <= set(rows), sorted(folders - set(rows))
