"""`ledger load` of files already loaded into the table (same mode, paths, sizes, modification
times) warns on stderr and writes nothing, unless --force: a second load no longer doubles the
rows silently."""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.cli import writing
from ledger.transaction import CommitInfo, Transaction
from tests.conftest import examples
from tests.test_cli import as_json, run_ledger

SCHEMA = "id BIGINT, amount BIGINT"


def _warehouse(tmp_path: Path, *key: str) -> Path:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", SCHEMA, *key, cwd=tmp_path)
    (tmp_path / "rows.csv").write_text("id,amount\n1,10\n2,20\n")
    return tmp_path


def _count(tmp_path: Path) -> int:
    result = run_ledger("-w", "wh", "sql", "SELECT count(*) AS n FROM t", "--json", cwd=tmp_path)
    return int(as_json(result)[0]["n"])


def test_loading_the_same_file_again_warns_and_writes_nothing(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path)
    first = run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd)
    assert as_json(first)["inserted"] == 2 and first.stderr == ""
    again = run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd)
    assert as_json(again)["skipped"] is True and as_json(again)["version"] is None
    assert "already loaded" in again.stderr and "--force" in again.stderr
    assert _count(cwd) == 2
    forced = run_ledger("-w", "wh", "load", "t", "rows.csv", "--force", "--json", cwd=cwd)
    assert as_json(forced)["inserted"] == 2 and "skipped" not in as_json(forced)
    assert _count(cwd) == 4


def test_a_changed_file_another_mode_or_another_path_is_loaded(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path, "--key", "id")
    run_ledger("-w", "wh", "load", "t", "rows.csv", cwd=cwd)
    (cwd / "rows.csv").write_text("id,amount\n3,30\n")
    stamp = os.stat(cwd / "rows.csv").st_mtime_ns + 10**9
    os.utime(cwd / "rows.csv", ns=(stamp, stamp))  # a new modification time, whatever the clock
    changed = run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd)
    assert as_json(changed)["inserted"] == 1
    upserted = run_ledger("-w", "wh", "load", "t", "rows.csv", "--mode", "upsert", cwd=cwd)
    assert "already" not in upserted.stderr
    (cwd / "copy").mkdir()
    (cwd / "copy" / "rows.csv").write_text("id,amount\n4,40\n")
    copied = run_ledger("-w", "wh", "load", "t", "copy/rows.csv", "--json", cwd=cwd)
    assert as_json(copied)["inserted"] == 1
    # A folder or a glob is the set of files it matches.
    assert "already" in run_ledger("-w", "wh", "load", "t", "copy", cwd=cwd).stderr
    globbed = run_ledger("-w", "wh", "load", "t", "copy/*.csv", cwd=cwd)
    assert "already" in globbed.stderr
    assert _count(cwd) == 4  # 1, 2, then 3 (inserted, then upserted in place), then 4


def test_two_loads_of_one_file_at_once_commit_it_once(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path)
    results = []

    def load() -> None:
        results.append(
            run_ledger("-w", "wh", "load", "t", "rows.csv", "--json", cwd=cwd, process=True)
        )

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(as_json(r).get("skipped", False) for r in results) == [False, True]
    assert _count(cwd) == 2


def _total(tmp_path: Path) -> tuple[int, int]:
    result = run_ledger(
        "-w", "wh", "sql", "SELECT count(*) AS n, sum(amount) AS s FROM t", "--json", cwd=tmp_path
    )
    row = as_json(result)[0]
    return int(row["n"]), int(row["s"] or 0)


