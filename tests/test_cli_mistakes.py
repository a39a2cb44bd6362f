"""The ``ledger`` command against a new user's mistakes: each is refused or said plainly, in the
command's own terms, before anything is written."""

from __future__ import annotations

import datetime as dt
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import ledger
from ledger.cli.parsing import duration, duration_text
from tests.test_cli import as_json, data_files, run_ledger


@pytest.mark.parametrize("grace", ["7", "0", "1.5", "7x", "7 days"])
def test_a_duration_without_a_known_unit_is_a_usage_error(tmp_path: Path, grace: str) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    table.insert([{"id": 1}])
    table.merge()
    files = data_files(tmp_path / "wh")
    refused = run_ledger("-w", "wh", "vacuum", "t", "--grace", grace, cwd=tmp_path, expect=2)
    assert "--grace" in refused.stderr
    assert all(unit in refused.stderr for unit in ("s (seconds)", "d (days)", "w (weeks)"))
    assert data_files(tmp_path / "wh") == files  # nothing deleted


def test_durations_are_printed_as_they_are_written(tmp_path: Path) -> None:
    ledger.connect(str(tmp_path / "wh")).create_table("t", {"id": "BIGINT"}, primary_key="id")
    default = as_json(run_ledger("-w", "wh", "vacuum", "t", "--json", cwd=tmp_path))
    assert default["grace"] == "7d"
    piped = run_ledger("-w", "wh", "vacuum", "t", "--grace", "0s", cwd=tmp_path)
    header, values = piped.stdout.splitlines()
    assert dict(zip(header.split(","), values.split(","), strict=True))["grace"] == "0s"
    assert "days" not in piped.stdout and "0:00:00" not in piped.stdout


def test_duration_text_reads_back_as_the_same_duration() -> None:
    for text in ["0s", "30s", "15m", "2h", "7d", "14d", "90m", "1.5s"]:
        assert duration_text(duration(text)) == text
    assert duration("1w") == dt.timedelta(days=7) and duration_text(duration("1w")) == "7d"


