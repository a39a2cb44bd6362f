"""`ledger log` on a terminal: every column when they fit its width; on a narrower terminal (80
columns) one line per commit of its version, time, operation, and files and rows added and
removed, with `--wide` for every column. Piped (CSV) and `--json` output keep every column
whatever the width."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

import ledger
from ledger.cli import output
from ledger.cli.app import cli

EVERY_COLUMN = [
    "version",
    "timestamp",
    "operation",
    "trx_id",
    "files_added",
    "files_removed",
    "inserted",
    "deleted",
    "app_id",
    "batch",
    "entries_removed",
    "apps",
]
SHORT_COLUMNS = ["version", "time (UTC)", "operation", "files", "rows"]


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    """A table with a commit of each common kind: create, insert, upsert, delete, merge."""
    location = str(tmp_path / "wh")
    table = ledger.connect(location).create_table(
        "payments", {"id": "BIGINT", "amount": "DECIMAL(18,2)"}, primary_key="id"
    )
    table.insert([{"id": i, "amount": i} for i in range(1, 1001)])
    table.upsert([{"id": 1, "amount": 5}, {"id": 5000, "amount": 1}])
    table.delete([{"id": 2}])
    table.merge(max_files=10)
    return location


def _log(location: str, width: int, *args: str, terminal: bool = True) -> list[str]:
    """The lines `ledger log payments ARGS` prints, on a terminal of ``width`` columns (or
    piped)."""
    with pytest.MonkeyPatch.context() as patch:
        if terminal:
            patch.setattr(output, "chosen_format", lambda asked: asked or output.TABLE)
        result = CliRunner().invoke(
            cli, ["-w", location, "log", "payments", *args], env={"COLUMNS": str(width)}
        )
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip("│┃").split("│" if "│" in line else "┃")]


def test_an_80_column_terminal_shows_one_line_per_commit_of_the_useful_columns(warehouse):
    lines = _log(warehouse, 80)
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "version" in line)
    assert _cells(header) == SHORT_COLUMNS
    rows = [_cells(line) for line in lines if line.startswith("│")]
    history = ledger.connect(warehouse).table("payments").history()[::-1]
    assert [int(row[0]) for row in rows] == [record.version for record in history]
    by_operation = {row[2]: row for row in rows}
    assert by_operation["insert"][3:] == ["+1", "+1000"]
    assert by_operation["upsert"][3:] == ["+1", "+2 -1"]
    assert by_operation["delete"][3:] == ["+1", "-1"]
    assert by_operation["create_table"][3:] == ["", ""]
    merged = history[0]
    assert merged.operation == "merge"
    assert by_operation["merge"][3] == f"+{merged.files_added} -{merged.files_removed}"
    time = history[0].timestamp.strftime("%Y-%m-%d %H:%M:%S")
    assert rows[0][1] == time
    assert any("--wide" in line for line in lines)


def test_a_wide_terminal_shows_every_column(warehouse):
    lines = _log(warehouse, 200)
    header = next(line for line in lines if "version" in line)
    assert _cells(header) == EVERY_COLUMN
    rows = [_cells(line) for line in lines if line.startswith("│")]
    assert len(rows) == len(ledger.connect(warehouse).table("payments").history())
    assert not any("--wide" in line for line in lines)


def test_wide_shows_every_column_on_a_narrow_terminal(warehouse):
    printed = "\n".join(_log(warehouse, 80, "--wide"))
    assert "--wide" not in printed
    for fragment in ["vers", "time", "trx_", "app_", "batc"]:  # folded to the width, all there
        assert fragment in printed


@pytest.mark.parametrize("width", [80, 200])
def test_piped_and_json_output_keep_every_column_at_any_width(warehouse, width):
    piped = _log(warehouse, width, terminal=False)
    records = list(csv.DictReader(io.StringIO("\n".join(piped))))
    assert piped[0].split(",") == EVERY_COLUMN
    history = ledger.connect(warehouse).table("payments").history()[::-1]
    assert [int(r["version"]) for r in records] == [record.version for record in history]
    as_json = json.loads("\n".join(_log(warehouse, width, "--json")))
    assert [list(record) for record in as_json] == [EVERY_COLUMN] * len(history)
    assert _log(warehouse, width, "--wide", terminal=False) == piped
