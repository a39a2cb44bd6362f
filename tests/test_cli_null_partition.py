"""`ledger describe` shows the NULL partition as FIELD=None; `--partition FIELD=None` names the
text 'None', so a drop that matches nothing says how to name NULL, and the predicate it names
drops the NULL partition."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

import ledger
from ledger.cli import cli


def test_a_drop_of_field_none_that_matches_nothing_names_the_null_predicate(
    tmp_path: Path,
) -> None:
    location = str(tmp_path / "wh")
    events = ledger.connect(location).create_table(
        "events", {"id": "BIGINT", "month": "VARCHAR"}, primary_key="id", partition_by="month"
    )
    events.insert([{"id": 1, "month": None}, {"id": 2, "month": "2026-01"}])
    runner = CliRunner()
    for spelling in ("None", "null"):
        missed = runner.invoke(
            cli, ["-w", location, "drop-partitions", "events", "--partition", f"month={spelling}"]
        )
        assert missed.exit_code == 0, missed.output
        assert 'the NULL partition is named with --where "month IS NULL"' in missed.stderr
    assert events.refresh().count() == 2
    typo = runner.invoke(
        cli, ["-w", location, "drop-partitions", "events", "--partition", "month=x"]
    )
    assert "nothing matched" in typo.stderr and "IS NULL" not in typo.stderr
    dropped = runner.invoke(
        cli, ["-w", location, "drop-partitions", "events", "--where", "month IS NULL"]
    )
    assert dropped.exit_code == 0 and dropped.stderr == "", dropped.output
    assert [row["id"] for row in events.refresh().to_arrow().to_pylist()] == [2]


def test_a_value_no_partition_of_an_integer_field_can_have_is_refused(tmp_path: Path) -> None:
    location = str(tmp_path / "wh")
    events = ledger.connect(location).create_table(
        "events",
        {"id": "BIGINT", "region_id": "INTEGER"},
        primary_key="id",
        partition_by="region_id",
    )
    events.insert([{"id": 1, "region_id": 3}])
    runner = CliRunner()
    for text in ("03", "x"):
        refused = runner.invoke(
            cli, ["-w", location, "drop-partitions", "events", "--partition", f"region_id={text}"]
        )
        assert refused.exit_code != 0, refused.output
        assert "InvalidArgumentError" in refused.stderr and "INTEGER" in refused.stderr
        assert repr(text) in refused.stderr, refused.stderr
    assert events.refresh().count() == 1
    dropped = runner.invoke(
        cli, ["-w", location, "drop-partitions", "events", "--partition", "region_id=3"]
    )
    assert dropped.exit_code == 0 and events.refresh().count() == 0, dropped.output
