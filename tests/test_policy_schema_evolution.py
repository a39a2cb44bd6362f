"""A write that adds columns (``evolve_schema=True``) is checked against the table's merge policy
before anything is written: an aggregating table merges every non-key column by a function it
names, so a new column without one is refused with a ``SchemaError`` (it used to commit, after
which every read of the table failed)."""

from __future__ import annotations

import pytest

import ledger
import views

AGGREGATING = {"name": "aggregating", "measures": {"amount": "sum", "events": "count"}}
SCHEMA = {"g": "VARCHAR", "amount": "BIGINT", "events": "BIGINT"}


def _files(table: ledger.Table) -> list[str]:
    return sorted(i.key for i in table.store.list(table.prefix))


@pytest.fixture
def totals(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("totals", SCHEMA, primary_key="g", policy=AGGREGATING)
    table.insert([{"g": "x", "amount": 3, "events": 1}])
    return table


@pytest.mark.parametrize(
    ("verb", "in_transaction"),
    # Table.append_entries takes no evolve_schema: only a transaction's adds columns.
    [
        ("insert", False),
        ("upsert", False),
        ("insert", True),
        ("upsert", True),
        ("append_entries", True),
    ],
)
def test_a_column_the_aggregating_policy_cannot_merge_is_refused_before_writing(
    totals: ledger.Table, verb: str, in_transaction: bool
) -> None:
    before, version = _files(totals), totals.version
    rows = [{"g": "y", "amount": 1, "events": 1, "colour": "red"}]
    if verb == "append_entries":
        rows = [{**rows[0], "dml_type": 1}]
    with pytest.raises(ledger.SchemaError, match=r"colour.*no merge function"):
        if in_transaction:
            with totals.transaction(evolve_schema=True) as tx:
                getattr(tx, verb)(rows)
        else:
            getattr(totals, verb)(rows, evolve_schema=True)
    assert _files(totals) == before
    assert totals.version == version
    assert views.visible(totals).project("g, amount, events").fetchall() == [("x", 3, 1)]


@pytest.mark.parametrize("policy", ["collapsing", "replacing", None])
def test_policies_that_merge_whole_rows_take_new_columns(
    warehouse: ledger.Warehouse, policy: str | None
) -> None:
    table = warehouse.create_table("t", SCHEMA, primary_key="g", policy=policy)
    table.insert([{"g": "x", "amount": 3, "events": 1}])
    table.insert([{"g": "y", "amount": 1, "events": 1, "colour": "red"}], evolve_schema=True)
    assert "colour" in table.schema
    table.merge()
    assert sorted(views.visible(table).project("g, colour").fetchall()) == [
        ("x", None),
        ("y", "red"),
    ]
