"""The ``ledger`` command against real warehouses: in this interpreter through click's test
runner, and as users run it, in a subprocess, where the process matters (exit codes seen by the
shell, pipes, a terminal, tracebacks, commands run at once).

Warehouses the commands only read are set up through the library (cheaper than a process per
step); everything the command itself is asked to do is checked by reading the result back,
through the library or by parsing the command's JSON or CSV output.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import subprocess
import sys
import traceback
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import ledger
import views
from ledger.cli import cli
from tests.support.s3server import BUCKET, CREDENTIALS

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = 'payment_id VARCHAR, account VARCHAR, "montant €" DECIMAL(18,2)'
PAYMENTS_CSV = "payment_id,account,montant €\nP-1,alice,100.10\nP-2,bob,1000\nP-3,zoë,0.05\n"


def run_ledger(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    expect: int | None = 0,
    process: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``ledger ARGS`` in ``cwd``, stdout and stderr captured apart, importing this checkout.

    The command runs in this interpreter through click's test runner (a fresh interpreter costs
    a second of imports per call), unless ``process`` is set or ``--debug`` is given: then it is
    ``python -m ledger`` in a subprocess, as users run it (the library's log and tracebacks reach
    the real stderr, and commands run from several threads at once stay apart). A few tests
    run the command as a process on purpose: the entry point, pipes, a terminal, exit codes."""
    if process or "--debug" in args:
        return _run_ledger_process(*args, cwd=cwd, env=env, stdin=stdin, expect=expect)
    environment: dict[str, str | None] = {**(env or {})}
    if "LEDGER_WAREHOUSE" not in environment:
        environment["LEDGER_WAREHOUSE"] = None
    with contextlib.chdir(cwd):
        outcome = CliRunner().invoke(
            cli, list(args), input=stdin, env=environment, prog_name="ledger"
        )
    stderr = outcome.stderr
    if outcome.exception is not None and not isinstance(outcome.exception, SystemExit):
        assert outcome.exc_info is not None
        # What the interpreter prints for an exception the command let through (exit code 1).
        stderr += "".join(traceback.format_exception(*outcome.exc_info))
    result = subprocess.CompletedProcess(
        ["ledger", *args], outcome.exit_code, outcome.stdout, stderr
    )
    if expect is not None:
        assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
    return result


