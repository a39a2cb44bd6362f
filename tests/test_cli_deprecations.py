"""The CLI's reads use DuckDB's current API: no command prints a deprecation warning."""

from __future__ import annotations

import warnings
from pathlib import Path

from click.testing import CliRunner

import ledger
from ledger.cli import cli


def test_reading_commands_warn_of_nothing(tmp_path: Path) -> None:
    location = str(tmp_path / "wh")
    table = ledger.connect(location).create_table(
        "events", {"id": "BIGINT", "amount": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": 1, "amount": 5}])
    table.upsert([{"id": 1, "amount": 7}])
    runner = CliRunner()
    for args in (
        ["show", "events"],
        ["totals", "events", "--sum", "amount"],
        ["changes", "events", "--since", "0"],
        ["sql", "SELECT count(*) AS n FROM events"],
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error", DeprecationWarning)
            result = runner.invoke(cli, ["-w", location, *args])
        assert result.exit_code == 0, (args, result.output, result.exception)
