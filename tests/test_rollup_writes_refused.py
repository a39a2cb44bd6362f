"""A rollup holds the totals of its base: only its refreshes write to it. A row written into a
rollup by hand would stay in every later answer (refreshes only add the base's changes), so
every write verb, on the table and in a transaction, is refused before anything is written."""

from __future__ import annotations

import pytest

import ledger
import views

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "amount": "BIGINT"}


@pytest.fixture
def rollup_table(warehouse: ledger.Warehouse) -> ledger.Table:
    base = warehouse.create_table("sales", SCHEMA, primary_key="id")
    base.insert([{"id": 1, "region": "eu", "amount": 3}])
    base.create_rollup("per_region", by="region", measures={"total": "sum(amount)"})
    return warehouse.table("per_region")


WRITES = [
    ("insert", [{"region": "xx", "total": 1, "rows": 1}]),
    ("upsert", [{"region": "eu", "total": 1, "rows": 1}]),
    ("update", [{"region": "eu", "total": 1}]),
    ("delete", ["eu"]),
    ("append_entries", [{"region": "eu", "total": 3, "rows": 1, "dml_type": -1}]),
]


# The refusal comes before any storage call: every verb runs on a local disk, one on S3 as well.
@pytest.mark.parametrize(
    ("location", "verb", "rows"),
    [
        *(pytest.param("local", verb, rows, id=f"local-{verb}") for verb, rows in WRITES),
        pytest.param("s3", *WRITES[0], id=f"s3-{WRITES[0][0]}"),
    ],
    indirect=["location"],
)
@pytest.mark.parametrize("in_transaction", [False, True])
def test_writes_into_a_rollup_are_refused(rollup_table, verb, rows, in_transaction):
    version = rollup_table.version
    before = sorted(views.visible(rollup_table).fetchall())
    with pytest.raises(ledger.InvalidArgumentError, match="only its refreshes write to it"):
        if in_transaction:
            with rollup_table.transaction() as tx:
                getattr(tx, verb)(rows)
        else:
            getattr(rollup_table, verb)(rows)
    assert rollup_table.version == version
    assert sorted(views.visible(rollup_table).fetchall()) == before


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.drop_partitions(),
        lambda t: t.rewrite_partitions(None, "SELECT * FROM entries WHERE false"),
    ],
    ids=["drop_partitions", "rewrite_partitions"],
)
def test_partition_changes_of_a_rollup_are_refused(rollup_table, change):
    version = rollup_table.version
    with pytest.raises(ledger.InvalidArgumentError, match="only its refreshes write to it"):
        change(rollup_table)
    assert rollup_table.version == version


def test_refreshes_still_write(warehouse: ledger.Warehouse, rollup_table: ledger.Table) -> None:
    base = warehouse.table("sales")
    base.insert([{"id": 2, "region": "us", "amount": 4}])
    warehouse.rollup("per_region").refresh()
    totals = views.visible(warehouse.table("per_region")).project("region, total").fetchall()
    assert sorted(totals) == [("eu", 3), ("us", 4)]
