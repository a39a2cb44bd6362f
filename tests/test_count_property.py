"""``count()``, totals and the visible rows against a plain in-place model, while writes and
merges of random subsets of files (merged files included) interleave, for every built-in policy.

The model keeps what a reader of the table should see, changed in place: the live entries of
each key (collapsing, dedup: a blind insert of an existing key adds one, a correction replaces
them all), the latest row of each key (replacing, with or without a version column: a late row
of a lower version stays hidden) or each group's sums (aggregating). After every step, and by
time travel at the end, ``count()`` must equal the model's row count and the totals' count, with
a partition filter too; totals' sums and the visible rows must equal the model's.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples

KEYS = st.integers(min_value=0, max_value=5)
VALUES = st.one_of(st.none(), st.integers(min_value=-3, max_value=3))
PARTS = st.sampled_from(["x", "y"])

Model = dict[int, Any]


class Oracle:
    """The table's meaning, changed in place by each write."""

    def __init__(self, kind: str) -> None:
        self.kind = kind  # "signed", "replacing", "versioned" or "aggregating"
        self.keys: Model = {}

    def insert(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            k = row["k"]
            if self.kind == "signed":
                self.keys.setdefault(k, []).append(row)
            elif self.kind == "aggregating":
                self.keys[k] = self._added(self.keys.get(k), row)
            elif self.kind == "versioned" and k in self.keys and self.keys[k][0] > row["ver"]:
                continue  # a late row of an older version stays hidden
            else:
                self.keys[k] = (row.get("ver"), row)

    def replace(self, rows: list[dict[str, Any]]) -> None:
        """upsert (and update of existing keys): the key's rows become ``row``."""
        for row in rows:
            self.keys.pop(row["k"], None)
            if self.kind == "versioned":
                self.keys[row["k"]] = (row["ver"], row)
            else:
                self.insert([row])

    def delete(self, keys: list[int]) -> None:
        for k in keys:
            if self.kind == "versioned" and k in self.keys:
                version, row = self.keys[k]
                self.keys[k] = (version, None) if row is not None else self.keys[k]
            else:
                self.keys.pop(k, None)

    def visible(self) -> list[dict[str, Any]]:
        if self.kind == "signed":
            return [rows[-1] for rows in self.keys.values() if rows]
        if self.kind == "aggregating":
            return [{"k": k, "v": n, "c": c} for k, (n, c) in self.keys.items()]
        return [row for _, row in self.keys.values() if row is not None]

    def counted_rows(self) -> list[dict[str, Any]]:
        """The rows totals count and sum: every live entry where visible rows are signed."""
        if self.kind == "signed":
            return [row for rows in self.keys.values() for row in rows]
        return self.visible()

    @staticmethod
    def _added(group: tuple[int, int] | None, row: dict[str, Any]) -> tuple[int, int]:
        """A group's sums: a rollup reads a sum over no non-NULL value as 0."""
        n, c = group if group is not None else (0, 0)
        return n + (row["v"] or 0), c + 1


def _signed_table(policy: str) -> Callable[[ledger.Warehouse], ledger.Table]:
    def create(warehouse: ledger.Warehouse) -> ledger.Table:
        schema = {"k": "BIGINT", "v": "BIGINT", "p": "VARCHAR"}
        return warehouse.create_table("t", schema, "k", partition_by="p", policy=policy)

    return create


def _replacing(warehouse: ledger.Warehouse) -> ledger.Table:
    schema = {"k": "BIGINT", "v": "BIGINT", "p": "VARCHAR"}
    return warehouse.create_table("t", schema, "k", partition_by="p", policy="replacing")


def _versioned(warehouse: ledger.Warehouse) -> ledger.Table:
    schema = {"k": "BIGINT", "v": "BIGINT", "p": "VARCHAR", "ver": "BIGINT"}
    policy = {"name": "replacing", "version_column": "ver"}
    return warehouse.create_table("t", schema, "k", partition_by="bucket(2, k)", policy=policy)


def _aggregating(warehouse: ledger.Warehouse) -> ledger.Table:
    schema = {"k": "BIGINT", "v": "BIGINT", "c": "BIGINT"}
    policy = {"name": "aggregating", "measures": {"v": "sum", "c": "count"}}
    return warehouse.create_table("t", schema, "k", partition_by="bucket(2, k)", policy=policy)


TABLES = {
    "collapsing": (_signed_table("collapsing"), "signed"),
    "dedup": (_signed_table("dedup"), "signed"),
    "replacing": (_replacing, "replacing"),
    "replacing_versions": (_versioned, "versioned"),
    "aggregating": (_aggregating, "aggregating"),
}

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "upsert", "update", "delete", "merge", "merge"]),
        st.lists(st.tuples(KEYS, VALUES, PARTS), min_size=1, max_size=3),
        st.lists(st.booleans(), min_size=8, max_size=8),
        st.integers(min_value=0, max_value=3),
    ),
    min_size=3,
    max_size=7,
)