def _run_ledger_process(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    expect: int | None = 0,
) -> subprocess.CompletedProcess[str]:
    """``python -m ledger ARGS`` in ``cwd``, importing this checkout, stdout piped."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    if "LEDGER_WAREHOUSE" not in (env or {}):
        environment.pop("LEDGER_WAREHOUSE", None)
    result = subprocess.run(
        [sys.executable, "-m", "ledger", *args],
        cwd=cwd,
        env=environment,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if expect is not None:
        assert result.returncode == expect, (result.returncode, result.stdout, result.stderr)
    return result


def as_json(result: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(result.stdout)


def data_files(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*.parquet"))


# --- the happy path of every subcommand ----------------------------------------------------------


def test_a_warehouse_built_and_read_through_the_command(tmp_path: Path) -> None:
    (tmp_path / "payments.csv").write_text(PAYMENTS_CSV, encoding="utf-8")
    (tmp_path / "fix.jsonl").write_text(
        '{"payment_id": "P-2", "account": "bob", "montant €": 999.99}\n'
        '{"payment_id": "P-4", "account": "alice", "montant €": 12.5}\n',
        encoding="utf-8",
    )
    pq.write_table(
        pa.table({"payment_id": ["P-1"]}), tmp_path / "cancel.parquet"
    )  # the keys to delete

    made = as_json(run_ledger("init", "wh", "--json", cwd=tmp_path))
    assert made == {"warehouse": f"file://{tmp_path / 'wh'}", "tables": 0}
    env = {"LEDGER_WAREHOUSE": str(tmp_path / "wh")}
    created = run_ledger(
        "create",
        "payments",
        "--schema",
        SCHEMA,
        "--key",
        "payment_id",
        "--json",
        cwd=tmp_path,
        env=env,
    )
    assert as_json(created) == {"table": "payments", "version": 0, "columns": 3}
    loads = [
        as_json(run_ledger("load", "payments", "payments.csv", "--json", cwd=tmp_path, env=env)),
        as_json(
            run_ledger(
                "load", "payments", "fix.jsonl", "--mode", "upsert", "--json", cwd=tmp_path, env=env
            )
        ),
        as_json(
            run_ledger(
                "load",
                "payments",
                "cancel.parquet",
                "--mode",
                "delete",
                "--json",
                cwd=tmp_path,
                env=env,
            )
        ),
    ]
    assert [(x["version"], x["inserted"], x["deleted"]) for x in loads] == [
        (1, 3, 0),
        (2, 2, 1),
        (3, 0, 1),
    ]

    table = ledger.connect(str(tmp_path / "wh")).table("payments")
    assert table.schema == {
        "payment_id": "VARCHAR",
        "account": "VARCHAR",
        "montant €": "DECIMAL(18,2)",
    }
    assert sorted(views.visible(table).fetchall()) == [
        ("P-2", "bob", Decimal("999.99")),
        ("P-3", "zoë", Decimal("0.05")),
        ("P-4", "alice", Decimal("12.50")),
    ]
    shown = as_json(run_ledger("show", "payments", "--json", cwd=tmp_path, env=env))
    assert shown == [
        {"payment_id": "P-2", "account": "bob", "montant €": "999.99"},
        {"payment_id": "P-3", "account": "zoë", "montant €": "0.05"},
        {"payment_id": "P-4", "account": "alice", "montant €": "12.50"},
    ]
    # Piped without a format flag: CSV, the same values.
    piped = run_ledger(
        "show", "payments", "--where", '"montant €" < 100', "--limit", "1", cwd=tmp_path, env=env
    )
    assert list(csv.reader(io.StringIO(piped.stdout))) == [
        ["payment_id", "account", "montant €"],
        ["P-3", "zoë", "0.05"],
    ]
    first_load = as_json(
        run_ledger("show", "payments", "--version", "1", "--json", cwd=tmp_path, env=env)
    )
    assert [r["montant €"] for r in first_load] == ["100.10", "1000.00", "0.05"]

    totals = as_json(
        run_ledger(
            "totals",
            "payments",
            "--by",
            "account",
            "--sum",
            "montant €",
            "--json",
            cwd=tmp_path,
            env=env,
        )
    )
    assert totals == [
        {"account": "alice", "count": 1, "sum_montant €": "12.50"},
        {"account": "bob", "count": 1, "sum_montant €": "999.99"},
        {"account": "zoë", "count": 1, "sum_montant €": "0.05"},
    ]
    history = as_json(run_ledger("log", "payments", "--json", cwd=tmp_path, env=env))
    assert [(c["version"], c["operation"], c["inserted"], c["deleted"]) for c in history][:3] == [
        (3, "delete", 0, 1),
        (2, "upsert", 2, 1),
        (1, "insert", 3, 0),
    ]
    changed = as_json(
        run_ledger("changes", "payments", "--since", "2", "--json", cwd=tmp_path, env=env)
    )
    assert [(c["payment_id"], c["_change_type"], c["montant €"]) for c in changed] == [
        ("P-1", "delete", "100.10")
    ]
    listed = as_json(run_ledger("tables", "--json", cwd=tmp_path, env=env))
    assert listed == [
        {
            "table": "payments",
            "version": 3,
            "live_entries": 3,
            "key": "payment_id",
            "policy": "collapsing",
        }
    ]


def test_describe_names_schema_key_policy_and_partitions_with_counts(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    events = warehouse.create_table(
        "events",
        {"id": "BIGINT", "day": "VARCHAR", "n": "BIGINT", "v": "BIGINT"},
        primary_key="id",
        partition_by="day",
        policy={"name": "replacing", "version_column": "v"},
    )
    events.insert([{"id": 1, "day": "d1", "n": 1, "v": 1}, {"id": 2, "day": "d2", "n": 2, "v": 1}])
    events.insert([{"id": 3, "day": "d1", "n": 3, "v": 1}])
    events.delete([2])
    described = as_json(run_ledger("-w", "wh", "describe", "events", "--json", cwd=tmp_path))
    assert described["schema"] == {"id": "BIGINT", "day": "VARCHAR", "n": "BIGINT", "v": "BIGINT"}
    assert described["primary_key"] == ["id"] and described["partition_by"] == ["day"]
    assert described["policy"] == {"name": "replacing", "version_column": "v"}
    assert described["live_entries"] == 2 and described["version"] == 3
    assert described["partitions"] == [
        {
            "partition": "day=d1",
            "files": 2,
            "live_entries": 2,
            "entries": 2,
            "bytes": described["partitions"][0]["bytes"],
        },
        {
            "partition": "day=d2",
            "files": 2,
            "live_entries": 0,
            "entries": 2,
            "bytes": described["partitions"][1]["bytes"],
        },
    ]
    assert all(p["bytes"] > 0 for p in described["partitions"])
    assert described["config"]["table_uuid"] == events.config["table_uuid"]
    # The text (CSV) output gives each partition's bytes too, from the file markers.
    text = run_ledger("-w", "wh", "describe", "events", "--csv", cwd=tmp_path).stdout
    for partition in described["partitions"]:
        assert (
            f"partition.{partition['partition']},files={partition['files']} "
            f"live_entries={partition['live_entries']} entries={partition['entries']} "
            f"bytes={partition['bytes']}\n"
        ) in text


def test_maintenance_commands_change_no_answer(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    events = warehouse.create_table(
        "events",
        {"id": "BIGINT", "day": "VARCHAR", "amount": "DECIMAL(10,2)"},
        primary_key="id",
        partition_by="day",
    )
    for i in range(4):
        events.insert([{"id": i, "day": f"d{i % 2}", "amount": Decimal("1.25") * i}])
    events.update([{"id": 3, "day": "d1", "amount": Decimal("0.01")}])
    before = sorted(views.visible(events).fetchall())

    merged = as_json(run_ledger("-w", "wh", "merge", "events", "--json", cwd=tmp_path))
    assert merged["version"] == 6 and merged["partitions"] == 2
    assert (merged["files_in"], merged["files_out"]) == (5, 2)  # the update wrote one file
    assert sorted(views.visible(events.refresh()).fetchall()) == before

    vacuumed = as_json(
        run_ledger("-w", "wh", "vacuum", "events", "--grace", "0s", "--json", cwd=tmp_path)
    )
    assert vacuumed["data_files_deleted"] == 5
    assert len(data_files(tmp_path / "wh" / "events")) == 2
    assert sorted(views.visible(events.refresh()).fetchall()) == before

    dropped = as_json(
        run_ledger(
            "-w", "wh", "drop-partitions", "events", "--partition", "day=d0", "--json", cwd=tmp_path
        )
    )
    assert dropped["files_removed"] == 1 and dropped["entries_removed"] == 2
    assert sorted(views.visible(events.refresh()).fetchall()) == [
        (1, "d1", Decimal("1.25")),
        (3, "d1", Decimal("0.01")),
    ]
    # Naming no partition is a usage error, not "drop everything".
    refused = run_ledger("-w", "wh", "drop-partitions", "events", cwd=tmp_path, expect=2)
    assert "--partition" in refused.stderr
    assert events.refresh().count() == 2

    # A partition's lone file holding a mark: `--min-files 1` collapses it, the default not.
    row = {"id": 9, "day": "d9", "amount": Decimal("1.00")}
    events.append_entries([{**row, "dml_type": 1}, {**row, "dml_type": -1}])
    assert (
        as_json(run_ledger("-w", "wh", "merge", "events", "--json", cwd=tmp_path))["files_in"] == 0
    )
    collapsed = as_json(
        run_ledger("-w", "wh", "merge", "events", "--min-files", "1", "--json", cwd=tmp_path)
    )
    assert collapsed["files_in"] == 1 and collapsed["files_out"] == 0
    assert events.refresh().count() == 2


def test_rollup_and_publish(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    warehouse = ledger.connect(str(tmp_path / "wh"))
    payments = warehouse.create_table(
        "payments",
        {"id": "VARCHAR", "account": "VARCHAR", "amount": "DECIMAL(18,2)"},
        primary_key="id",
    )
    payments.insert(
        [
            {"id": "a", "account": "x", "amount": Decimal("1.10")},
            {"id": "b", "account": "y", "amount": Decimal("2.20")},
        ]
    )
    made = as_json(
        run_ledger(
            "-w",
            "wh",
            "rollup",
            "create",
            "per_account",
            "--of",
            "payments",
            "--by",
            "account",
            "--measure",
            "total=sum(amount)",
            "--json",
            cwd=tmp_path,
        )
    )
    assert made == {"rollup": "per_account", "base": "payments", "watermark": 1}
    payments.update([{"id": "a", "amount": Decimal("5.00")}])
    refreshed = as_json(
        run_ledger("-w", "wh", "rollup", "refresh", "per_account", "--json", cwd=tmp_path)
    )
    assert refreshed["watermark"] == 2 and refreshed["groups"] == 1
    rollup = as_json(run_ledger("-w", "wh", "show", "per_account", "--json", cwd=tmp_path))
    assert [(r["account"], r["total"]) for r in rollup] == [("x", "5.00"), ("y", "2.20")]

    published = as_json(
        run_ledger(
            "-w", "wh", "publish", "payments", str(tmp_path / "lake"), "--json", cwd=tmp_path
        )
    )
    assert (published["version"], published["rows_inserted"], published["full"]) == (2, 2, True)
    delta = DeltaTable(str(tmp_path / "lake")).to_pyarrow_table().sort_by("id")
    assert delta.select(["id", "amount"]).to_pylist() == [
        {"id": "a", "amount": Decimal("5.00")},
        {"id": "b", "amount": Decimal("2.20")},
    ]


def test_sql_sees_every_table_and_its_ledger_by_name(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    payments = warehouse.create_table(
        "payments", {"id": "VARCHAR", "amount": "DOUBLE"}, primary_key="id"
    )
    payments.insert([{"id": "a", "amount": 1.5}, {"id": "b", "amount": float("nan")}])
    payments.delete(["a"])
    asked = as_json(
        run_ledger(
            "-w", "wh", "sql", "--json", "SELECT id, amount FROM payments ORDER BY id", cwd=tmp_path
        )
    )
    assert asked == [{"id": "b", "amount": "NaN"}]
    piped = run_ledger(
        "-w",
        "wh",
        "sql",
        cwd=tmp_path,
        stdin="SELECT count(*) AS marks FROM payments_ledger WHERE dml_type = -1;\n"
        "SELECT sum(dml_type) AS net FROM payments_ledger;",
    )
    assert piped.stdout.splitlines() == ["marks", "1", "net", "1"]


@pytest.mark.parametrize(
    "query",
    [
        "COPY (SELECT 1) TO '{out}'",
        "SELECT * FROM read_csv('{secret}')",
        "ATTACH '{out}' AS other",
        "SELECT 42 AS answer; COPY (SELECT 1) TO '{out}'",  # nothing runs before the refusal
    ],
)
def test_sql_cannot_read_or_write_files(tmp_path: Path, query: str) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id").insert([{"id": 1}])
    (tmp_path / "secret.csv").write_text("password\nhunter2\n")
    out = tmp_path / "out.csv"
    text = query.format(out=out, secret=tmp_path / "secret.csv")
    refused = run_ledger("-w", "wh", "sql", text, cwd=tmp_path, expect=1)
    assert refused.stderr.count("\n") == 1 and "Error" in refused.stderr
    assert "hunter2" not in refused.stdout and "42" not in refused.stdout
    assert not out.exists()
    assert warehouse.tables() == ["t"]


def test_output_piped_into_a_reader_that_stops_early(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("t", {"id": "BIGINT", "label": "VARCHAR"}, primary_key="id")
    table.insert(
        pa.table({"id": range(50_000), "label": [f"row number {i}" for i in range(50_000)]})
    )
    result = subprocess.run(
        ["bash", "-c", f"'{sys.executable}' -m ledger -w wh show t | head -n 2"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.stdout.splitlines() == ["id,label", "0,row number 0"]
    assert "Error" not in result.stderr and "Traceback" not in result.stderr, result.stderr


def test_sql_prompt_on_a_terminal(tmp_path: Path) -> None:
    import pty
    import select

    warehouse = ledger.connect(str(tmp_path / "wh"))
    warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id").insert([{"id": 41}])
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "ledger", "-w", "wh", "sql"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TERM": "dumb"},
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
    )
    os.close(terminal)
    os.write(controller, b"SELECT id + 1 AS answer\n  FROM t;\nSELECT nope FROM t;\n.quit\n")
    seen = b""
    while process.poll() is None or select.select([controller], [], [], 0.1)[0]:
        if select.select([controller], [], [], 0.5)[0]:
            try:
                seen += os.read(controller, 4096)
            except OSError:
                break
    process.wait(timeout=60)
    os.close(controller)
    screen = seen.decode().replace("\r", "")
    assert process.returncode == 0, screen
    # On a terminal: an aligned table, the value under its column name.
    table_lines = [
        line
        for line in screen.splitlines()
        if ("answer" in line or "42" in line) and line.lstrip()[:1] in ("┃", "│")
    ]
    assert len(table_lines) == 2, screen
    assert (
        table_lines[0].index("answer")
        <= table_lines[1].index("42")
        < table_lines[0].index("answer") + len("answer")
    ), screen
    assert "Error:" in screen and "nope" in screen  # a bad query does not end the prompt


def test_bench_prints_ratios_against_baselines(tmp_path: Path) -> None:
    figures = as_json(
        run_ledger("bench", "--rows", "2000", "--repeats", "1", "--json", cwd=tmp_path)
    )
    assert [f["figure"] for f in figures] == ["append", "visible", "totals", "count"]
    for figure in figures:
        assert figure["ledger_ms"] > 0 and figure["baseline_ms"] > 0
        assert figure["ratio"] == pytest.approx(
            figure["ledger_ms"] / figure["baseline_ms"], rel=0.05, abs=0.01
        )
        assert figure["target"].startswith("<= ")
    assert not any(tmp_path.iterdir())  # the bench leaves nothing behind


def test_library_progress_reaches_the_reporter_a_front_end_installs(tmp_path: Path) -> None:
    from contextlib import contextmanager

    from ledger.progress import reporting_to

    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT"}, primary_key="id"
    )
    for i in range(3):
        table.insert([{"id": i}, {"id": i + 10}])
    reports: list[tuple[int, str, str]] = []
    advanced: list[int] = []

    @contextmanager
    def reporter(total: int, description: str, unit: str) -> Any:
        reports.append((total, description, unit))
        yield advanced.append

    with reporting_to(reporter):
        table.merge()
    assert reports == [(6, "merge t", "entries")]
    assert sum(advanced) == 6
    assert sorted(r[0] for r in views.visible(table.refresh()).fetchall()) == [0, 1, 2, 10, 11, 12]


def test_every_command_has_help_with_an_example() -> None:
    runner = CliRunner()
    paths = [[]] + [[name] for name in cli.commands] + [["rollup", "create"], ["rollup", "refresh"]]
    for path in paths:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, (path, result.output)
        assert "Example" in result.output, path


def test_the_console_script_is_declared() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["ledger"] == "ledger.cli:main"
    assert run_ledger("--version", cwd=ROOT).stdout.startswith("ledger, version ")


# --- bad input: one line on stderr, a non-zero exit, nothing written ----------------------------


def test_a_missing_warehouse_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    for args in (["show", "t"], ["load", "t", "x.csv"]):
        # A process of its own: the exit code and stderr the shell sees.
        result = run_ledger("-w", "nowhere", *args, cwd=tmp_path, expect=1, process=True)
        assert result.stderr.startswith("Error: no warehouse at 'nowhere'")
        assert result.stderr.count("\n") == 1
        assert not (tmp_path / "nowhere").exists()
    run_ledger("-w", "nowhere", "init", cwd=tmp_path)
    assert (tmp_path / "nowhere").is_dir()


def test_bad_input_fails_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table(
        "payments", {"id": "VARCHAR", "amount": "DECIMAL(18,2)", "n": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": "a", "amount": Decimal("1.00"), "n": 1}])
    before = (table.version, data_files(tmp_path / "wh"))
    (tmp_path / "mismatch.csv").write_text("id,amount,n\nb,2.00,3\nc,abc,4\n")
    (tmp_path / "broken.jsonl").write_text('{"id": "b", "amount": 2}\n{"id": "c", \n')
    (tmp_path / "ragged.csv").write_text('id,amount,n\nb,2.00,3\nc,"unterminated\n')
    (tmp_path / "not.parquet").write_bytes(b"PAR1 but not really")
    (tmp_path / "nokey.csv").write_text("amount,n\n2.00,3\n")
    cases = {
        "mismatch.csv": "TypeMismatchError|MalformedSourceError",
        "broken.jsonl": "MalformedSourceError",
        "ragged.csv": "MalformedSourceError",
        "not.parquet": "MalformedSourceError",
        "nokey.csv": "MissingKeyError",
        "missing.csv": "SourceNotFoundError",
    }
    for (source, errors), mode in zip(cases.items(), ["insert", "upsert"] * 3, strict=True):
        result = run_ledger(
            "-w", "wh", "load", "payments", source, "--mode", mode, cwd=tmp_path, expect=1
        )
        assert result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith("Error: "), result.stderr
        assert any(e in result.stderr for e in errors.split("|")), (source, result.stderr)
        assert "Traceback" not in result.stderr
        assert (table.refresh().version, data_files(tmp_path / "wh")) == before, source

    missing = run_ledger("-w", "wh", "show", "nosuch", cwd=tmp_path, expect=1)
    assert missing.stderr.startswith("Error: TableNotFoundError") and "nosuch" in missing.stderr
    bad_where = run_ledger(
        "-w", "wh", "show", "payments", "--where", "nope > 1", cwd=tmp_path, expect=1
    )
    assert "UnknownPredicateColumnError" in bad_where.stderr
    unsafe_where = run_ledger(
        "-w",
        "wh",
        "show",
        "payments",
        "--where",
        "id IN (SELECT * FROM read_csv('/etc/passwd'))",
        cwd=tmp_path,
        expect=1,
    )
    assert "Predicate" in unsafe_where.stderr and "root:" not in unsafe_where.stdout
    flag = run_ledger(
        "-w", "wh", "show", "payments", "--bogus", cwd=tmp_path, expect=2, process=True
    )
    assert "No such option" in flag.stderr and "--bogus" in flag.stderr
    bad_mode = run_ledger(
        "-w", "wh", "load", "payments", "x.csv", "--mode", "merge", cwd=tmp_path, expect=2
    )
    assert "'merge' is not one of" in bad_mode.stderr
    traced = run_ledger(
        "--debug", "-w", "wh", "load", "payments", "mismatch.csv", cwd=tmp_path, expect=1
    )
    assert "Traceback (most recent call last)" in traced.stderr
    assert (table.refresh().version, data_files(tmp_path / "wh")) == before


def test_create_refuses_bad_definitions_before_writing(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    warehouse.create_table("taken", {"id": "BIGINT"}, primary_key="id")
    cases = [
        (["create", "t", "--schema", "id BIGINT", "--key", "nope"], 1, "SchemaError"),
        (["create", "t", "--schema", "id BIGINT, amount"], 2, "not 'name TYPE'"),
        (["create", "t", "--schema", "id NOTATYPE"], 1, "NOTATYPE"),
        (["create", "t", "--schema", "id BIGINT", "--policy", "fancy"], 1, "fancy"),
        (["create", "t"], 2, "--schema"),
        (["create", "taken", "--schema", "id BIGINT"], 1, "TableExistsError"),
    ]
    for args, code, text in cases:
        result = run_ledger("-w", "wh", *args, cwd=tmp_path, expect=code)
        assert text in result.stderr, (args, result.stderr)
    assert warehouse.tables() == ["taken"]
    assert sorted(p.name for p in (tmp_path / "wh").iterdir()) == ["taken"]


def test_a_schema_from_a_file(tmp_path: Path) -> None:
    (tmp_path / "schema.json").write_text('{"id": "BIGINT", "at": "TIMESTAMPTZ"}')
    pq.write_table(
        pa.table({"k": pa.array([1], pa.int32()), "name": ["x"]}), tmp_path / "s.parquet"
    )
    run_ledger("init", "wh", cwd=tmp_path)
    run_ledger(
        "-w", "wh", "create", "a", "--schema-file", "schema.json", "--key", "id", cwd=tmp_path
    )
    run_ledger("-w", "wh", "create", "b", "--schema-file", "s.parquet", cwd=tmp_path)
    warehouse = ledger.connect(str(tmp_path / "wh"))
    assert warehouse.table("a").schema == {"id": "BIGINT", "at": "TIMESTAMPTZ"}
    assert warehouse.table("b").schema == {"k": "INTEGER", "name": "VARCHAR"}


def test_json_output_keeps_types_time_zones_nulls_and_nan(tmp_path: Path) -> None:
    import pandas as pd

    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table(
        "readings",
        {
            "id": "BIGINT",
            "at": "TIMESTAMPTZ",
            "value": "DOUBLE",
            "note": "VARCHAR",
            "rate": "DECIMAL(38,10)",
        },
        primary_key="id",
    )
    # A pandas frame with a zone (NaN in pandas means missing: NULL), and a real NaN from Arrow.
    table.insert(
        pd.DataFrame(
            {
                "id": [1, 2],
                "at": pd.to_datetime(["2026-01-31 12:00", "2026-02-01 00:30"]).tz_localize(
                    "Europe/Paris"
                ),
                "value": [21.25, float("nan")],
                "note": ["ok", None],
            }
        )
    )
    table.insert(pa.table({"id": [3], "value": pa.array([float("nan")], pa.float64())}))
    table.update([{"id": 1, "rate": Decimal(0)}, {"id": 3, "rate": Decimal("0.0000001")}])
    shown = as_json(run_ledger("-w", "wh", "show", "readings", "--json", cwd=tmp_path))
    assert shown == [
        {
            "id": 1,
            "at": "2026-01-31T11:00:00+00:00",
            "value": 21.25,
            "note": "ok",
            "rate": "0.0000000000",
        },
        {"id": 2, "at": "2026-01-31T23:30:00+00:00", "value": None, "note": None, "rate": None},
        {"id": 3, "at": None, "value": "NaN", "note": None, "rate": "0.0000001000"},
    ]
    piped = run_ledger("-w", "wh", "show", "readings", "--where", "rate IS NOT NULL", cwd=tmp_path)
    assert [row[-1] for row in csv.reader(io.StringIO(piped.stdout))] == [
        "rate",
        "0.0000000000",
        "0.0000001000",
    ]


def test_an_s3_warehouse_through_the_endpoint_and_aws_variables(
    tmp_path: Path, s3_endpoint: Any
) -> None:
    prefix = f"s3://{BUCKET}/{uuid.uuid4().hex}"
    env = {
        "LEDGER_WAREHOUSE": prefix,
        "AWS_ACCESS_KEY_ID": CREDENTIALS["access_key_id"],
        "AWS_SECRET_ACCESS_KEY": CREDENTIALS["secret_access_key"],
        "AWS_DEFAULT_REGION": CREDENTIALS["region"],
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    endpoint = ["--endpoint-url", s3_endpoint.url]
    s3_endpoint.client().put_object(
        Bucket=BUCKET, Key="incoming/payments.csv", Body=PAYMENTS_CSV.encode()
    )
    run_ledger(*endpoint, "init", cwd=tmp_path, env=env)
    run_ledger(
        *endpoint,
        "create",
        "payments",
        "--schema",
        SCHEMA,
        "--key",
        "payment_id",
        cwd=tmp_path,
        env=env,
    )
    loaded = as_json(
        run_ledger(
            *endpoint,
            "load",
            "payments",
            f"s3://{BUCKET}/incoming/payments.csv",
            "--json",
            cwd=tmp_path,
            env=env,
        )
    )
    assert loaded["inserted"] == 3
    totals = as_json(
        run_ledger(
            *endpoint, "totals", "payments", "--sum", "montant €", "--json", cwd=tmp_path, env=env
        )
    )
    assert totals == [{"count": 3, "sum_montant €": "1100.15"}]
    table = ledger.connect(prefix, **s3_endpoint.options()).table("payments")
    assert table.count() == 3
    # The endpoint from AWS_ENDPOINT_URL; SQL reads S3 files with DuckDB's file access off.
    queried = run_ledger(
        "sql",
        "--json",
        'SELECT max("montant €") AS top FROM payments',
        cwd=tmp_path,
        env={**env, "AWS_ENDPOINT_URL": s3_endpoint.url},
    )
    assert as_json(queried) == [{"top": "1000.00"}]

    missing = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/wh"
    result = run_ledger(*endpoint, "-w", missing, "tables", cwd=tmp_path, env=env, expect=1)
    assert "does not exist" in result.stderr and result.stderr.count("\n") == 1
    buckets = [b["Name"] for b in s3_endpoint.client().list_buckets()["Buckets"]]
    assert not any(b.startswith("no-such-bucket") for b in buckets)
