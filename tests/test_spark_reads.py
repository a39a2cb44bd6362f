"""The Spark front reads a Rollup as it reads a Table, as the embedded views do, and speaks of
since_version when a change feed starts past the latest version."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import ledger
import ledger.spark as ls
import views

pytestmark = pytest.mark.spark


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=repr)


def test_spark_views_take_a_rollup(spark: Any, tmp_path: Any) -> None:
    warehouse = ledger.connect(str(tmp_path / "wh"))
    events = warehouse.create_table(
        "events", {"id": "BIGINT", "user": "VARCHAR", "amount": "DECIMAL(9,2)"}, "id"
    )
    events.insert(
        [
            {"id": 1, "user": "a", "amount": Decimal("0.10")},
            {"id": 2, "user": "a", "amount": Decimal("0.20")},
            {"id": 3, "user": "b", "amount": Decimal("1.05")},
        ]
    )
    rollup = events.create_rollup("per_user", by="user", measures={"total": "sum(amount)"})
    events.delete([3])
    rollup.refresh()
    on_spark = _sorted(ls.visible(rollup, spark=spark).select("user", "total").collect())
    embedded = _sorted(views.visible(rollup).project('"user", total').fetchall())
    assert on_spark == embedded == [("a", Decimal("0.30"))]
    changed = ls.changes(rollup, since_version=rollup.table.version - 1, spark=spark).count()
    assert (
        changed
        == views.changes(rollup, since_version=rollup.table.version - 1)
        .aggregate("count(*)")
        .fetchall()[0][0]
    )
    assert changed > 0
    with pytest.raises(ledger.InvalidArgumentError, match="since_version"):
        ls.changes(rollup, since_version=rollup.table.version + 1, spark=spark)