@pytest.mark.parametrize("table_kind", list(TABLES))
@settings(max_examples=examples(4), deadline=None)
@given(operations=OPERATIONS)
def test_count_totals_and_visible_follow_the_model_through_partial_merges(
    table_kind: str, operations: list[tuple[str, list[tuple[int, Any, str]], list[bool], int]]
) -> None:
    create, kind = TABLES[table_kind]
    table = create(ledger.connect(tempfile.mkdtemp()))
    oracle = Oracle(kind)
    counts_by_version: dict[int, int] = {}
    version_counter = iter(range(10, 10_000, 10))
    for op, picks, chosen, late in operations:
        rows = [_row(kind, k, v, p, next(version_counter)) for k, v, p in picks]
        _apply(table, oracle, op, rows, chosen, late)
        _check(table, oracle)
        counts_by_version[table.refresh().version] = len(oracle.counted_rows())
    for version, expected in counts_by_version.items():
        assert table.count(version=version) == expected, f"count() at version {version}"


def _row(kind: str, k: int, v: Any, p: str, version: int) -> dict[str, Any]:
    if kind == "aggregating":
        return {"k": k, "v": v, "c": 1}
    row = {"k": k, "v": v, "p": p}
    return {**row, "ver": version} if kind == "versioned" else row


def _apply(
    table: ledger.Table,
    oracle: Oracle,
    op: str,
    rows: list[dict[str, Any]],
    chosen: list[bool],
    late: int,
) -> None:
    unique = list({r["k"]: r for r in rows}.values())  # a correction names a key once
    if op == "insert":
        if oracle.kind == "versioned" and late:
            rows = [{**r, "ver": r["ver"] - 1000 * late} for r in rows]  # late, older data
        table.insert(rows)
        oracle.insert(rows)
    elif op == "upsert":
        table.upsert(unique)
        oracle.replace(unique)
    elif op == "update":
        present = [r for r in unique if r["k"] in {row["k"] for row in oracle.visible()}]
        if present:
            table.update(present)
            oracle.replace(present)
    elif op == "delete":
        keys = [r["k"] for r in unique]  # absent keys too: nothing to delete for them
        table.delete(keys)
        oracle.delete(keys)
    else:
        _merge(table, chosen, late)


def _merge(table: ledger.Table, chosen: list[bool], how: int) -> None:
    files = [m.path for m in sorted(table.snapshot().markers(), key=lambda m: m.trx_min)]
    if not files:
        return
    if how == 0:
        table.merge(min_files=2)
    elif how == 1:
        table.merge(min_files=1)
    else:  # a random subset (merged files included), within each partition
        subset = [f for i, f in enumerate(files) if chosen[i % len(chosen)]] or files[-2:]
        table.merge(files=subset)


def _check(table: ledger.Table, oracle: Oracle) -> None:
    counted = oracle.counted_rows()
    visible = sorted(oracle.visible(), key=lambda r: r["k"])
    got = views.visible(table).order("k").fetchall()
    assert [r[0] for r in got] == [r["k"] for r in visible], "visible keys"
    assert [r[1] for r in got] == [r["v"] for r in visible], "visible values"
    [(count, total)] = views.totals(table, sum="v").fetchall()
    values = [r["v"] for r in counted if r["v"] is not None]
    assert count == len(counted), "totals' count"
    # No visible value: NULL, or 0 where entries holding values cancel out (docs/views.md).
    assert total == (sum(values) if values else None) or (not values and total == 0), "sum"
    assert table.count() == len(counted), "count()"
    for part in _partition_filters(table):
        [(in_part,)] = views.totals(table, partitions=part).fetchall()
        assert table.count(partitions=part) == in_part, f"count() of {part}"


def _partition_filters(table: ledger.Table) -> list[dict[str, Any]]:
    fields = [p.values for p in table.partitions()]
    return [dict(f) for f in fields if f]
