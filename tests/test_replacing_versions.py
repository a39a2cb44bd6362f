"""Replacing tables with a version column: which row a key shows, and which writes are refused.

The documented rule (docs/merges.md, section 2.2): a key shows its latest entry unless that is
a delete mark, where "latest" ranks by the version column first (a NULL version below every
other version), then by the ledger order. A delete mark carries the version of the row it
deletes. ``upsert`` and ``update`` refuse, with ``StaleVersionError`` and before writing, a row
whose version ranks below its key's latest entry (the mark they would write carries the old
version, outranks the new row and would hide the key). Blind inserts are never refused: an
older version arriving late stays in the ledger, hidden behind the newer one (or behind the
delete of a newer one).

The property test runs random upserts, updates, deletes, blind inserts and transactions with
random versions (lower, equal, higher, NULL) and random merges of any subset of files, and after
every step compares the visible rows with a plain dictionary updated in place by that rule.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.errors import InvalidArgumentError, KeyNotFoundError, StaleVersionError
from ledger.maintenance import merge as merging
from tests.conftest import Location, examples
from tests.support.scratch import scratch_dir

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "a": "VARCHAR"}
REPLACING = {"name": "replacing", "version_column": "v"}


def _table(warehouse: ledger.Warehouse, schema: dict[str, str] | None = None) -> ledger.Table:
    return warehouse.create_table("dim", schema or SCHEMA, primary_key="k", policy=REPLACING)


def _shown(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(views.visible(table).fetchall())


def _stored_files(table: ledger.Table) -> list[str]:
    return sorted(info.key for info in table.store.list(table.prefix))


# --- the reported case, on both backends -------------------------------------------------------


def test_an_update_to_a_lower_version_is_refused_and_writes_nothing(location: Location) -> None:
    table = _table(location.connect())
    table.upsert([{"k": 1, "v": 10, "a": "first"}])
    version, files = table.version, _stored_files(table)

    with pytest.raises(StaleVersionError, match="'v'") as refused:
        table.update([{"k": 1, "v": 5, "a": "older"}])
    assert isinstance(refused.value, ValueError)
    assert table.refresh().version == version
    assert _stored_files(table) == files
    assert _shown(table) == [(1, 10, "first")]

    table.update([{"k": 1, "v": 11, "a": "newer"}])  # the key is still there to update
    assert _shown(table) == [(1, 11, "newer")]


# --- the rule, case by case ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "given", "accepted"),
    [
        (10, 5, False),
        (10, None, False),  # NULL ranks below every version
        (10, 10, True),  # equal versions: the later write wins
        (10, 11, True),
        (None, None, True),
        (None, 5, True),
    ],
)
@pytest.mark.parametrize("operation", ["update", "upsert"])
def test_a_write_must_not_rank_below_the_current_version(
    local_location: Location, operation: str, current: int | None, given: int | None, accepted: bool
) -> None:
    table = _table(local_location.connect())
    table.insert([{"k": 1, "v": current, "a": "old"}, {"k": 2, "v": 0, "a": "other"}])
    version = table.version
    write = getattr(table, operation)
    if accepted:
        write([{"k": 1, "v": given, "a": "new"}])
        assert _shown(table) == [(1, given, "new"), (2, 0, "other")]
    else:
        with pytest.raises(StaleVersionError):
            write([{"k": 1, "v": given, "a": "new"}, {"k": 2, "v": 1, "a": "fine"}])
        assert table.refresh().version == version
        assert _shown(table) == [(1, current, "old"), (2, 0, "other")]


def test_an_update_that_leaves_the_version_out_keeps_it(local_location: Location) -> None:
    table = _table(local_location.connect())
    table.insert([{"k": 1, "v": 7, "a": "old"}])
    table.update([{"k": 1, "a": "renamed"}])
    assert _shown(table) == [(1, 7, "renamed")]


def test_a_deleted_key_hides_older_versions_and_refuses_them_on_upsert(
    local_location: Location,
) -> None:
    table = _table(local_location.connect())
    table.upsert([{"k": 1, "v": 10, "a": "a"}])
    table.delete([1])
    table.insert([{"k": 1, "v": 9, "a": "late"}])  # an older version arriving after the delete
    assert _shown(table) == []
    with pytest.raises(StaleVersionError):
        table.upsert([{"k": 1, "v": 3, "a": "older"}])
    table.upsert([{"k": 1, "v": 10, "a": "again"}])
    assert _shown(table) == [(1, 10, "again")]


def test_a_blind_insert_of_an_older_version_stays_hidden(local_location: Location) -> None:
    table = _table(local_location.connect())
    table.insert([{"k": 1, "v": 4, "a": "current"}])
    table.insert([{"k": 1, "v": 2, "a": "late"}, {"k": 2, "v": None, "a": "unversioned"}])
    table.insert([{"k": 2, "v": None, "a": "unversioned, later"}])
    assert _shown(table) == [(1, 4, "current"), (2, None, "unversioned, later")]
    table.merge(min_files=1)
    assert _shown(table) == [(1, 4, "current"), (2, None, "unversioned, later")]


@pytest.mark.parametrize(
    ("schema", "column", "reason"),
    [
        (SCHEMA, "k", "primary-key"),
        ({"k": "BIGINT", "v": "DOUBLE"}, "v", "floating-point"),
        ({"k": "BIGINT", "v": "FLOAT"}, "v", "floating-point"),
        ({"k": "BIGINT", "v": "VARCHAR"}, "v", "integer, decimal, date or timestamp"),
    ],
)
def test_a_version_column_must_order_exactly_and_not_be_the_key(
    local_location: Location, schema: dict[str, str], column: str, reason: str
) -> None:
    warehouse = local_location.connect()
    with pytest.raises(InvalidArgumentError, match=reason):
        warehouse.create_table(
            "dim", schema, primary_key="k", policy={"name": "replacing", "version_column": column}
        )
    assert warehouse.tables() == []


@pytest.mark.parametrize("version_type", ["INTEGER", "DECIMAL(9,2)", "DATE", "TIMESTAMP"])
def test_exactly_ordered_version_types_are_accepted(
    local_location: Location, version_type: str
) -> None:
    table = local_location.connect().create_table(
        "dim", {"k": "BIGINT", "v": version_type}, primary_key="k", policy=REPLACING
    )
    assert table.config["policy"] == REPLACING


# --- the property: random writes and merges against an in-place oracle -------------------------

KEYS = st.sampled_from([0, 1, 2])
VERSIONS = st.none() | st.integers(min_value=0, max_value=3)
LABELS = st.sampled_from(["x", "y", "z"])


def _rows(with_versions: bool = True) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Rows of distinct keys; an upsert or update may leave the version out of every row of
    its batch (then it is kept)."""
    with_version = st.fixed_dictionaries({"k": KEYS, "v": VERSIONS, "a": LABELS})
    without_version = st.fixed_dictionaries({"k": KEYS, "a": LABELS})

    def batch(row: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[list[dict[str, Any]]]:
        return st.lists(row, min_size=1, max_size=3, unique_by=lambda r: r["k"])

    return batch(with_version) if with_versions else batch(with_version) | batch(without_version)


STEPS = st.one_of(
    st.tuples(st.just("insert"), _rows()),
    st.tuples(st.just("upsert"), _rows(with_versions=False)),
    st.tuples(st.just("update"), _rows(with_versions=False)),
    st.tuples(st.just("delete"), st.lists(KEYS, min_size=1, max_size=2, unique=True)),
)
OPERATIONS = st.one_of(
    STEPS,
    st.tuples(st.just("transaction"), st.lists(STEPS, min_size=1, max_size=3)),
    st.tuples(st.just("merge"), st.lists(st.integers(0, 30), max_size=4, unique=True)),
)


def _rank(version: Any) -> tuple[bool, Any]:
    """NULL ranks below every version."""
    return (version is not None, 0 if version is None else version)


class Oracle:
    """Each key's latest entry, replaced in place: (version, is_mark, row)."""

    def __init__(self) -> None:
        self.latest: dict[int, tuple[Any, bool, dict[str, Any]]] = {}

    def visible(self) -> list[tuple[Any, ...]]:
        return sorted(
            (row["k"], row["v"], row["a"]) for _, mark, row in self.latest.values() if not mark
        )

    def _visible_row(self, key: int) -> dict[str, Any] | None:
        entry = self.latest.get(key)
        return None if entry is None or entry[1] else entry[2]

    def _outranks_latest(self, row: dict[str, Any]) -> bool:
        entry = self.latest.get(row["k"])
        return entry is None or _rank(row["v"]) >= _rank(entry[0])

    def insert(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:  # blind: a row that ranks below the latest entry stays hidden
            if self._outranks_latest(row):
                self.latest[row["k"]] = (row["v"], False, dict(row))

    def upsert(self, rows: list[dict[str, Any]], *, existing_only: bool = False) -> None:
        current = {row["k"]: self._visible_row(row["k"]) for row in rows}
        if existing_only and any(found is None for found in current.values()):
            raise KeyNotFoundError("update of a key with no visible row")
        filled = [{"v": None, **(current[row["k"]] or {}), **row} for row in rows]
        if not all(self._outranks_latest(row) for row in filled):
            raise StaleVersionError("a version below the current one")
        for row in filled:
            self.latest[row["k"]] = (row["v"], False, row)

    def delete(self, keys: list[int]) -> None:
        for key in keys:
            row = self._visible_row(key)
            if row is not None:  # the mark carries the deleted row's version
                self.latest[key] = (row["v"], True, row)

    def apply(self, kind: str, argument: Any) -> None:
        if kind == "insert":
            self.insert(argument)
        elif kind == "upsert":
            self.upsert(argument)
        elif kind == "update":
            self.upsert(argument, existing_only=True)
        else:
            self.delete(argument)


def _write(target: ledger.Table | ledger.Transaction, kind: str, argument: Any) -> None:
    getattr(target, kind)(argument)


def _run(table: ledger.Table, oracle: Oracle, operation: tuple[Any, ...]) -> None:
    """Run one operation on the table and the oracle; a refused one changes neither."""
    kind, argument = operation
    if kind == "merge":
        alive = [m.path for m in table.snapshot().markers()]
        picked = sorted({alive[i % len(alive)] for i in argument}) if alive else []
        if picked:
            table.merge(files=picked, min_files=1)
        return
    expected = copy.deepcopy(oracle)
    steps = argument if kind == "transaction" else [operation]
    try:
        for step in steps:
            expected.apply(*step)
    except (StaleVersionError, KeyNotFoundError) as refusal:
        version = table.version
        with pytest.raises(type(refusal)):
            if kind == "transaction":
                with table.transaction() as tx:
                    for step in steps:
                        _write(tx, *step)
            else:
                _write(table, kind, argument)
        assert table.refresh().version == version, "a refused write committed"
        return
    if kind == "transaction":
        with table.transaction() as tx:
            for step in steps:
                _write(tx, *step)
    else:
        _write(table, kind, argument)
    oracle.latest = expected.latest


@contextmanager
def _every_transaction_settled() -> Iterator[None]:
    """Merges take every committed transaction as settled, so that the rule about dropping
    delete marks is exercised (no transaction is in flight in this test)."""
    with mock.patch.object(merging, "CLOCK_SKEW_MS", -86_400_000):
        yield


@settings(max_examples=examples(15), deadline=None)
@given(operations=st.lists(OPERATIONS, min_size=1, max_size=8))
def test_random_writes_and_merges_show_what_the_oracle_shows(
    operations: list[tuple[Any, ...]],
) -> None:
    with scratch_dir("replacing-") as root, _every_transaction_settled():
        table = _table(ledger.connect(str(root)))
        oracle = Oracle()
        for operation in operations:
            _run(table, oracle, operation)
            assert _shown(table) == oracle.visible(), operation
        settled = _shown(table)
        table.merge(min_files=1)  # everything into one file per partition
        assert _shown(table) == settled == oracle.visible()


def test_decimal_versions_order_as_numbers(local_location: Location) -> None:
    table = _table(local_location.connect(), {"k": "BIGINT", "v": "DECIMAL(6,2)", "a": "VARCHAR"})
    table.upsert([{"k": 1, "v": Decimal("10.50"), "a": "a"}])
    with pytest.raises(StaleVersionError):
        table.update([{"k": 1, "v": Decimal("9.99"), "a": "b"}])
    table.update([{"k": 1, "v": Decimal("10.51"), "a": "c"}])
    assert _shown(table) == [(1, Decimal("10.51"), "c")]
