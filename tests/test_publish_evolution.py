"""publish_delta follows the source's schema evolution: new columns are added to the Delta
table (as deltalake's schema_mode="merge" would), on incremental and full publishes; a column
whose type widened cannot be followed and is refused before anything is written."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

import ledger
import views
from tests.support.maintenance import vacuum_now
from views import publish

SCHEMA = {"id": "BIGINT", "account": "VARCHAR", "amount": "DECIMAL(18,2)"}


def _rows(table: Any) -> list[tuple[tuple[str, Any], ...]]:
    return sorted((tuple(sorted(r.items())) for r in table.to_pylist()), key=repr)


def _published(target: str) -> list[tuple[tuple[str, Any], ...]]:
    return _rows(DeltaTable(target).to_pyarrow_table())


def _visible(table: ledger.Table) -> list[tuple[tuple[str, Any], ...]]:
    keyless = not table.primary_key
    rows = views.visible(table, system_columns=keyless).to_arrow_table()
    return _rows(rows.drop_columns([c for c in ("trx_id", "trx_seq") if keyless]))


@pytest.mark.parametrize("keyless", [False, True])
def test_new_columns_are_added_to_the_delta_table(tmp_path: Path, keyless: bool) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("payments", SCHEMA, None if keyless else "id")
    table.insert([{"id": 1, "account": "alice", "amount": Decimal("0.10")}])
    target = str(tmp_path / "lake" / "payments")
    views.publish_delta(table, target)

    table.insert(
        [{"id": 2, "account": "bob", "amount": Decimal("0.20"), "note": "café ☕", "n": 7}],
        evolve_schema=True,
    )
    result = views.publish_delta(table, target)
    assert not result.full and result.version == table.version
    assert _published(target) == _visible(table)
    columns = DeltaTable(target).schema().to_arrow().names
    assert {"note", "n"} <= set(columns)
    assert DeltaTable(target).transaction_version(publish.publish_app_id(table)) == table.version

    # The next publish finds the columns present and merges as usual.
    if keyless:
        table.delete_where("account = 'alice'")
    else:
        table.update([{"id": 1, "note": "corrected", "n": 1}])
    views.publish_delta(table, target)
    assert _published(target) == _visible(table)


def test_a_full_republish_follows_new_columns_too(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("payments", SCHEMA, None)  # keyless: _row_id comes last
    table.insert([{"id": 1, "account": "alice", "amount": Decimal("1.05")}])
    target = str(tmp_path / "lake")
    views.publish_delta(table, target)
    table.insert(
        [{"id": 2, "account": "bob", "amount": Decimal("2"), "note": "x"}], evolve_schema=True
    )
    plan = publish.target_plan(table, target)
    assert plan.new_columns == ("note",)
    table.merge(min_files=1)
    # The changes since the first publish are gone: the next one is full.
    assert vacuum_now(table).data_files_deleted > 0
    result = views.publish_delta(table, target)
    assert result.full
    assert _published(target) == _visible(table)
    assert "note" in DeltaTable(target).schema().to_arrow().names
    assert result.version == table.version


def test_a_widened_column_is_refused_before_writing(tmp_path: Path) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    table = warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, "id")
    table.insert([{"id": 1, "v": 1}])
    target = str(tmp_path / "lake")
    views.publish_delta(table, target)
    before = DeltaTable(target).version()
    table.insert([{"id": 2, "v": 2**40}], evolve_schema=True)  # INTEGER widens to BIGINT
    assert table.schema["v"] == "BIGINT"
    with pytest.raises(ledger.SchemaError, match="publish to a new target"):
        views.publish_delta(table, target)
    assert DeltaTable(target).version() == before
