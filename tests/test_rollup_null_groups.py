"""Rollups grouped by columns that hold NULL: rows with NULL in a by column form one group of
their own, as SQL's GROUP BY makes them, through refreshes, merges and rebuilds (the stateful
model of tests/test_rollups.py draws NULL groups too)."""

from __future__ import annotations

from typing import Any

import pytest

import ledger
import views
from tests.conftest import Location

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "tier": "BIGINT", "amount": "BIGINT"}
MEASURES = {"rows": "count", "total": "sum(amount)", "priced": "count(amount)"}


def _group_by(base: ledger.Table, by: list[str]) -> list[tuple[Any, ...]]:
    """The GROUP BY over the base's visible rows: what the rollup must hold."""
    keys = ", ".join(by)
    relation = views.visible(base).aggregate(
        f"{keys}, count(*), coalesce(sum(amount), 0), count(amount)", keys
    )
    return _ordered(relation.fetchall())


def _rollup_rows(rollup: ledger.Rollup) -> list[tuple[Any, ...]]:
    return _ordered(views.visible(rollup.table).fetchall())


def _ordered(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda t: tuple((v is None, v) for v in t))


@pytest.mark.parametrize("by", [["region"], ["region", "tier"]])
def test_rows_moving_between_a_null_group_and_a_value_are_counted_in_each(
    local_location: Location, by: list[str]
) -> None:
    base = local_location.connect().create_table("sales", SCHEMA, primary_key="id")
    base.insert(
        [
            {"id": 1, "region": None, "tier": None, "amount": 3},
            {"id": 2, "region": "eu", "tier": 1, "amount": 4},
            {"id": 3, "region": None, "tier": 1, "amount": None},
        ]
    )
    rollup = base.create_rollup("by_region", by=by, measures=MEASURES)
    assert _rollup_rows(rollup) == _group_by(base, by)
    assert any(group[0] is None for group in _rollup_rows(rollup))
    base.update([{"id": 1, "region": "eu", "tier": 1}])  # from NULL to a value
    rollup.refresh()
    assert _rollup_rows(rollup) == _group_by(base, by)
    base.update([{"id": 1, "region": None, "tier": None}, {"id": 2, "region": None}])  # and back
    base.delete([3])
    rollup.refresh()
    assert _rollup_rows(rollup) == _group_by(base, by)
    rollup.table.merge(min_files=1)
    assert _rollup_rows(rollup) == _group_by(base, by)
    rollup.rebuild()
    assert _rollup_rows(rollup) == _group_by(base, by)
    base.delete([1, 2])  # the NULL group empties and goes
    rollup.refresh()
    assert _rollup_rows(rollup) == _group_by(base, by) == []


def test_an_auto_refreshed_rollup_takes_null_groups(local_location: Location) -> None:
    base = local_location.connect().create_table("sales", SCHEMA, primary_key="id")
    rollup = base.create_rollup("r", by="region", measures=MEASURES, auto_refresh=True)
    base.insert([{"id": 1, "region": None, "amount": 2}, {"id": 2, "region": None, "amount": 5}])
    assert _rollup_rows(rollup) == [(None, 2, 7, 2)]


@pytest.mark.spark
def test_a_refresh_on_spark_groups_nulls_as_the_embedded_one(
    spark: Any, local_location: Location
) -> None:
    import ledger.spark as ls

    base = local_location.connect().create_table("sales", SCHEMA, primary_key="id")
    base.insert([{"id": 1, "region": "eu", "amount": 2}])
    on_spark = base.create_rollup("on_spark", by="region", measures=MEASURES)
    embedded = base.create_rollup("embedded", by="region", measures=MEASURES)
    base.insert([{"id": 2, "region": None, "amount": 5}, {"id": 3, "region": None}])
    base.update([{"id": 1, "region": None}])
    ls.refresh(on_spark, spark=spark)
    embedded.refresh()
    assert _rollup_rows(on_spark) == _rollup_rows(embedded) == _group_by(base, ["region"])
    assert _rollup_rows(on_spark) == [(None, 3, 7, 2)]
