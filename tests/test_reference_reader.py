"""The format is open: a reader written from the docs alone (tests/support/reference_reader.py,
pyarrow and json only) reads what the library wrote, at every version, through updates,
deletes, blind re-inserts, schema evolution, merges, checkpoints, vacuum, drops and re-creations,
and gives the answers of ``views.visible`` and ``views.totals``."""

from __future__ import annotations

import datetime as dt
import math
import os
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples
from tests.support import reference_reader as ref

SCHEMA = {"id": "BIGINT", "city": "VARCHAR", "amount": "DECIMAL(12,2)", "x": "DOUBLE"}
CITIES = ["Zürich", "東京", "Paris, FR", "", None]
FLOATS = [1.25, 0.1, -3.5, 0.0, -0.0, math.nan, None, 12.99]
NAME = "payments"

row = st.fixed_dictionaries(
    {
        "id": st.integers(0, 3),
        "city": st.sampled_from(CITIES),
        "amount": st.integers(-10_000, 10_000).map(lambda cents: Decimal(cents) / 100),
        "x": st.sampled_from(FLOATS),
    }
)
operation = st.one_of(
    st.tuples(st.just("insert"), st.lists(row, min_size=1, max_size=4)),
    st.tuples(
        st.just("upsert"), st.lists(row, min_size=1, max_size=4, unique_by=lambda r: r["id"])
    ),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 3), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("add_column"), st.lists(row, min_size=1, max_size=2)),
    st.tuples(st.just("merge"), st.none()),
    st.tuples(st.just("vacuum"), st.none()),
    st.tuples(st.just("drop_and_create"), st.none()),
)


def _same(value: Any) -> Any:
    """NaN equals NaN and -0.0 differs from 0.0 when answers are compared."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, float) and value == 0.0:
        return ("zero", math.copysign(1.0, value))
    return value


def _rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(_same(v) for v in r) for r in rows), key=repr)


def _library_answers(table: ledger.Table, version: int) -> tuple[Any, Any, Any] | None:
    """visible, totals by city, grand totals at ``version``; None where the library cannot
    read that version any more (vacuumed, or the table was dropped then)."""
    try:
        return (
            _rows(views.visible(table, version=version).fetchall()),
            _rows(views.totals(table, by="city", sum="amount", version=version).fetchall()),
            _rows(views.totals(table, sum="amount", version=version).fetchall()),
        )
    except ledger.LedgerError:
        return None


def _reference_answers(folder: str, version: int) -> tuple[Any, Any, Any]:
    return (
        _rows(ref.visible_rows(folder, version)),
        _rows(ref.totals(folder, version, ["city"], "amount")),
        _rows(ref.totals(folder, version, [], "amount")),
    )


def _apply(warehouse: ledger.Warehouse, table: ledger.Table, step: tuple[str, Any]) -> ledger.Table:
    kind, data = step
    try:
        if kind == "insert":
            table.insert(data)
        elif kind == "upsert":
            table.upsert(data)
        elif kind == "delete":
            table.delete(data)  # keys without a visible row are ignored
        elif kind == "add_column":
            added = [{**r, "note": f"n{r['id']}"} for r in data]
            table.upsert(list({r["id"]: r for r in added}.values()), evolve_schema=True)
        elif kind == "merge":
            table.merge(min_files=1)
        elif kind == "vacuum":
            table.vacuum(dt.timedelta(0))
        else:
            warehouse.drop_table(NAME)
            table = warehouse.create_table(NAME, SCHEMA, primary_key="id", checkpoint_interval=3)
    except ledger.LedgerError as error:
        # The only refusal allowed: a merge that finds nothing to merge.
        assert kind == "merge", error
    return table


def test_the_reader_api_reads_a_simple_table(tmp_path: Any) -> None:
    wh = ledger.connect(str(tmp_path / "wh"))
    t = wh.create_table(NAME, SCHEMA, primary_key="id")
    t.insert([{"id": 1, "city": "Paris, FR", "amount": Decimal("12.50"), "x": 0.1}])
    t.upsert([{"id": 1, "amount": Decimal("2.25")}])
    folder = str(tmp_path / "wh" / NAME)
    assert ref.latest_version(folder) == 2
    assert ref.visible_rows(folder, 1) == [(1, "Paris, FR", Decimal("12.50"), 0.1)]
    assert ref.visible_rows(folder, 2) == [(1, "Paris, FR", Decimal("2.25"), 0.1)]
    assert ref.totals(folder, 2, ["city"], "amount") == [("Paris, FR", 1, Decimal("2.25"))]


def check_every_version(root: Any, steps: list[tuple[str, Any]]) -> int:
    """Apply ``steps`` to a fresh table; compare the reference with the views at each new
    version, then at every version still readable at the end. Returns how many were compared."""
    warehouse = ledger.connect(str(root))
    folder = os.path.join(str(root), NAME)
    table = warehouse.create_table(NAME, SCHEMA, primary_key="id", checkpoint_interval=3)
    compared = 0
    for step in steps:
        table = _apply(warehouse, table, step)
        # The newest version, before a later vacuum can take its files away.
        latest = ref.latest_version(folder)
        answers = _library_answers(table, latest)
        if answers is not None:
            assert _reference_answers(folder, latest) == answers, (step, latest)
            compared += 1
    # Every version still readable at the end (vacuum removed the older ones' files and logs).
    for version in range(ref.latest_version(folder) + 1):
        answers = _library_answers(table, version)
        if answers is not None:
            assert _reference_answers(folder, version) == answers, version
            compared += 1
    return compared


def _row(
    id_: int, x: float | None, city: str | None = "Zürich", cents: int = 1250
) -> dict[str, Any]:
    return {"id": id_, "city": city, "amount": Decimal(cents) / 100, "x": x}


EVERY_KIND_OF_COMMIT: list[tuple[str, Any]] = [
    ("insert", [_row(0, math.nan), _row(1, -0.0), _row(2, 0.0, city=None)]),
    ("insert", [_row(1, -0.0, cents=-99)]),  # a blind re-insert: two live entries of key 1
    ("upsert", [_row(2, 12.99, city="東京")]),
    ("delete", [0, 1]),  # marks carrying NaN and -0.0 must cancel their insertions
    ("add_column", [_row(3, 0.1, city="")]),  # schema evolution: a new VARCHAR column
    ("merge", None),
    ("vacuum", None),  # expunges the merged files and trims the log to a checkpoint
    ("insert", [_row(0, math.nan, city="Paris, FR")]),
    ("drop_and_create", None),  # a second life, in a data folder of its own
    ("insert", [_row(1, 1.25), _row(2, None, city=None, cents=0)]),
    ("delete", [2]),
    ("merge", None),
    ("vacuum", None),
]


def test_the_reader_follows_the_docs_through_every_kind_of_commit(tmp_path: Any) -> None:
    assert check_every_version(tmp_path, EVERY_KIND_OF_COMMIT) >= len(EVERY_KIND_OF_COMMIT)


@pytest.mark.timeout(900)
@settings(max_examples=examples(5))
@given(steps=st.lists(operation, min_size=3, max_size=12))
def test_the_reference_reader_equals_the_views_at_every_version(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, Any]]
) -> None:
    assert check_every_version(tmp_path_factory.mktemp("reference"), steps) >= 1
