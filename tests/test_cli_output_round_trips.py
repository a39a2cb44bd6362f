"""What the command line prints reads back as it was: BLOB values as hex through
``ledger sql --csv`` and ``ledger load``, columns of the same name kept apart, FLOAT values by
their shortest text."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import ledger
import views
from ledger.cli import output
from tests.test_cli import as_json, run_ledger

BLOBS = [b"Hello", b"", b'\x00\xff,"\n', None]


def test_blob_values_survive_a_csv_round_trip_through_the_command_line(tmp_path: Path) -> None:
    source = ledger.connect(str(tmp_path / "wh")).create_table("src", {"k": "BIGINT", "b": "BLOB"})
    source.insert([{"k": k, "b": b} for k, b in enumerate(BLOBS)])
    ledger.connect(str(tmp_path / "wh")).create_table("dst", {"k": "BIGINT", "b": "BLOB"})
    printed = run_ledger(
        "-w", "wh", "sql", "SELECT k, b FROM src ORDER BY k", "--csv", cwd=tmp_path
    )
    assert printed.stdout.splitlines()[1] == "0,48656c6c6f"
    (tmp_path / "rows.csv").write_text(printed.stdout)
    run_ledger("-w", "wh", "load", "dst", "rows.csv", cwd=tmp_path)
    target = ledger.connect(str(tmp_path / "wh")).table("dst")
    assert sorted(views.visible(target).fetchall()) == list(enumerate(BLOBS))


def test_a_csv_blob_that_is_not_hex_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT", "b": "BLOB"})
    path = tmp_path / "rows.csv"
    path.write_text("k,b\n1,00ff\n2,Hello\n")
    with pytest.raises(ledger.SchemaError, match="column 'b', row 2: 'Hello' is not hex"):
        table.insert(str(path))
    assert table.count() == 0


@pytest.mark.parametrize("flag", ["--csv", "--json"])
def test_columns_of_the_same_name_are_all_printed(tmp_path: Path, flag: str) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    printed = run_ledger("-w", "wh", "sql", "SELECT 1 AS a, 2 AS a, 3 AS a_1", flag, cwd=tmp_path)
    if flag == "--csv":
        assert printed.stdout.splitlines() == ["a,a_2,a_1", "1,2,3"]
    else:
        assert as_json(printed) == [{"a": 1, "a_2": 2, "a_1": 3}]


def test_a_terminal_table_shows_every_column_of_the_same_name(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rows = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    output.print_rows(rows, output.TABLE)
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if "a" in line)
    assert header.split() == ["┃", "a", "┃", "a_1", "┃"]


def test_float_values_print_by_their_shortest_text(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", {"f": "FLOAT", "d": "DOUBLE"})
    table.insert([{"f": 0.1, "d": 0.1}, {"f": 3.4028234663852886e38, "d": 1e-300}])
    query = ("SELECT f, d FROM t ORDER BY d DESC",)
    csv = run_ledger("-w", "wh", "sql", *query, "--csv", cwd=tmp_path).stdout.splitlines()
    assert csv == ["f,d", "0.1,0.1", "3.4028235e+38,1e-300"]
    printed = as_json(run_ledger("-w", "wh", "sql", *query, "--json", cwd=tmp_path))
    assert printed == [{"f": 0.1, "d": 0.1}, {"f": 3.4028235e38, "d": 1e-300}]