def test_tables_and_describe_name_live_entries_for_what_they_are(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    sums = warehouse.create_table(
        "sums",
        {"k": "VARCHAR", "n": "BIGINT"},
        primary_key="k",
        policy={"name": "aggregating", "measures": {"n": "sum"}},
    )
    sums.insert([{"k": k, "n": 1} for k in "abcd"])
    sums.insert([{"k": "a", "n": 1}])  # 5 entries, 4 visible rows (groups)
    listed = as_json(run_ledger("-w", "wh", "tables", "--json", cwd=tmp_path))
    assert listed == [
        {"table": "sums", "version": 2, "live_entries": 4, "key": "k", "policy": "aggregating"}
    ]
    described = as_json(run_ledger("-w", "wh", "describe", "sums", "--json", cwd=tmp_path))
    assert described["live_entries"] == 4 and "rows" not in described
    assert [(p["live_entries"], p["entries"]) for p in described["partitions"]] == [(4, 5)]
    visible = as_json(
        run_ledger("-w", "wh", "sql", "SELECT count(*) AS n FROM sums", "--json", cwd=tmp_path)
    )
    assert visible == [{"n": 4}]


def test_init_on_a_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    result = run_ledger("init", "notes.txt", cwd=tmp_path, expect=1)
    assert result.stderr.startswith("Error: cannot make a warehouse at 'notes.txt': it is a file")
    assert "Errno" not in result.stderr and result.stderr.count("\n") == 1
    below = run_ledger("init", "notes.txt/wh", cwd=tmp_path, expect=1)
    assert below.stderr.startswith("Error: cannot make a warehouse at 'notes.txt/wh'")
    assert (tmp_path / "notes.txt").read_text() == "hello"


def test_an_existing_table_is_named_with_the_commands_that_use_it(tmp_path: Path) -> None:
    ledger.connect(str(tmp_path / "wh")).create_table("taken", {"id": "BIGINT"})
    result = run_ledger(
        "-w", "wh", "create", "taken", "--schema", "id BIGINT", cwd=tmp_path, expect=1
    )
    assert result.stderr.startswith("Error: TableExistsError: table 'taken' already exists")
    assert "ledger load taken FILE" in result.stderr and "ledger describe taken" in result.stderr
    assert "warehouse.table" not in result.stderr
    with pytest.raises(ledger.errors.TableExistsError, match=r"warehouse\.table\(name\)"):
        ledger.connect(str(tmp_path / "wh")).create_table("taken", {"id": "BIGINT"})


def test_a_mistyped_table_name_gets_the_closest_names(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    for name in ("orders", "payments"):
        warehouse.create_table(name, {"id": "BIGINT"}, primary_key="id")
    for args in (["show", "order"], ["describe", "order"], ["rollup", "refresh", "order"]):
        result = run_ledger("-w", "wh", *args, cwd=tmp_path, expect=1)
        assert result.stderr.startswith("Error: TableNotFoundError: table 'order' does not")
        assert "did you mean 'orders'?" in result.stderr, result.stderr
    far = run_ledger("-w", "wh", "show", "zzz", cwd=tmp_path, expect=1)
    assert "did you mean" not in far.stderr and "`ledger tables` lists the tables" in far.stderr


def test_dropping_partitions_that_match_nothing_says_so(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    events = warehouse.create_table(
        "events", {"id": "BIGINT", "month": "VARCHAR"}, primary_key="id", partition_by="month"
    )
    events.insert([{"id": 1, "month": "2026-01"}])
    result = run_ledger(
        "-w", "wh", "drop-partitions", "events", "--partition", "month=2026-13", cwd=tmp_path
    )
    assert result.stderr.startswith("nothing matched: no partition of events was dropped")
    assert events.refresh().count() == 1 and events.version == 1
    dropped = run_ledger(
        "-w", "wh", "drop-partitions", "events", "--partition", "month=2026-01", cwd=tmp_path
    )
    assert dropped.stderr == "" and events.refresh().count() == 0


def test_a_table_dropped_during_a_command_is_said_in_the_commands_terms(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from ledger.cli import cli
    from ledger.cli.session import Session
    from ledger.errors import TableDroppedError

    def dropped(self: Session, name: str) -> None:
        raise TableDroppedError(f"table {name!r} was dropped; open it again with warehouse.table")

    monkeypatch.setattr(Session, "table", dropped)
    (tmp_path / "wh").mkdir()
    result = CliRunner().invoke(cli, ["-w", str(tmp_path / "wh"), "show", "t"])
    assert result.exit_code == 1
    assert "TableDroppedError: the table was dropped while the command ran" in result.output
    assert "warehouse.table" not in result.output


def test_a_file_with_new_columns_names_the_flag_that_adds_them(tmp_path: Path) -> None:
    ledger.connect(str(tmp_path / "wh")).create_table("t", {"id": "BIGINT"}, primary_key="id")
    (tmp_path / "more.csv").write_text("id,colour\n1,red\n")
    refused = run_ledger("-w", "wh", "load", "t", "more.csv", cwd=tmp_path, expect=1)
    assert "--evolve-schema" in refused.stderr and "evolve_schema=True" not in refused.stderr
    assert data_files(tmp_path / "wh") == []
    run_ledger("-w", "wh", "load", "t", "more.csv", "--evolve-schema", cwd=tmp_path)
    table = ledger.connect(str(tmp_path / "wh")).table("t")
    assert table.to_arrow().to_pylist() == [{"id": 1, "colour": "red"}]


def test_a_misspelt_table_in_sql_is_a_table_not_found_with_the_close_names(tmp_path: Path):
    warehouse = ledger.connect(str(tmp_path / "wh"))
    warehouse.create_table("orders", {"id": "BIGINT"}, primary_key="id").insert([{"id": 1}])
    typo = run_ledger("-w", "wh", "sql", "select count(*) from ordrs", cwd=tmp_path, expect=1)
    assert "TableNotFoundError" in typo.stderr and "'orders'" in typo.stderr
    path = run_ledger(
        "-w", "wh", "sql", "select * from read_csv('/etc/passwd')", cwd=tmp_path, expect=1
    )
    assert "UnsafeSqlError" in path.stderr
    far = run_ledger("-w", "wh", "sql", "select * from duckdb_settings", cwd=tmp_path, expect=1)
    assert "UnsafeSqlError" in far.stderr


def test_csv_output_loads_back_as_the_same_rows(tmp_path: Path) -> None:
    """`show` piped as CSV, then `load --mode upsert` of it, changes nothing: NULL and the empty
    text stay apart, and commas, quotes, line breaks and surrounding spaces survive."""
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id")
    texts = [None, "", " ", "a,b", 'say "hi"', "two\nlines", " padded ", "ünï", "NULL", '""']
    table.insert([{"id": i, "s": s} for i, s in enumerate(texts)])
    shown = run_ledger("-w", "wh", "show", "t", cwd=tmp_path)
    (tmp_path / "out.csv").write_text(shown.stdout)
    run_ledger("-w", "wh", "load", "t", "out.csv", "--mode", "upsert", cwd=tmp_path)
    rows = sorted(ledger.connect(str(tmp_path / "wh")).table("t").to_arrow().to_pylist(),
                  key=lambda r: r["id"])  # fmt: skip
    assert [r["s"] for r in rows] == texts


def test_advice_to_upsert_names_the_flag(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "n": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": 1, "n": 1}])
    (tmp_path / "new.csv").write_text("id,n\n2,5\n")
    refused = run_ledger(
        "-w", "wh", "load", "t", "new.csv", "--mode", "update", cwd=tmp_path, expect=1
    )
    assert "--mode upsert" in refused.stderr
    assert "use upsert" not in refused.stderr
    assert table.refresh().count() == 1


@pytest.mark.parametrize(("given", "meant"), [("amout", "amount"), ("ID", "id")])
def test_a_mistyped_totals_column_gets_the_closest_names(
    tmp_path: Path, given: str, meant: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "amount": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": 1, "amount": 1}])
    for option in ("--by", "--sum", "--avg"):
        refused = run_ledger("-w", "wh", "totals", "t", option, given, cwd=tmp_path, expect=1)
        assert f"did you mean {meant!r}" in refused.stderr, (option, refused.stderr)


@pytest.mark.parametrize("separator", [";", "\t", "|"])
def test_a_file_with_another_separator_gets_advice_the_command_line_can_follow(
    tmp_path: Path, separator: str
) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "id BIGINT, name VARCHAR", cwd=tmp_path)
    (tmp_path / "semi.csv").write_text(f'id{separator}name\n1{separator}"a {separator} b"\n')
    refused = run_ledger("-w", "wh", "load", "t", "semi.csv", cwd=tmp_path, expect=1)
    assert "pandas" not in refused.stderr and "insert the frame" not in refused.stderr
    command = refused.stderr.split("`")[1]  # the conversion the advice gives, run as given
    assert command.startswith("python -c ") and "semi.csv" in command
    command = command.replace("python", shlex.quote(sys.executable), 1)
    converted = subprocess.run(command, shell=True, cwd=tmp_path, check=False)
    assert converted.returncode == 0
    assert (tmp_path / "semi-commas.csv").read_text() == f"id,name\n1,a {separator} b\n"
    run_ledger("-w", "wh", "load", "t", "semi-commas.csv", cwd=tmp_path)


def test_nested_json_gets_advice_the_command_line_can_follow(tmp_path: Path) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "id BIGINT, a BIGINT", cwd=tmp_path)
    (tmp_path / "nested.jsonl").write_text('{"id": 1, "meta": {"a": 7}}\n')
    for evolve in ([], ["--evolve-schema"]):
        refused = run_ledger(
            "-w", "wh", "load", "t", "nested.jsonl", *evolve, cwd=tmp_path, expect=1
        )
        assert "--insert-transform" in refused.stderr, refused.stderr
        assert "leave the field 'meta' out" in refused.stderr and "key" not in refused.stderr
    # The advice followed: a table whose insert transform reads the nested field.
    transform = "SELECT id, meta.a AS a FROM rows"
    schema = ["--schema", "id BIGINT, a BIGINT"]
    run_ledger("-w", "wh", "create", "n", *schema, "--insert-transform", transform, cwd=tmp_path)
    run_ledger("-w", "wh", "load", "n", "nested.jsonl", cwd=tmp_path)
    shown = run_ledger("-w", "wh", "show", "n", "--json", cwd=tmp_path)
    assert as_json(shown) == [{"id": 1, "a": 7}]
    described = as_json(run_ledger("-w", "wh", "describe", "n", "--json", cwd=tmp_path))
    assert described["config"]["insert_transform"] == transform


@pytest.mark.parametrize("source", ["/dev/null", "fifo"])
def test_a_path_that_is_neither_a_file_nor_a_folder_is_named_as_such(
    tmp_path: Path, source: str
) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "id BIGINT", cwd=tmp_path)
    if source == "fifo":
        os.mkfifo(tmp_path / "fifo")
    refused = run_ledger("-w", "wh", "load", "t", source, cwd=tmp_path, expect=1)
    assert refused.stderr.startswith(f"Error: {source!r} is neither a file nor a folder")
    assert "Errno" not in refused.stderr and refused.stderr.count("\n") == 1


def test_a_file_with_another_separator_and_commas_in_its_fields_gets_the_same_advice(
    tmp_path: Path,
) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "id BIGINT, price VARCHAR", cwd=tmp_path)
    (tmp_path / "prices.csv").write_text("id;price\n1;2,50\n")  # a decimal comma
    refused = run_ledger("-w", "wh", "load", "t", "prices.csv", cwd=tmp_path, expect=1)
    assert "looks separated by ';'" in refused.stderr and "pandas" not in refused.stderr
    command = refused.stderr.split("`")[1].replace("python", shlex.quote(sys.executable), 1)
    subprocess.run(command, shell=True, cwd=tmp_path, check=True)
    run_ledger("-w", "wh", "load", "t", "prices-commas.csv", cwd=tmp_path)
    shown = run_ledger("-w", "wh", "show", "t", "--json", cwd=tmp_path)
    assert as_json(shown) == [{"id": 1, "price": "2,50"}]
