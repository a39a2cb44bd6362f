"""Hand-written delete marks (``append_entries`` with ``dml_type`` -1) must cancel a live entry.

A mark that cancels nothing, cancels one entry twice, or carries values other than the entry's
would push a key's sign sum below its live entries: ``count()`` and ``views.totals`` would then
disagree with ``views.visible``. Such marks are refused with ``UnmatchedDeleteMarkError`` before
anything is written. The property test at the end checks random mixes of valid and invalid marks
with inserts, upserts and deletes against a plain in-place table.
"""

from __future__ import annotations

import itertools
import math
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples
from tests.support.ledger_reads import sign_sums, visible_rows

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(18,2)", "score": "DOUBLE"}


@pytest.fixture
def accounts(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("accounts", SCHEMA, primary_key="id")
    table.insert(
        [
            {"id": 1, "name": "a", "amount": Decimal("1.50"), "score": 0.5},
            {"id": 2, "name": None, "amount": Decimal("2.00"), "score": math.nan},
        ]
    )
    return table


def _stored(location: Any, table: ledger.Table) -> tuple[int, list[str]]:
    """The table's version and every object under its folder (data, reservations, log)."""
    store = location.connect().store
    return table.version, sorted(i.key for i in store.list(table.prefix))


def _mark(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "dml_type": -1}


def _visible(table: ledger.Table) -> list[tuple[Any, ...]]:
    return _rows([dict(zip(SCHEMA, row, strict=True)) for row in views.visible(table).fetchall()])


def _totals(table: ledger.Table) -> tuple[int, Any]:
    count, total = views.totals(table, sum=["amount"]).fetchall()[0]
    return count, total


def _assert_consistent(table: ledger.Table, visible: list[tuple[Any, ...]]) -> None:
    """count(), views.totals and views.visible all describe the same rows."""
    assert _visible(table) == visible
    amounts = [row[2] for row in visible if row[2] is not None]
    assert table.count() == len(visible)
    assert _totals(table) == (len(visible), sum(amounts) if amounts else None)


ROW_1 = {"id": 1, "name": "a", "amount": Decimal("1.50"), "score": 0.5}
ROW_2 = {"id": 2, "name": None, "amount": Decimal("2.00"), "score": math.nan}

REFUSED = {
    "key never written": [_mark({**ROW_1, "id": 9})],
    "other name": [_mark({**ROW_1, "name": "b"})],
    "value where the entry holds NULL": [_mark({**ROW_2, "name": "x"})],
    "NULL where the entry holds a value": [_mark({**ROW_1, "name": None})],
    "column left out (NULL) where the entry holds a value": [
        {"id": 1, "name": "a", "amount": Decimal("1.50"), "dml_type": -1}
    ],
    "other amount": [_mark({**ROW_1, "amount": Decimal("1.49")})],
    "other DOUBLE": [_mark({**ROW_1, "score": 0.25})],
    "NaN where the entry holds a number": [_mark({**ROW_1, "score": math.nan})],
    "number where the entry holds NaN": [_mark({**ROW_2, "score": 1.0})],
    "one entry twice in one call": [_mark(ROW_1), _mark(ROW_1)],
    "a mark, then a replacement marked again": [
        _mark(ROW_1),
        {**ROW_1, "amount": Decimal("3.00"), "dml_type": 1},
        _mark(ROW_1),
    ],
}


# Every refusal comes from one check made before any storage call: each case runs on a local
# disk, and two (one entry, several) on S3 as well, where nothing written means no object.
REFUSED_ON_S3 = {"key never written", "a mark, then a replacement marked again"}


@pytest.mark.parametrize(
    ("location", "entries"),
    [
        pytest.param(backend, entries, id=f"{backend}-{name}")
        for name, entries in REFUSED.items()
        for backend in ("local", "s3")
        if backend == "local" or name in REFUSED_ON_S3
    ],
    indirect=["location"],
)
def test_marks_that_cancel_no_live_entry_are_refused_before_anything_is_written(
    location, accounts, entries
):
    before = _stored(location, accounts)
    with pytest.raises(ledger.UnmatchedDeleteMarkError, match="cancel no live entry"):
        accounts.append_entries(entries)
    assert _stored(location, accounts) == before
    _assert_consistent(accounts, _rows([ROW_1, ROW_2]))


ACCEPTED = {
    "the entry's values": ([_mark(ROW_1)], [ROW_2]),
    "the same DECIMAL at another scale": (
        [_mark({**ROW_1, "amount": Decimal("1.5")})],
        [ROW_2],
    ),
    "NULL and NaN as stored": ([_mark(ROW_2)], [ROW_1]),
    "a mark and its replacement": (
        [_mark(ROW_1), {**ROW_1, "amount": Decimal("7.00"), "dml_type": 1}],
        [{**ROW_1, "amount": Decimal("7.00")}, ROW_2],
    ),
    "an insertion of the same call, then its mark": (
        [{**ROW_1, "id": 5, "dml_type": 1}, _mark({**ROW_1, "id": 5})],
        [ROW_1, ROW_2],
    ),
}


@pytest.mark.parametrize("entries, visible", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_marks_that_cancel_a_live_entry_are_written(accounts, entries, visible):
    info = accounts.append_entries(entries)
    marks = sum(1 for e in entries if e["dml_type"] == -1)
    assert (info.deleted, info.inserted) == (marks, len(entries) - marks)
    _assert_consistent(accounts, _rows(visible))


def _rows(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted((_canonical(r) for r in rows), key=repr)


def test_a_second_mark_of_one_entry_in_a_later_call_of_the_transaction_is_refused(
    location, accounts
):
    before = _stored(location, accounts)
    with (
        pytest.raises(ledger.UnmatchedDeleteMarkError, match="cancel no live entry"),
        accounts.transaction() as tx,
    ):
        tx.append_entries([_mark(ROW_1)])
        tx.append_entries([_mark(ROW_1)])
    assert _stored(location, accounts) == before


def test_a_mark_may_cancel_an_insertion_of_an_earlier_call_of_the_transaction(accounts):
    new = {**ROW_1, "id": 3, "name": "c"}
    with accounts.transaction() as tx:
        tx.insert([new])
        tx.append_entries([_mark(new)])
        with pytest.raises(ledger.UnmatchedDeleteMarkError):
            tx.append_entries([_mark(new)])  # already cancelled by the call before
    _assert_consistent(accounts, _rows([ROW_1, ROW_2]))


def test_each_of_several_live_entries_of_a_key_can_be_marked_once(accounts):
    accounts.insert([ROW_1])  # a blind duplicate: two live entries with these values
    assert accounts.count() == 3
    with pytest.raises(ledger.UnmatchedDeleteMarkError, match=r"1 delete mark\(s\)"):
        accounts.append_entries([_mark(ROW_1)] * 3)
    accounts.append_entries([_mark(ROW_1)] * 2)
    _assert_consistent(accounts, _rows([ROW_2]))


def test_a_mark_of_a_deleted_or_replaced_entry_is_refused(accounts):
    accounts.delete([2])
    accounts.update([{"id": 1, "amount": Decimal("4.00")}])
    for stale in (ROW_1, ROW_2):
        with pytest.raises(ledger.UnmatchedDeleteMarkError):
            accounts.append_entries([_mark(stale)])
    _assert_consistent(accounts, _rows([{**ROW_1, "amount": Decimal("4.00")}]))


def test_marks_on_a_table_without_a_key_name_a_live_row_id_with_its_values(location, warehouse):
    events = warehouse.create_table("events", {"kind": "VARCHAR", "n": "BIGINT"})
    events.insert([{"kind": "click", "n": 1}, {"kind": "view", "n": 2}])
    ids = dict(events.scan().project("kind, _row_id").fetchall())
    before = _stored(location, events)
    for wrong in (
        {"kind": "view", "n": 2, "_row_id": ids["view"] + 1000},  # no such row
        {"kind": "view", "n": 3, "_row_id": ids["view"]},  # other values
        {"kind": "click", "n": 1, "_row_id": ids["view"]},  # another row's values
    ):
        with pytest.raises(ledger.UnmatchedDeleteMarkError):
            events.append_entries([{**wrong, "dml_type": -1}])
    assert _stored(location, events) == before
    events.append_entries(
        [
            {"kind": "view", "n": 2, "_row_id": ids["view"], "dml_type": -1},
            {"kind": "view", "n": 5, "_row_id": None, "dml_type": 1},
        ]
    )
    assert sorted(r[:2] for r in views.visible(events).fetchall()) == [("click", 1), ("view", 5)]
    assert events.count() == 2
    with pytest.raises(ledger.UnmatchedDeleteMarkError):
        events.append_entries([{"kind": "view", "n": 2, "_row_id": ids["view"], "dml_type": -1}])


# --- property: random valid and invalid marks among ordinary writes, against an in-place table --

KEYS = st.integers(1, 4)
NAMES = st.sampled_from(["a", "b", None])
AMOUNTS = st.sampled_from([Decimal("0.00"), Decimal("1.50"), Decimal("-2.25"), None])
SCORES = st.sampled_from([0.5, -1.0, math.nan, None])
ROWS = st.fixed_dictionaries({"id": KEYS, "name": NAMES, "amount": AMOUNTS, "score": SCORES})

# A hand-written mark is built from the key's live entries (or from nothing) and may be changed.
CHANGES = st.sampled_from(["as live", "as live", "other name", "other amount", "NaN score"])
WRITES = st.one_of(
    st.tuples(st.just("insert"), st.lists(ROWS, min_size=1, max_size=3)),
    st.tuples(st.just("upsert"), ROWS),
    st.tuples(st.just("delete"), KEYS),
    st.tuples(
        st.just("marks"),
        st.lists(st.tuples(KEYS, st.integers(0, 2), CHANGES), min_size=1, max_size=3),
        st.lists(ROWS, max_size=2),
    ),
)


def _canonical(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row as the ledger compares it: NaN equals NaN, DECIMAL by value."""
    score = row.get("score")
    return (
        row["id"],
        row.get("name"),
        row.get("amount"),
        "NaN" if isinstance(score, float) and math.isnan(score) else score,
    )


class InPlaceTable:
    """The oracle: each key's live entries as a plain list, edited in place."""

    def __init__(self) -> None:
        self.live: dict[int, list[dict[str, Any]]] = {}

    def insert(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            self.live.setdefault(row["id"], []).append(dict(row))

    def upsert(self, row: dict[str, Any]) -> None:
        self.live[row["id"]] = [dict(row)]

    def delete(self, key: int) -> None:
        self.live.pop(key, None)

    def entries(self, marks: list[dict[str, Any]], inserts: list[dict[str, Any]]) -> bool:
        """Apply a call of append_entries if every mark cancels a live entry (or an insertion
        of the call); return whether it was applied."""
        live = {k: list(v) for k, v in self.live.items()}
        for row in inserts:
            live.setdefault(row["id"], []).append(dict(row))
        for mark in marks:
            entries = live.get(mark["id"], [])
            match = [i for i, e in enumerate(entries) if _canonical(e) == _canonical(mark)]
            if not match:
                return False
            del entries[match[0]]
        self.live = {k: v for k, v in live.items() if v}
        return True

    def visible(self) -> list[tuple[Any, ...]]:
        return sorted((_canonical(v[-1]) for v in self.live.values() if v), key=repr)

    def count(self) -> int:
        return sum(len(v) for v in self.live.values())

    def total(self) -> Decimal | None:
        amounts = [e["amount"] for v in self.live.values() for e in v if e["amount"] is not None]
        return sum(amounts, Decimal("0.00")) if amounts else None


_TABLE_NUMBERS = itertools.count()


def _changed(row: dict[str, Any], change: str) -> dict[str, Any]:
    if change == "other name":
        return {**row, "name": "z" if row["name"] != "z" else "y"}
    if change == "other amount":
        return {**row, "amount": (row["amount"] or Decimal("0")) + Decimal("0.01")}
    if change == "NaN score":
        score = row["score"]
        return {**row, "score": 7.0 if isinstance(score, float) and math.isnan(score) else math.nan}
    return dict(row)


def _marks_for(oracle: InPlaceTable, picks: list[tuple[int, int, str]]) -> list[dict[str, Any]]:
    marks = []
    for key, index, change in picks:
        entries = oracle.live.get(key) or [{"id": key, "name": "a", "amount": None, "score": None}]
        marks.append(_changed(entries[index % len(entries)], change))
    return marks


@pytest.mark.parametrize("location", ["local"], indirect=True)
@given(writes=st.lists(WRITES, min_size=1, max_size=8))
@settings(max_examples=examples(8))
def test_random_marks_agree_with_an_in_place_table(location, writes):
    _check_random_marks(location, writes)


# The same on S3, with fewer examples: one costs four local ones (every read and commit is HTTP
# to the moto server), and the marks are matched in the engine, the same on either store.
@pytest.mark.parametrize("location", ["s3"], indirect=True)
@given(writes=st.lists(WRITES, min_size=1, max_size=8))
@settings(max_examples=examples(3))
def test_random_marks_agree_with_an_in_place_table_on_s3(location, writes):
    _check_random_marks(location, writes)


def _check_random_marks(location: Any, writes: list[Any]) -> None:
    table = location.connect().create_table(f"t{next(_TABLE_NUMBERS)}", SCHEMA, primary_key="id")
    oracle = InPlaceTable()
    for write in writes:
        if write[0] == "insert":
            table.insert(write[1])
            oracle.insert(write[1])
        elif write[0] == "upsert":
            table.upsert([write[1]])
            oracle.upsert(write[1])
        elif write[0] == "delete":
            table.delete([write[1]])
            oracle.delete(write[1])
        else:
            marks = _marks_for(oracle, write[1])
            inserts = write[2]
            entries = [{**r, "dml_type": 1} for r in inserts] + [_mark(m) for m in marks]
            version = table.version
            if oracle.entries(marks, inserts):
                assert table.append_entries(entries).deleted == len(marks)
            else:
                with pytest.raises(ledger.UnmatchedDeleteMarkError):
                    table.append_entries(entries)
                assert table.version == version
        assert _visible(table) == oracle.visible()
        assert table.count() == oracle.count()
        assert _totals(table) == (oracle.count(), oracle.total())


def test_append_entries_delete_marks_conflict_with_a_concurrent_change_of_the_key(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "amount": "BIGINT"}, primary_key="id"
    )
    table.insert([{"id": 1, "amount": 10}])
    tx = table.transaction()
    tx.append_entries(
        [{"id": 1, "amount": 10, "dml_type": -1}, {"id": 1, "amount": 30, "dml_type": 1}]
    )
    table.update([{"id": 1, "amount": 20}])
    with pytest.raises(ledger.ConflictError):
        tx.commit()
    assert visible_rows(table) == [(1, 20)]
    assert sign_sums(table) == {(1,): 1}
    blind = table.transaction()
    blind.append_entries([{"id": 2, "amount": 1, "dml_type": 1}])
    table.update([{"id": 1, "amount": 21}])
    assert blind.commit().version is not None  # insertions alone stay blind
