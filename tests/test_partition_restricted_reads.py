"""Partition-restricted reads against the unrestricted answer filtered to the partition.

A key's visible row is decided by every entry of the key, wherever it lives: a key written
again (blind insert or upsert) into another partition of a table keyed apart from its
partition column moves its row there, and its old row is visible nowhere. So, for every
policy, random writes over a few keys and partition values with random subset merges, each
of ``views.visible``, ``views.rows``, ``views.totals`` and ``count()`` restricted to one
partition (and to two) must equal the unrestricted answer filtered to those partitions, and
``partitions()`` must count each partition's rows as ``count()`` restricted to it does.
Tables partitioned by a function of their key read only the chosen files (nothing changes).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.partitioning import PartitionSpec
from tests.conftest import examples

PARTS = ["a", "b", "c"]
SCHEMA = {"k": "BIGINT", "v": "BIGINT", "p": "VARCHAR"}


def _table(policy: Any, partition_by: str = "p") -> Callable[[ledger.Warehouse], ledger.Table]:
    def create(warehouse: ledger.Warehouse) -> ledger.Table:
        schema = dict(SCHEMA)
        if isinstance(policy, dict) and policy.get("version_column"):
            schema["ver"] = "BIGINT"
        return warehouse.create_table("t", schema, "k", partition_by=partition_by, policy=policy)

    return create


def _aggregating_by_measure(warehouse: ledger.Warehouse) -> ledger.Table:
    # Partitioned by a measure: a group's entries spread over partitions, its row in one.
    schema = {"k": "BIGINT", "v": "BIGINT", "p": "VARCHAR"}
    policy = {"name": "aggregating", "measures": {"v": "sum", "p": "max"}, "insert_only": True}
    return warehouse.create_table("t", schema, "k", partition_by="p", policy=policy)


TABLES: dict[str, Callable[[ledger.Warehouse], ledger.Table]] = {
    "replacing": _table("replacing"),
    "replacing_versions": _table({"name": "replacing", "version_column": "ver"}),
    "dedup": _table("dedup"),
    "dedup_by_value": _table({"name": "dedup", "dedup_key": ["k", "v"]}),
    "collapsing": _table("collapsing"),
    "aggregating_by_measure": _aggregating_by_measure,
    "replacing_by_key_bucket": _table("replacing", partition_by="bucket(3, k)"),
}

OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["insert", "insert", "upsert", "delete", "merge"]),
        st.lists(
            st.tuples(
                st.integers(min_value=0, max_value=3),
                st.integers(min_value=-3, max_value=3),
                st.sampled_from(PARTS),
            ),
            min_size=1,
            max_size=3,
        ),
        st.lists(st.booleans(), min_size=6, max_size=6),
    ),
    min_size=2,
    max_size=6,
)


@pytest.mark.parametrize("table_kind", list(TABLES))
@settings(max_examples=examples(3), deadline=None)  # `make test-deep` runs hundreds
@given(operations=OPERATIONS)
# A key written again into another partition, every policy's simplest case, in every run.
@example(operations=[("insert", [(0, 0, "a")], [False] * 6), ("insert", [(0, 1, "b")], [True] * 6)])
def test_partition_restricted_reads_equal_the_whole_answer_filtered(
    table_kind: str, operations: list[tuple[str, list[tuple[int, int, str]], list[bool]]]
) -> None:
    table = TABLES[table_kind](ledger.connect(tempfile.mkdtemp()))
    versions = iter(range(10, 10_000, 10))
    for op, picks, chosen in operations:
        rows = [_row(table, k, v, p, next(versions)) for k, v, p in picks]
        _apply(table, op, rows, chosen)
    _check(table)


def _row(table: ledger.Table, k: int, v: int, p: str, version: int) -> dict[str, Any]:
    row: dict[str, Any] = {"k": k, "v": v, "p": p}
    return {**row, "ver": version} if "ver" in table.schema else row


def _apply(table: ledger.Table, op: str, rows: list[dict[str, Any]], chosen: list[bool]) -> None:
    insert_only = table.snapshot().state.config.policy.get("insert_only", False)
    unique = list({r["k"]: r for r in rows}.values())
    if op == "insert" or insert_only:
        table.insert(rows)
    elif op == "upsert":
        table.upsert(unique)
    elif op == "delete":
        table.delete([r["k"] for r in unique])
    if op == "merge":
        files = [m.path for m in sorted(table.snapshot().markers(), key=lambda m: m.trx_min)]
        subset = [f for i, f in enumerate(files) if chosen[i % len(chosen)]] or files[-2:]
        if subset:
            table.merge(files=subset)


def _check(table: ledger.Table) -> None:
    field = PartitionSpec.parse(list(table.partition_by), table.snapshot().state.schema).fields[0]
    shown = views.visible(table).columns
    position = shown.index(field.source)
    whole = sorted(views.visible(table).fetchall())
    by_letter = table.partition_by == ("p",)
    # The bucket table's buckets stand for the letters: 0, 1, 2 for a, b, c.
    filters = [[p] for p in PARTS] + [["a", "c"]]
    for wanted in filters:
        values = wanted if by_letter else [str(PARTS.index(w)) for w in wanted]
        partitions = {field.name: values}
        expected = [row for row in whole if field.value_of(row[position]) in values]
        got = sorted(views.visible(table, partitions=partitions).fetchall())
        assert got == expected, f"visible rows of {wanted}"
        arrow = views.rows(table, partitions=partitions, columns=["k", "v"]).to_pylist()
        assert sorted((r["k"], r["v"]) for r in arrow) == [r[:2] for r in expected], "rows"
        if by_letter:
            where = "p IN (" + ", ".join(f"'{w}'" for w in wanted) + ")"
            [whole_totals] = views.totals(table, sum="v", where=where).fetchall()
        else:  # a replacing table: totals are those of the visible rows
            sums = [row[1] for row in expected]
            whole_totals = (len(expected), sum(sums) if sums else None)
        [restricted] = views.totals(table, sum="v", partitions=partitions).fetchall()
        assert restricted == whole_totals, f"totals of {wanted}"
        assert table.count(partitions=partitions) == whole_totals[0], f"count() of {wanted}"
    for info in table.partitions():
        assert info.rows == table.count(partitions=info.values), f"rows of {info.values}"


def test_a_restricted_read_opens_only_the_files_that_may_share_its_keys(tmp_path: Any) -> None:
    warehouse = ledger.connect(str(tmp_path))
    by_key = warehouse.create_table(
        "by_key", SCHEMA, "k", partition_by="bucket(4, k)", policy="replacing"
    )
    by_key.insert([{"k": k, "v": 0, "p": "a"} for k in range(20)])
    by_key.insert([{"k": k, "v": 1, "p": "b"} for k in range(20)])
    snap = by_key.snapshot()
    read = snap.partition_read({"k_bucket": "1"})
    # Partitioned by a function of the key: the chosen files alone, no row filtered.
    assert read.exact and read.markers == snap.markers({"k_bucket": "1"})

    table = TABLES["replacing"](warehouse)
    table.insert([{"k": 100 * i + j, "v": 0, "p": p} for i, p in enumerate(PARTS) for j in (1, 2)])
    snap = table.snapshot()
    read = snap.partition_read({"p": "a"})
    assert not read.exact  # rows are still kept by partition
    assert read.markers == snap.markers({"p": "a"})  # no other file's key range meets a's
    table.insert([{"k": 1, "v": 5, "p": "c"}])  # a key of a, written again into c
    snap = table.snapshot()
    opened = {m.partition["p"] for m in snap.partition_read({"p": "a"}).markers}
    assert opened == {"a", "c"}
    assert views.visible(table, partitions={"p": "a"}).fetchall() == [(2, 0, "a")]
    # Totals of signed tables sum entries, each in its own row's partition: exact.
    assert (
        TABLES["collapsing"](ledger.connect(str(tmp_path / "c")))
        .snapshot()
        .partition_read({"p": "a"}, entries=True)
        .exact
    )


def test_the_null_partition_is_restricted_as_the_others(tmp_path: Any) -> None:
    table = TABLES["replacing"](ledger.connect(str(tmp_path)))
    table.insert([{"k": 1, "v": 1, "p": None}, {"k": 2, "v": 2, "p": None}])
    table.insert([{"k": 2, "v": 20, "p": "a"}])  # k=2 leaves the NULL partition
    assert views.visible(table, partitions={"p": None}).fetchall() == [(1, 1, None)]
    assert table.count(partitions={"p": None}) == 1
    assert [(p.values, p.rows) for p in table.partitions()] == [({"p": None}, 1), ({"p": "a"}, 1)]