def test_a_folder_loaded_again_after_a_new_file_landed_loads_only_the_new_file(
    tmp_path: Path,
) -> None:
    cwd = _warehouse(tmp_path)
    (cwd / "in").mkdir()
    (cwd / "in" / "a.csv").write_text("id,amount\n1,10\n2,20\n")
    assert as_json(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd))["inserted"] == 2
    again = run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd)
    assert as_json(again)["skipped"] is True
    (cwd / "in" / "b.csv").write_text("id,amount\n3,30\n")
    landed = run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd)
    assert as_json(landed)["inserted"] == 1 and landed.stderr == ""
    assert _total(cwd) == (3, 60)
    # A glob over the same folder is the same files: each is loaded once, whatever the spelling.
    (cwd / "in" / "c.csv").write_text("id,amount\n4,40\n")
    globbed = run_ledger("-w", "wh", "load", "t", "in/*.csv", "--json", cwd=cwd)
    assert as_json(globbed)["inserted"] == 1
    assert as_json(run_ledger("-w", "wh", "load", "t", "in/*.csv", "--json", cwd=cwd))["skipped"]
    assert _total(cwd) == (4, 100)
    # A changed file loads again; --force loads every file again.
    (cwd / "in" / "b.csv").write_text("id,amount\n5,50\n")
    stamp = os.stat(cwd / "in" / "b.csv").st_mtime_ns + 10**9
    os.utime(cwd / "in" / "b.csv", ns=(stamp, stamp))
    assert as_json(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd))["inserted"] == 1
    assert _total(cwd) == (5, 150)
    forced = run_ledger("-w", "wh", "load", "t", "in", "--force", "--json", cwd=cwd)
    assert as_json(forced)["inserted"] == 4
    assert _total(cwd) == (9, 270)


def test_a_load_of_a_folder_racing_another_load_commits_each_file_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two loads of one folder see the same new files; the one committing second finds some of
    them committed by the first when it commits (not when it looked), and commits only the rest."""
    cwd = _warehouse(tmp_path)
    (cwd / "in").mkdir()
    (cwd / "in" / "a.csv").write_text("id,amount\n1,10\n2,20\n")
    run_ledger("-w", "wh", "load", "t", "in", cwd=cwd)
    (cwd / "in" / "b.csv").write_text("id,amount\n3,30\n")
    (cwd / "in" / "c.csv").write_text("id,amount\n4,40\n")
    commit = Transaction.commit
    raced: list[str] = []

    def commit_after_a_rival(self: Transaction) -> CommitInfo:
        if not raced:  # another load commits b.csv between this load's look and its commit
            raced.append(
                run_ledger("-w", "wh", "load", "t", "in/b.csv", cwd=cwd, process=True).stdout
            )
        return commit(self)

    monkeypatch.setattr(Transaction, "commit", commit_after_a_rival)
    late = run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd)
    assert raced and as_json(late)["inserted"] == 1  # c.csv alone
    assert _total(cwd) == (4, 100)
    assert as_json(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd))["skipped"]


def test_two_loads_of_a_folder_at_once_commit_each_file_once(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path)
    (cwd / "in").mkdir()
    (cwd / "in" / "a.csv").write_text("id,amount\n1,10\n2,20\n")
    run_ledger("-w", "wh", "load", "t", "in", cwd=cwd)
    for n in range(3, 6):
        (cwd / "in" / f"f{n}.csv").write_text(f"id,amount\n{n},{n * 10}\n")
    results = []

    def load() -> None:
        results.append(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd, process=True))

    threads = [threading.Thread(target=load) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(as_json(r)["inserted"] for r in results) == 3
    assert _total(cwd) == (5, 150)


# Each step lands a new file of n rows, rewrites the n-th file or leaves the folder alone, then
# loads it (as a folder, as a glob, or with --force).
_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["land", "change", "none"]),
        st.integers(1, 3),
        st.sampled_from(["folder", "glob", "force"]),
    ),
    min_size=2,
    max_size=5,
)


@settings(max_examples=examples(4), deadline=None)
@given(steps=_STEPS)
def test_repeated_folder_loads_load_each_version_of_each_file_once(
    steps: list[tuple[str, int]],
) -> None:
    """Against an oracle of the (file, contents) pairs loaded so far: a load of the folder or a
    glob over it loads exactly the files new or changed since, --force loads every file."""
    with tempfile.TemporaryDirectory() as scratch:
        cwd = _warehouse(Path(scratch))
        landing = cwd / "in"
        landing.mkdir()
        contents: dict[str, tuple[int, int]] = {}  # file -> (rows, version)
        loaded: set[tuple[str, tuple[int, int]]] = set()
        expected_rows = 0
        for action, n, load in steps:
            if action == "land" or (action == "change" and contents):
                if action == "land":
                    name = f"f{len(contents)}.csv"
                    contents[name] = (n, 0)
                else:
                    name = sorted(contents)[n % len(contents)]
                    rows, version = contents[name]
                    contents[name] = (rows % 3 + 1, version + 1)
                rows, version = contents[name]
                lines = "".join(f"{version},{i}\n" for i in range(rows))
                (landing / name).write_text("id,amount\n" + lines)
                # A new modification time whatever the clock's resolution.
                stamp = 10**18 + version * 10**9
                os.utime(landing / name, ns=(stamp, stamp))
            spelling = "in/*.csv" if load == "glob" else "in"
            extra = ["--force"] if load == "force" else []
            result = run_ledger(
                "-w", "wh", "load", "t", spelling, *extra, "--json", cwd=cwd, expect=None
            )
            if not contents:  # nothing landed yet: no file to load
                if load == "glob":  # a glob matching no file names nothing
                    assert result.returncode == 1 and "SourceNotFoundError" in result.stderr
                else:  # an existing folder without data files is empty data
                    assert result.returncode == 0, result.stderr
                    assert as_json(result)["version"] is None
                    assert as_json(result)["inserted"] == 0
                continue
            if load == "force":
                new = list(contents.items())
            else:
                new = [(f, c) for f, c in contents.items() if (f, c) not in loaded]
                loaded.update(new)
            inserted = sum(rows for _, (rows, _) in new)
            expected_rows += inserted
            if new:
                assert as_json(result)["inserted"] == inserted
            else:
                assert as_json(result)["skipped"] is True
        assert ledger.connect(str(cwd / "wh")).table("t").count() == expected_rows


def test_a_file_landing_while_a_load_runs_waits_for_the_next_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load reads exactly the files it named when it looked, so a file landing after that is
    not read under no app id (and loaded again by the next load)."""
    cwd = _warehouse(tmp_path)
    (cwd / "in").mkdir()
    (cwd / "in" / "a.csv").write_text("id,amount\n1,10\n")
    looked = writing.load_tokens

    def look_then_land(source: str, mode: str) -> dict[str, str]:
        tokens = looked(source, mode)
        (cwd / "in" / "b.csv").write_text("id,amount\n2,20\n")
        return tokens

    monkeypatch.setattr(writing, "load_tokens", look_then_land)
    assert as_json(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd))["inserted"] == 1
    monkeypatch.undo()
    assert as_json(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd))["inserted"] == 1
    assert as_json(run_ledger("-w", "wh", "load", "t", "in", "--json", cwd=cwd))["skipped"]
    assert _total(cwd) == (2, 30)


@pytest.mark.parametrize("files", [1, 3])
def test_the_log_and_history_show_the_app_ids_a_load_commits(tmp_path: Path, files: int) -> None:
    cwd = _warehouse(tmp_path)
    (cwd / "in").mkdir()
    for n in range(files):
        (cwd / "in" / f"part-{n}.csv").write_text(f"id,amount\n{n},1\n")
    run_ledger("-w", "wh", "load", "t", "in", cwd=cwd)
    table = ledger.connect(str(cwd / "wh")).table("t")
    table.insert([{"id": 100, "amount": 1}], app_id="feed", batch=7)
    table.insert([{"id": 101, "amount": 1}])
    tokens = writing.load_tokens(str(cwd / "in"), "insert")
    assert len(tokens) == files
    expected = dict.fromkeys(tokens.values(), 1)
    single = next(iter(expected)) if files == 1 else None
    history = table.history()
    shown = [(r.app_id, r.batch, r.apps) for r in history[-3:]]
    assert shown == [
        (single, 1 if single else None, expected),
        ("feed", 7, {"feed": 7}),
        (None, None, {}),
    ]
    logged = as_json(run_ledger("-w", "wh", "log", "t", "--json", cwd=cwd))[:3]
    assert [(r["app_id"], r["batch"], r["apps"]) for r in logged] == [
        (None, None, None),
        ("feed", 7, {"feed": 7}),
        (single, 1 if single else None, expected),
    ]
    piped = run_ledger("-w", "wh", "log", "t", "--limit", "1", cwd=cwd)
    assert piped.stdout.splitlines()[0].split(",")[-1] == "apps"
