"""The generated views (views/): visible rows, totals, history, changes, SQL text, the catalog.

Behaviours, each checked against a reference that never runs the views' SQL:

- an oracle table updated in place (``tests.support.view_oracle``): random writes and merges,
  then the views must answer like plain SQL over the oracle's rows, at every version;
- ``policy_answer`` (``tests.support.ledger_reads``) for every built-in merge policy, before and
  after merges of random file subsets, with and without partitions, with and without a key;
- the isolated-file fast path (files a full merge left with unique keys) while later appends
  overlap them;
- awkward column names, time travel, history, the change feed, SQL text for DuckDB and Spark,
  the warehouse catalog, typed errors for bad requests, and the S3 backend.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from decimal import Decimal
from typing import Any
from unittest import mock

import pyarrow as pa
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

import ledger
import views
import views.reading
from ledger.engines.duckdb.session import connect
from ledger.errors import StaleVersionError
from ledger.maintenance import merge as merging
from ledger.reads import totals as total_reads
from ledger.reads.files import split_isolated
from ledger.schema import ROW_ID
from ledger.sql import ident
from tests.conftest import examples
from tests.support.arrow_data import rows as arrow_rows
from tests.support.engines import Engine
from tests.support.engines import sorted_rows as engine_rows
from tests.support.ledger_reads import policy_answer, sign_sums
from tests.support.ledger_reads import raw_entries as raw
from tests.support.maintenance import POLICIES
from tests.support.policy_tables import POLICY_TABLES, policy_table
from tests.support.view_oracle import InPlaceTable, assert_same_rows, plain_totals

SCHEMA = {"k": "BIGINT", "x": "DOUBLE", "d": "DECIMAL(18,2)", "s": "VARCHAR", "n": "BIGINT"}

KEYS = st.integers(min_value=0, max_value=5)
XS = st.none() | st.sampled_from([0.5, -2.25, 1e3 / 3])
DS = st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("1234.56")])
SS = st.none() | st.sampled_from(["x", "y", "it's"])
NS = st.none() | st.integers(min_value=-3, max_value=3)
ROW = st.fixed_dictionaries({"k": KEYS, "x": XS, "d": DS, "s": SS, "n": NS})
PARTIAL_ROW = (
    ROW
    | st.fixed_dictionaries({"k": KEYS, "x": XS})
    | st.fixed_dictionaries({"k": KEYS, "d": DS, "s": SS})
)

# (SQL, the same test in Python with SQL's NULL semantics)
PREDICATES: list[tuple[str, Any]] = [
    ("n > 0", lambda r: r["n"] is not None and r["n"] > 0),
    ("s = 'x'", lambda r: r["s"] == "x"),
    ("x IS NULL", lambda r: r["x"] is None),
    ("d < 0", lambda r: r["d"] is not None and r["d"] < 0),
    ("k % 2 = 0", lambda r: r["k"] % 2 == 0),
    ("s = 'it''s' OR n IS NULL", lambda r: r["s"] == "it's" or r["n"] is None),
]

BYS = st.sampled_from([(), ("s",), ("n",), ("s", "n"), ("k",), ("x",), ("d",)])
MEASURED = st.lists(st.sampled_from(["x", "d", "n", "k"]), unique=True, max_size=3)
WHERES = st.none() | st.sampled_from([sql for sql, _ in PREDICATES])

# Examples per case in the everyday run; `make test-deep` runs hundreds.
ORACLE_SETTINGS = settings(max_examples=examples(10), deadline=None)
POLICY_SETTINGS = settings(max_examples=examples(3), deadline=None)


@contextmanager
def _scratch_warehouse() -> Iterator[ledger.Warehouse]:
    """A fresh local warehouse for one hypothesis example, in memory (tmpfs) where there is one:
    these suites test answers, not durability, and every commit fsyncs."""
    memory = "/dev/shm"
    base = memory if os.path.isdir(memory) and os.access(memory, os.W_OK) else None
    directory = tempfile.mkdtemp(prefix="ledger-views-", dir=base)
    try:
        yield ledger.connect(directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def scratch() -> Iterator[ledger.Warehouse]:
    """A fresh local warehouse in memory where possible (see _scratch_warehouse)."""
    with _scratch_warehouse() as warehouse:
        yield warehouse


def _bucket(value: Any, buckets: int = 2) -> str:
    """The ``bucket(N, column)`` partition value of an integer (docs/format.md section 8)."""
    return str(zlib.crc32(str(value).encode()) % buckets)


def _unique_keys(rows: list[dict[str, Any]], key: str = "k") -> list[dict[str, Any]]:
    return list({row[key]: row for row in rows}.values())


def _same_columns(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One operation's rows share their columns."""
    columns = set(rows[0])
    return [r for r in rows if set(r) == columns]


def _files_in_commit_order(table: ledger.Table) -> list[str]:
    markers = sorted(
        table.snapshot().markers(),
        key=lambda m: (m.trx_min, m.trx_max, repr(sorted(m.partition.items())), m.rows),
    )
    return [m.path for m in markers]


def _merge_something(table: ledger.Table, data: st.DataObject) -> ledger.Table:
    """A merge of a random subset of the alive files, or of every file of every partition."""
    paths = _files_in_commit_order(table)
    if not paths:
        return table
    how = data.draw(st.sampled_from(["subset", "subset", "full"]), label="merge")
    if how == "subset":
        chosen = data.draw(st.lists(st.booleans(), min_size=len(paths), max_size=len(paths)))
        table.merge(files=[p for p, c in zip(paths, chosen, strict=True) if c] or paths[-1:])
    else:
        table.merge(min_files=1)
    return table


@contextmanager
def _every_transaction_settled() -> Iterator[None]:
    """Merges take every committed transaction as settled, so replacing merges drop marks."""
    with mock.patch.object(merging, "CLOCK_SKEW_MS", -86_400_000):
        yield


def _visible(table: ledger.Table | ledger.Snapshot, **kw: Any) -> list[tuple[Any, ...]]:
    return sorted(views.visible(table, **kw).fetchall(), key=repr)


def _totals_args(data: st.DataObject) -> dict[str, Any]:
    by = list(data.draw(BYS, label="by"))
    sums = data.draw(MEASURED, label="sum")
    avgs = data.draw(MEASURED, label="avg")
    count = data.draw(st.booleans(), label="count") or not (sums or avgs)
    where = data.draw(WHERES, label="where")
    return {"by": by, "sum": sums, "avg": avgs, "count": count, "where": where}


def _check_totals(
    table: ledger.Table, oracle: InPlaceTable, args: dict[str, Any], **kw: Any
) -> None:
    got = views.totals(table, **args, **kw).fetchall()
    want = oracle.totals(args["by"], args["sum"], args["avg"], args["count"], args["where"])
    assert_same_rows(got, want, len(args["by"]), f"totals({args}, {kw})")


# --- 1. against a table updated in place -------------------------------------------------------


OPERATION = st.one_of(
    st.tuples(st.just("insert"), st.lists(ROW, min_size=1, max_size=4)),
    st.tuples(st.just("upsert"), st.lists(PARTIAL_ROW, min_size=1, max_size=4)),
    st.tuples(st.just("update"), st.lists(PARTIAL_ROW, min_size=1, max_size=3)),
    st.tuples(st.just("delete"), st.lists(KEYS, min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("delete_where"), st.integers(0, len(PREDICATES) - 1)),
    st.tuples(st.just("merge"), st.none()),
    st.tuples(st.just("drop"), st.sampled_from(["0", "1"])),
)


def _apply(
    table: ledger.Table, oracle: InPlaceTable, operation: tuple[str, Any], data: st.DataObject
) -> int | None:
    """Run one operation on the table and the oracle; the version it committed, if any."""
    kind, argument = operation
    if kind == "insert":
        oracle.insert(argument)
        return table.insert(argument).version
    if kind == "upsert":
        rows = _same_columns(_unique_keys(argument))
        oracle.replace(rows)
        return table.upsert(rows).version
    if kind == "update":
        rows = _same_columns(_unique_keys(argument))
        if all(oracle.exists((r["k"],)) for r in rows):
            oracle.replace(rows)
            return table.update(rows).version
        version = table.refresh().version
        with pytest.raises(ledger.KeyNotFoundError):
            table.update(rows)
        assert table.refresh().version == version
        return None
    if kind == "delete":
        oracle.delete([(k,) for k in argument])
        return table.delete(argument).version
    if kind == "delete_where":
        sql, matches = PREDICATES[argument]
        oracle.delete_where(matches)
        return table.delete_where(sql).version
    if kind == "merge":
        _merge_something(table, data)
        assert _visible(table) == oracle.visible(), "a merge changed the visible rows"
        return table.refresh().version
    if kind == "drop":
        if not table.partition_by:
            return None
        oracle.delete([key for key in list(oracle.rows) if _bucket(key[0]) == argument])
        return table.drop_partitions({"k_bucket": argument}).version
    raise AssertionError(kind)


def _change_totals(table: ledger.Table, since: int, until: int) -> tuple[Any, ...]:
    """(count, sum n, sum d, sum x) of the change feed, each entry signed by its change type,
    and the versions the feed names."""
    rows = views.changes(table, since, until)
    signed = (
        "CASE WHEN _change_type IN ('insert', 'update_postimage') THEN 1 "
        "WHEN _change_type IN ('delete', 'update_preimage') THEN -1 END"
    )
    return rows.aggregate(
        f"coalesce(sum({signed}), 0), coalesce(sum({signed} * n), 0), "
        f"coalesce(sum({signed} * d), 0), coalesce(sum({signed} * x), 0), "
        'coalesce(list(DISTINCT "_commit_version"), [])'
    ).fetchall()[0]


def _oracle_sums(oracle: InPlaceTable) -> tuple[Any, ...]:
    count, n, d, x = oracle.totals(sums=["n", "d", "x"])[0]
    return count, n or 0, d or Decimal(0), x or 0.0


@ORACLE_SETTINGS
@given(data=st.data())
def test_views_answer_like_a_table_updated_in_place(data: st.DataObject) -> None:
    partition_by = data.draw(st.sampled_from([None, "bucket(2, k)"]), label="partition_by")
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t", SCHEMA, primary_key="k", partition_by=partition_by, checkpoint_interval=5
        )
        _check_against_the_oracle(table, data)


def _check_against_the_oracle(table: ledger.Table, data: st.DataObject) -> None:
    oracle = InPlaceTable(table.arrow_schema, ["k"])
    states = {table.version: oracle.copy()}  # version -> the oracle at that version
    written: dict[int, str] = {}  # version -> the operation that committed it
    operations = data.draw(st.lists(OPERATION, min_size=2, max_size=6), label="operations")
    for operation in operations:
        version = _apply(table, oracle, operation, data)
        if version is not None and version not in states:
            states[version] = oracle.copy()
            written[version] = operation[0]

    assert _visible(table) == oracle.visible()
    _check_totals(table, oracle, _totals_args(data))

    # Time travel, by version or by the commit's timestamp.
    versions = sorted(states)
    past = data.draw(st.sampled_from(versions), label="past version")
    if data.draw(st.booleans(), label="by timestamp"):
        stamp = table.snapshot(past).timestamp_ms
        when = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=stamp)
        assert _visible(table, timestamp=when) == states[past].visible()
    else:
        assert _visible(table, version=past) == states[past].visible()
    _check_totals(table, states[past], _totals_args(data), version=past)

    # The change feed between two versions adds up to the difference of their totals; merges
    # add nothing to it.
    since = data.draw(st.sampled_from(versions), label="since")
    until = data.draw(st.sampled_from([v for v in versions if v >= since]), label="until")
    *got, feed_versions = _change_totals(table, since, until)
    before, after = _oracle_sums(states[since]), _oracle_sums(states[until])
    assert got[:3] == [after[0] - before[0], after[1] - before[1], after[2] - before[2]]
    assert got[3] == pytest.approx(after[3] - before[3], abs=1e-6)
    assert all(written.get(v) not in ("merge", None) for v in feed_versions), feed_versions


# --- 2. every built-in policy, against policy_answer ---------------------------------------------


POLICY_SCHEMA = {"k": "BIGINT", "v": "DECIMAL(18,2)", "n": "BIGINT"}
POLICY_ROW = st.fixed_dictionaries(
    {
        "k": st.integers(0, 4),
        "v": st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("7.00")]),
        "n": st.none() | st.integers(-2, 2),
    }
)
# Rollup rows: the count measure n is positive.
ROLLUP_ROW = POLICY_ROW.map(lambda r: {**r, "n": 1 if r["n"] is None or r["n"] <= 0 else r["n"]})
POLICY_PREDICATES = ["v > 0", "n IS NULL", "k % 2 = 1", "v IS NULL OR n < 0"]

POLICY_CASES = {
    **{name: (policy, "k") for name, policy in POLICIES.items()},
    "collapsing-no-key": ("collapsing", None),
}


def _keys_with_rows(table: ledger.Table) -> list[Any]:
    """Keys (or row ids) with a visible row, from the reference."""
    if table.config["policy"]["name"] == "replacing":
        return sorted(row[0] for row in policy_answer(table)["visible"])
    return sorted(key[0] for key, net in sign_sums(table).items() if net > 0)


def _policy_write(table: ledger.Table, data: st.DataObject, batches: list[list[dict]]) -> None:
    """One random write; an upsert or update giving a replacing table's row a lower version than
    its key's latest entry is refused before writing (docs/merges.md 2.2) and changes nothing."""
    with suppress(StaleVersionError):
        _policy_write_or_refuse(table, data, batches)


def _policy_write_or_refuse(
    table: ledger.Table, data: st.DataObject, batches: list[list[dict]]
) -> None:
    keyed = bool(table.primary_key)
    rollup = table.config["policy"]["name"] == "aggregating"
    row = ROLLUP_ROW if rollup else POLICY_ROW
    kinds = ["insert", "repeat", "update", "delete", "delete_where"] + (["upsert"] if keyed else [])
    kind = data.draw(st.sampled_from(kinds), label="write")
    if kind == "insert" or (kind == "repeat" and not batches):
        rows = data.draw(st.lists(row, min_size=1, max_size=4), label="rows")
        table.insert(rows)
        batches.append(rows)
    elif kind == "repeat":  # a batch loaded again
        table.insert(batches[data.draw(st.integers(0, len(batches) - 1), label="batch")])
    elif kind == "upsert":
        table.upsert(_unique_keys(data.draw(st.lists(row, min_size=1, max_size=3), label="rows")))
    elif kind == "update":
        present = _keys_with_rows(table)
        if present:
            picks = data.draw(st.lists(st.sampled_from(present), min_size=1, unique=True))
            rows = [data.draw(row, label="new values") for _ in picks]
            key = "k" if keyed else ROW_ID
            table.update([{**r, key: p} for r, p in zip(rows, picks, strict=True)])
    elif kind == "delete":
        present = _keys_with_rows(table)
        if present:
            table.delete(data.draw(st.lists(st.sampled_from(present), min_size=1, unique=True)))
    else:
        table.delete_where(data.draw(st.sampled_from(POLICY_PREDICATES), label="predicate"))


def _expected_totals(answer: dict[str, Any]) -> tuple[Any, ...]:
    """policy_answer's totals in the column order of totals(sum=[k, v, n], avg=[k, v, n])."""
    totals = answer["totals"]
    return (
        totals["count"],
        *(totals[c][0] for c in ("k", "v", "n")),
        *(totals[c][1] for c in ("k", "v", "n")),
    )


def _weighted_totals(table: ledger.Table, keys: list[Any]) -> list[tuple[Any, ...]]:
    """count and SUM(v) of the entries of ``keys``, weighted by dml_type (after dropping repeats
    on a dedup table): what a partition's totals are on a collapsing or dedup table."""
    policy = table.config["policy"]
    con = connect()
    try:
        table.scan(con=con).create_view("raw")
        source = "raw"
        if policy["name"] == "dedup":
            columns = [*list(policy.get("dedup_key") or ["k", "trx_id", "trx_seq"]), "dml_type"]
            source = (
                "(SELECT * FROM raw QUALIFY row_number() OVER (PARTITION BY "
                f"{', '.join(ident(c) for c in columns)} ORDER BY trx_id, trx_seq) = 1)"
            )
        in_keys = ", ".join(str(int(k)) for k in keys) or "NULL"
        present = "coalesce(sum(dml_type * CAST(v IS NOT NULL AS INT)), 0)"
        return con.sql(
            f"SELECT CAST(coalesce(sum(dml_type), 0) AS BIGINT), CASE WHEN {present} = 0 THEN "
            f"NULL ELSE sum(dml_type * v) END FROM {source} WHERE k IN ({in_keys})"
        ).fetchall()
    finally:
        con.close()


def _policy_views(table: ledger.Table) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """What the views answer: visible rows (with _row_id on a table without a key, as the
    reference shows them) and the totals policy_answer computes (rollup totals for rollups)."""
    if table.primary_key:
        visible = _visible(table)
    else:  # the view shows _row_id among the system columns
        rows = views.visible(table, system_columns=True).fetchall()
        visible = sorted((r[:-2] for r in rows), key=repr)
    if table.config["policy"]["name"] == "aggregating":
        totals = views.totals(table, sum=["v", "n"], avg=["v"]).fetchall()
    else:
        totals = views.totals(table, sum=["k", "v", "n"], avg=["k", "v", "n"]).fetchall()
    return visible, totals


def _check_policy_views(table: ledger.Table, answer: Any) -> Any:
    """The views equal policy_answer; returns the views' answer."""
    visible, totals = _policy_views(table)
    name = table.config["policy"]["name"]
    if name == "aggregating":
        assert visible == answer, "rollup rows differ from policy_answer"
        rollup = pa.Table.from_pylist(
            [dict(zip(["k", "v", "n"], r, strict=True)) for r in answer], schema=table.arrow_schema
        )
        assert_same_rows(totals, plain_totals(rollup, (), ["v", "n"], ["v"]), 0, "rollup totals")
    else:
        assert visible == answer["visible"], f"{name}: visible rows differ from policy_answer"
        assert_same_rows(totals, [_expected_totals(answer)], 0, f"{name}: totals")
    return visible, totals


def _check_partition_pruning(table: ledger.Table, answer: Any, bucket: str) -> None:
    # A dedup key other than the table key can repeat across partitions: pruned views differ.
    if table.partition_by != ("bucket(2, k)",) or table.config["policy"].get("dedup_key"):
        return
    name = table.config["policy"]["name"]
    rows = answer if name == "aggregating" else answer["visible"]
    in_bucket = sorted((r for r in rows if _bucket(r[0]) == bucket), key=repr)
    assert _visible(table, partitions={"k_bucket": bucket}) == in_bucket
    got = views.totals(table, sum="v", partitions={"k_bucket": bucket}).fetchall()
    if name in ("aggregating", "replacing"):
        shown = pa.Table.from_pylist(
            [dict(zip(["k", "v", "n"], r, strict=True)) for r in in_bucket],
            schema=table.arrow_schema,
        )
        want = plain_totals(shown, (), ["v"])
    else:
        want = _weighted_totals(table, [k for k in range(5) if _bucket(k) == bucket])
    assert_same_rows(got, want, 0, f"totals of partition {bucket}")


@pytest.mark.parametrize("case", list(POLICY_CASES))
@POLICY_SETTINGS
@given(data=st.data())
def test_views_equal_policy_answer_before_and_after_merges(case: str, data: st.DataObject) -> None:
    """Merges keep policy_answer (tests/test_merge_invariance.py), so after each merge the views
    must answer as they did before it."""
    policy, primary_key = POLICY_CASES[case]
    if case in ("replacing", "dedup"):  # with or without a version column / dedup key
        option = {"replacing": {"version_column": "n"}, "dedup": {"dedup_key": ["n"]}}[case]
        if data.draw(st.booleans(), label="option"):
            policy = {**policy, **option}
    partition_by = data.draw(
        st.sampled_from([None, "bucket(2, k)" if primary_key else "bucket(2, n)"]), label="parts"
    )
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t", POLICY_SCHEMA, primary_key=primary_key, partition_by=partition_by, policy=policy
        )
        batches: list[list[dict]] = []
        for _ in range(data.draw(st.integers(2, 4), label="writes")):
            _policy_write(table, data, batches)
        answer = policy_answer(table)
        before = _check_policy_views(table, answer)
        with _every_transaction_settled():
            for _ in range(data.draw(st.integers(1, 2), label="merges")):
                _merge_something(table, data)
                after = _policy_views(table)
                assert after[0] == before[0], "a merge changed the visible rows"
                assert_same_rows(after[1], before[1], 0, "a merge changed the totals")
        _check_partition_pruning(table, answer, data.draw(st.sampled_from("01"), label="bucket"))


# --- 3. the isolated-file fast path --------------------------------------------------------------


def _isolated(table: ledger.Table) -> tuple[int, int]:
    """(files the fast path reads as they are, files it cancels entries in)."""
    snap = table.snapshot()
    types = [table.arrow_schema.field(k).type for k in table.primary_key]
    isolated, others = split_isolated(snap.markers(), types)
    return len(isolated), len(others)


def _check_against_reference(table: ledger.Table) -> None:
    answer = policy_answer(table)
    assert _visible(table) == answer["visible"]
    assert_same_rows(
        views.totals(table, sum=["temp"], avg=["temp"]).fetchall(),
        [(answer["totals"]["count"], *answer["totals"]["temp"])],
        0,
        "totals",
    )


@pytest.mark.parametrize("policy", ["collapsing", "replacing"])
def test_fast_path_after_a_full_merge_stays_right_when_appends_overlap(
    scratch: ledger.Warehouse, policy: str
) -> None:
    table = scratch.create_table(
        "m", {"id": "BIGINT", "temp": "DOUBLE"}, primary_key="id", policy=policy
    )
    table.insert([{"id": i, "temp": float(i)} for i in range(0, 10)])
    table.insert([{"id": i, "temp": float(i)} for i in range(20, 30)])
    table.update([{"id": 3, "temp": -3.0}])
    table.delete([25])
    with _every_transaction_settled():
        table.merge(min_files=1)
    markers = table.snapshot().markers()
    assert markers and all(m.unique_keys for m in markers), "a full merge left duplicate keys"
    assert _isolated(table) == (len(markers), 0), "the fast path is not taken after a full merge"
    _check_against_reference(table)

    # A blind append inside the merged key range, a duplicate load, a delete of a merged key.
    table.insert([{"id": 5, "temp": 55.0}, {"id": 15, "temp": 15.0}])
    assert _isolated(table)[0] == 0
    _check_against_reference(table)
    table.insert([{"id": 5, "temp": 55.0}, {"id": 15, "temp": 15.0}])
    _check_against_reference(table)
    table.delete([7])
    _check_against_reference(table)
    # A file beside the merged range stays on the fast path and is still right.
    table.insert([{"id": 100, "temp": 1.0}])
    _check_against_reference(table)
    assert (100, 1.0) in _visible(table)


def test_fast_path_with_a_two_column_key_of_device_and_time(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table(
        "probes",
        {"device_id": "BIGINT", "probe_dtime": "TIMESTAMP", "temp": "DOUBLE"},
        primary_key=["device_id", "probe_dtime"],
    )
    start = dt.datetime(2026, 1, 1)
    rows = [
        {"device_id": d, "probe_dtime": start + dt.timedelta(minutes=m), "temp": d * 10.0 + m}
        for d in range(3)
        for m in range(4)
    ]
    table.insert(rows)
    table.update([{"device_id": 1, "probe_dtime": start, "temp": -1.0}])
    table.merge(min_files=1)
    assert _isolated(table) == (1, 0)
    _check_against_reference(table)
    # Devices beyond the merged range, then a late probe inside it, then a duplicate load.
    table.insert([{"device_id": 7, "probe_dtime": start, "temp": 70.0}])
    assert _isolated(table) == (2, 0)
    _check_against_reference(table)
    late = {"device_id": 1, "probe_dtime": start + dt.timedelta(minutes=2), "temp": 99.0}
    table.insert([late])
    _check_against_reference(table)
    assert (1, late["probe_dtime"], 99.0) in _visible(table)
    table.insert(rows[:3])
    _check_against_reference(table)
    assert len(_visible(table)) == 13


PROBE_ROW = st.fixed_dictionaries(
    {
        "device_id": st.integers(0, 3),
        "probe_dtime": st.sampled_from([dt.datetime(2026, 1, 1, h) for h in range(4)]),
        "temp": st.none() | st.sampled_from([-1.5, 0.0, 21.25]),
    }
)


@settings(max_examples=examples(10), deadline=None)
@given(data=st.data())
def test_fast_path_matches_the_reference_whatever_the_appends(data: st.DataObject) -> None:
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "probes",
            {"device_id": "BIGINT", "probe_dtime": "TIMESTAMP", "temp": "DOUBLE"},
            primary_key=["device_id", "probe_dtime"],
        )
        for _ in range(data.draw(st.integers(2, 6), label="steps")):
            kind = data.draw(st.sampled_from(["insert", "upsert", "delete", "merge"]))
            rows = data.draw(st.lists(PROBE_ROW, min_size=1, max_size=4), label="rows")
            if kind == "insert":
                table.insert(rows)
            elif kind == "upsert":
                table.upsert(list({(r["device_id"], r["probe_dtime"]): r for r in rows}.values()))
            elif kind == "delete":
                table.delete(sorted({(r["device_id"], r["probe_dtime"]) for r in rows}))
            else:
                table.merge(min_files=1)
        _check_against_reference(table)


# --- 4. awkward column names ----------------------------------------------------------------------


AWKWARD = {
    "select": "BIGINT",
    'my "col"': "VARCHAR",
    "naïve temp": "DOUBLE",
    "order": "DECIMAL(18,2)",
    "group by": "VARCHAR",
}


@pytest.fixture
def awkward(scratch: ledger.Warehouse) -> tuple[ledger.Table, InPlaceTable]:
    table = scratch.create_table("awkward", AWKWARD, primary_key=["select", 'my "col"'])
    oracle = InPlaceTable(table.arrow_schema, ["select", 'my "col"'])
    rows = [
        {
            "select": 1,
            'my "col"': "a",
            "naïve temp": 1.5,
            "order": Decimal("2.50"),
            "group by": "g",
        },
        {
            "select": 1,
            'my "col"': "b",
            "naïve temp": None,
            "order": Decimal("1.00"),
            "group by": "g",
        },
        {"select": 2, 'my "col"': "a", "naïve temp": -4.0, "order": None, "group by": "h"},
        {
            "select": 3,
            'my "col"': "ü",
            "naïve temp": 8.0,
            "order": Decimal("-7.25"),
            "group by": None,
        },
    ]
    for write in (
        ("insert", rows),
        ("replace", [{"select": 1, 'my "col"': "a", "naïve temp": 3.0}]),
        ("delete", [(2, "a")]),
        ("insert", [{**rows[2], "naïve temp": 6.5}]),
    ):
        kind, argument = write
        if kind == "insert":
            table.insert(argument)
            oracle.insert(argument)
        elif kind == "replace":
            table.update(argument)
            oracle.replace(argument)
        else:
            table.delete(argument)
            oracle.delete(argument)
    return table, oracle


def test_awkward_column_names_as_keys_groups_and_measures(awkward: Any) -> None:
    table, oracle = awkward
    assert _visible(table) == oracle.visible()
    for by in ([], ["select"], ['my "col"'], ["naïve temp"], ["order"], ["group by"]):
        measures = ["select", "naïve temp", "order"]
        got = views.totals(table, by=by, sum=measures, avg=measures).fetchall()
        assert_same_rows(got, oracle.totals(by, measures, measures), len(by), f"by {by}")
    got = views.totals(table, by="group by", sum="order").columns
    assert got == ["group by", "count", "sum_order"]
    where = '"my ""col""" = \'a\' AND "select" >= 1 AND "naïve temp" > 0'
    got = views.totals(table, by=["order"], sum=["naïve temp"], where=where).fetchall()
    assert_same_rows(got, oracle.totals(["order"], ["naïve temp"], where=where), 1, "where")
    history = views.history(table, {"select": 1, 'my "col"': "a"}).fetchall()
    assert [(r[2], r[7]) for r in history] == [(1.5, 1), (1.5, -1), (3.0, 1)]
    assert views.history(table, (2, "a")).fetchall()[-1][2] == 6.5


def test_column_names_of_the_views_own_prefix_are_refused(scratch: ledger.Warehouse) -> None:
    """Generated views name their own columns ``__ledger...``; a user column may not."""
    with pytest.raises(ledger.SchemaError, match="__ledger"):
        scratch.create_table("t", {"k": "BIGINT", "__ledger_order": "BIGINT"}, primary_key="k")
    assert "t" not in scratch.tables()


@pytest.mark.parametrize("name", ["c", "s0", "n0"])
def test_column_names_that_look_like_the_views_own_names(
    scratch: ledger.Warehouse, name: str
) -> None:
    """Whatever a user column is called, totals group by it and sum other columns correctly."""
    table = scratch.create_table(
        "t", {"k": "BIGINT", name: "BIGINT", "m": "BIGINT"}, primary_key="k"
    )
    oracle = InPlaceTable(table.arrow_schema, ["k"])
    rows = [{"k": 1, name: 0, "m": 5}, {"k": 2, name: 3, "m": 7}, {"k": 3, name: 3, "m": None}]
    table.insert(rows)
    oracle.insert(rows)
    table.update([{"k": 1, "m": 6}])
    oracle.replace([{"k": 1, "m": 6}])
    assert _visible(table) == oracle.visible()
    for by, measured in (([name], ["m"]), (["m"], [name]), ([], [name, "m"])):
        got = views.totals(table, by=by, sum=measured, avg=measured).fetchall()
        want = oracle.totals(by, measured, measured)
        assert_same_rows(got, want, len(by), f"by {by}, sum/avg {measured}")


# --- 5. time travel -------------------------------------------------------------------------------


def test_time_travel_by_version_and_timestamp(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table("t", SCHEMA, primary_key="k", checkpoint_interval=2)
    oracle = InPlaceTable(table.arrow_schema, ["k"])
    states = [(table.version, table.snapshot().timestamp_ms, oracle.copy())]
    writes = [
        ("insert", [{"k": 1, "n": 1, "s": "x"}, {"k": 2, "n": 2, "x": 0.5}]),
        ("replace", [{"k": 1, "n": 10}]),
        ("delete", [(2,)]),
        ("insert", [{"k": 3, "d": Decimal("1.10")}, {"k": 1, "n": 11}]),
        ("merge", None),
        ("replace", [{"k": 3, "d": Decimal("2.20")}]),
    ]
    for kind, argument in writes:
        if kind == "insert":
            table.insert(argument)
            oracle.insert(argument)
        elif kind == "replace":
            table.upsert(argument)
            oracle.replace(argument)
        elif kind == "delete":
            table.delete([k for (k,) in argument])
            oracle.delete(argument)
        else:
            table.merge(min_files=1)
        states.append((table.version, table.snapshot().timestamp_ms, oracle.copy()))
    for i, (version, stamp, state) in enumerate(states):
        assert _visible(table, version=version) == state.visible(), f"version {version}"
        # A datetime, or epoch milliseconds.
        moment = dt.datetime.fromtimestamp(stamp / 1000, tz=dt.UTC) if i % 2 else stamp
        assert _visible(table, timestamp=moment) == state.visible(), f"at {moment}"
        got = views.totals(table, by="s", sum="n", version=version).fetchall()
        assert_same_rows(got, state.totals(["s"], ["n"]), 1, f"totals at {version}")
    assert _visible(table.snapshot(states[2][0])) == states[2][2].visible()
    with pytest.raises(ledger.SnapshotNotFoundError):
        views.visible(table, timestamp=states[0][1] - 60_000)
    with pytest.raises(ledger.SnapshotNotFoundError, match=f"no version {table.version + 5}"):
        views.visible(table, version=table.version + 5)
    with pytest.raises(ledger.InvalidArgumentError):
        views.visible(table, version=1, timestamp=states[1][1])
    with pytest.raises(ledger.InvalidArgumentError):
        views.visible(table.snapshot(1), version=1)


# --- 6. history and the change feed ---------------------------------------------------------------


def test_history_lists_every_entry_of_the_keys_oldest_first(warehouse: ledger.Warehouse) -> None:
    table = warehouse.create_table("t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k")
    v1 = table.insert([{"k": 1, "a": 1}, {"k": 2, "a": 2}]).version
    v2 = table.update([{"k": 1, "a": 3}]).version
    v3 = table.delete([2]).version
    v4 = table.insert([{"k": 1, "a": 4}]).version  # a blind second row of key 1

    rows = views.history(table, 1).fetchall()
    columns = views.history(table, 1).columns
    assert columns[:5] == ["k", "a", "trx_id", "trx_seq", "dml_type"]
    assert "_commit_version" in columns and "_commit_timestamp" in columns
    shown = [(r[0], r[1], r[4], r[columns.index("_commit_version")]) for r in rows]
    assert shown == [(1, 1, 1, v1), (1, 1, -1, v2), (1, 3, 1, v2), (1, 4, 1, v4)]
    stamps = [r[columns.index("_commit_timestamp")] for r in rows]
    assert stamps == sorted(stamps) and all(s.tzinfo is not None for s in stamps)

    assert views.history(table, (1,)).fetchall() == rows
    assert views.history(table, {"k": 1}).fetchall() == rows
    both = views.history(table, [2, 1]).fetchall()
    assert [(r[0], r[4]) for r in both] == [(1, 1), (1, -1), (1, 1), (1, 1), (2, 1), (2, -1)]
    assert [r[columns.index("_commit_version")] for r in both if r[0] == 2] == [v1, v3]
    assert views.history(table, 99).fetchall() == []
    # At an older version, later entries are not there yet.
    assert len(views.history(table, 1, version=v2).fetchall()) == 3


def test_history_on_a_table_without_a_primary_key(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table("t", {"a": "BIGINT"}, primary_key=None)
    table.insert([{"a": 1}, {"a": 2}])
    row_ids = sorted(r[1] for r in views.visible(table, system_columns=True).fetchall())
    table.update([{ROW_ID: row_ids[0], "a": 10}])
    rows = views.history(table, row_ids[0]).fetchall()
    assert [(r[0], r[1], r[4]) for r in rows] == [
        (1, row_ids[0], 1),
        (1, row_ids[0], -1),
        (10, row_ids[0], 1),
    ]


def _feed(table: ledger.Table, since: int, until: int | None = None) -> list[tuple[Any, ...]]:
    rel = views.changes(table, since, until)
    return rel.project('"k", "a", "_change_type", "_commit_version"').fetchall()


def test_change_feed_types_insert_update_delete(warehouse: ledger.Warehouse) -> None:
    table = warehouse.create_table("t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k")
    start = table.version
    v1 = table.insert([{"k": 1, "a": 1}, {"k": 2, "a": 2}]).version
    v2 = table.upsert([{"k": 1, "a": 10}, {"k": 3, "a": 3}]).version
    v3 = table.delete([2]).version
    v4 = table.delete_where("a > 5").version
    feed = _feed(table, start)
    assert sorted(feed, key=repr) == sorted(
        [
            (1, 1, "insert", v1),
            (2, 2, "insert", v1),
            (1, 1, "update_preimage", v2),
            (1, 10, "update_postimage", v2),
            (3, 3, "insert", v2),
            (2, 2, "delete", v3),
            (1, 10, "delete", v4),
        ],
        key=repr,
    )
    assert [r[3] for r in feed] == sorted(r[3] for r in feed), "not in commit order"
    assert _feed(table, v1, v2) == [r for r in feed if r[3] == v2]
    assert _feed(table, v4) == []
    columns = views.changes(table, start).columns
    assert columns[-5:] == [
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
        "trx_id",
        "trx_seq",
    ]

    # Merges and vacuum change nothing, so they add nothing to the feed.
    table.merge(min_files=1)
    assert _feed(table, v4) == []
    assert _feed(table, start) == feed


def test_change_feed_shows_a_dropped_partition_as_deletes(scratch: ledger.Warehouse) -> None:
    """Dropping a partition removes its visible rows: the feed shows each as a delete, even
    when the partition's files still hold an update's mark and insertions (no merge yet)."""
    table = scratch.create_table(
        "t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k", partition_by="k"
    )
    table.insert([{"k": 1, "a": 1}, {"k": 2, "a": 2}])
    table.update([{"k": 1, "a": 10}])
    before = table.version
    totals_before = views.totals(table, sum="a").fetchall()[0]
    dropped = table.drop_partitions({"k": 1}).version
    feed = _feed(table, before)
    # Signed by change type, the feed is exactly the difference of the totals.
    signs = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}
    totals_after = views.totals(table, sum="a").fetchall()[0]
    assert sum(signs[r[2]] for r in feed) == totals_after[0] - totals_before[0]
    assert sum(signs[r[2]] * r[1] for r in feed) == totals_after[1] - totals_before[1]
    assert {r[3] for r in feed} == {dropped}
    assert all(r[2] == "delete" for r in feed), f"a dropped partition shows {feed}"


def test_change_feed_refuses_bad_versions(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table("t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1, "a": 1}])
    table.insert([{"k": 2, "a": 2}])
    latest = table.version
    for since, until in [(-1, None), (True, None), ("1", None), (1.0, None), (2, 1), (0, "2")]:
        with pytest.raises(ledger.InvalidArgumentError):
            views.changes(table, since, until)
    with pytest.raises(ledger.InvalidArgumentError, match=r"since_version .* is past the latest"):
        views.changes(table, latest + 1)
    with pytest.raises(ledger.SnapshotNotFoundError):
        views.changes(table, 0, latest + 1)
    with pytest.raises(ledger.InvalidArgumentError):
        views.changes(table.snapshot(), 0)


# --- 7. SQL text for other engines --------------------------------------------------------------


def _raw_connection(table: ledger.Table) -> Any:
    con = connect()
    con.register(table.name, table.scan().to_arrow_table())
    return con


def _spark_problems(text: str, columns: list[str]) -> list[str]:
    """What Spark SQL would refuse in ``text`` (as far as a parse can tell)."""
    tree = sqlglot.parse_one(text, read="spark")
    problems = []
    for node in tree.find_all(exp.If):
        if isinstance(node.parent, exp.Case):  # a WHEN branch, not a call of if()
            continue
        if node.args.get("false") is None:  # Spark's if() takes exactly three arguments
            problems.append(f"two-argument IF: {node.sql(dialect='spark')}")
    if "QUALIFY" in text.upper():
        problems.append("QUALIFY")
    for identifier in tree.find_all(exp.Identifier):
        if identifier.quoted and f"`{identifier.name.replace('`', '``')}`" not in text:
            problems.append(f"identifier {identifier.name!r} not backtick-quoted")
    for literal in tree.find_all(exp.Literal):  # "name" is a string in Spark, not a column
        if literal.is_string and literal.this in columns:
            problems.append(f"column {literal.this!r} quoted as a string")
    return problems


@pytest.mark.parametrize("case", ["collapsing", "replacing", "aggregating", "dedup", "no-key"])
def test_sql_text_gives_the_views_answers(scratch: ledger.Warehouse, case: str) -> None:
    policy = "collapsing" if case == "no-key" else POLICIES[case]
    table = scratch.create_table(
        "t", POLICY_SCHEMA, primary_key=None if case == "no-key" else "k", policy=policy
    )
    table.insert([{"k": k, "v": Decimal(k), "n": 1} for k in range(4)])
    table.insert([{"k": 1, "v": Decimal("5.50"), "n": 2}])
    table.delete(_keys_with_rows(table)[-1:])
    table.update([{"k" if table.primary_key else ROW_ID: _keys_with_rows(table)[0], "v": None}])
    con = _raw_connection(table)
    expected = {
        "visible": _visible(table),
        "totals": sorted(views.totals(table, by="n", sum="v", avg="v").fetchall(), key=repr),
    }
    for kind in ("visible", "totals"):
        options = {"by": "n", "sum": "v", "avg": "v"} if kind == "totals" else {}
        duck = views.sql(table, kind, **options)
        assert sorted(con.sql(duck).fetchall(), key=repr) == expected[kind], kind
        spark = views.sql(table, kind, dialect="spark", **options)
        assert "`v`" in spark and '"v"' not in spark
        back = sqlglot.transpile(spark, read="spark", write="duckdb")[0]
        assert sorted(con.sql(back).fetchall(), key=repr) == expected[kind], f"spark {kind}"
    # Another relation name, for an engine that calls the raw ledger something else.
    con.register("raw entries", table.scan().to_arrow_table())
    text = views.sql(table, "visible", source="raw entries")
    assert sorted(con.sql(text).fetchall(), key=repr) == expected["visible"]


@pytest.mark.parametrize("kind", ["visible", "totals", "changes"])
def test_spark_sql_text_is_valid_spark(scratch: ledger.Warehouse, kind: str) -> None:
    table = scratch.create_table("awkward", AWKWARD, primary_key="select")
    text = views.sql(
        table,
        kind,
        dialect="spark",
        **({"by": "group by", "sum": "order"} if kind == "totals" else {}),
    )
    assert "`group by`" in text and ("`naïve temp`" in text or kind == "totals")
    assert _spark_problems(text, list(AWKWARD)) == []


def test_changes_sql_text_over_entries_with_commit_columns(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table("t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1, "a": 1}, {"k": 2, "a": 2}])
    table.upsert([{"k": 1, "a": 10}])
    table.delete([2])
    commits = pa.table(
        {
            "trx_id": [r.trx_id for r in table.history() if r.trx_id is not None],
            "_commit_version": [r.version for r in table.history() if r.trx_id is not None],
            "_commit_timestamp": [r.timestamp for r in table.history() if r.trx_id is not None],
        }
    )
    con = connect()
    con.register("raw", table.scan().to_arrow_table())
    con.register("commits", commits)
    con.execute("CREATE VIEW t AS SELECT * FROM raw JOIN commits USING (trx_id)")
    got = con.sql(views.sql(table, "changes")).project('"k", "a", "_change_type"').fetchall()
    assert got == views.changes(table, 0).project('"k", "a", "_change_type"').fetchall()


def test_sql_refuses_unknown_dialects_and_kinds(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table("t", {"k": "BIGINT"}, primary_key="k")
    with pytest.raises(ledger.InvalidArgumentError, match="dialect"):
        views.sql(table, "visible", dialect="oracle")
    with pytest.raises(ledger.InvalidArgumentError, match="kind"):
        views.sql(table, "rows")
    with pytest.raises(ledger.UnknownColumnError):
        views.sql(table, "totals", dialect="spark", by="nope")


# --- 8. the catalog -----------------------------------------------------------------------------


def test_connect_registers_visible_rows_and_raw_ledgers(warehouse: ledger.Warehouse) -> None:
    accounts = warehouse.create_table(
        "accounts", {"id": "BIGINT", "region": "VARCHAR", "amount": "DECIMAL(18,2)"}, "id"
    )
    accounts.insert([{"id": i, "region": "eu" if i % 2 else "us", "amount": i} for i in range(5)])
    accounts.update([{"id": 1, "amount": Decimal("100.00")}])
    accounts.delete([4])
    events = warehouse.create_table("event-log", {"id": "BIGINT", "kind": "VARCHAR"}, None)
    events.insert([{"id": 1, "kind": "open"}, {"id": 3, "kind": "close"}])

    con = views.connect(warehouse)
    assert con.sql("SELECT * FROM accounts ORDER BY id").fetchall() == sorted(
        _visible(accounts), key=lambda r: r[0]
    )
    assert con.sql("SELECT count(*), sum(dml_type) FROM accounts_ledger").fetchall() == [(8, 4)]
    by_region = con.sql(
        "SELECT region, sum(amount) FROM accounts GROUP BY region ORDER BY region"
    ).fetchall()
    assert by_region == [("eu", Decimal("103.00")), ("us", Decimal("2.00"))]
    joined = con.sql(
        'SELECT a.id, e.kind FROM accounts a JOIN "event-log" e USING (id) ORDER BY a.id'
    ).fetchall()
    assert joined == [(1, "open"), (3, "close")]
    raw = con.sql('SELECT * FROM "event-log_ledger"')
    assert {"trx_id", "trx_seq", "dml_type", ROW_ID} <= set(raw.columns)
    # The views are at the version current when registered.
    accounts.insert([{"id": 9, "region": "eu", "amount": 1}])
    assert con.sql("SELECT count(*) FROM accounts").fetchall() == [(4,)]
    views.register(con, warehouse)
    assert con.sql("SELECT count(*) FROM accounts").fetchall() == [(5,)]


def test_connect_does_not_let_one_tables_view_hide_another(
    scratch: ledger.Warehouse, caplog: pytest.LogCaptureFixture
) -> None:
    """``t_ledger`` is t's raw ledger, unless a table is itself called ``t_ledger``; DuckDB names
    ignore case. docs/views.md 6: the first table in name order gets the names, a later one that
    would clash is left out with a logged warning naming it."""
    warehouse = scratch
    for number, name in enumerate(("x", "x_ledger", "Sales", "sales")):
        warehouse.create_table(name, {"k": "BIGINT"}, primary_key="k").insert([{"k": number}])
    con = connect()
    with caplog.at_level("WARNING", logger="views.catalog"):
        made = views.register(con, warehouse)
    assert made == ["Sales", "Sales_ledger", "x", "x_ledger"]
    skipped = sorted(r.args[0] for r in caplog.records if "is not registered" in r.getMessage())
    assert skipped == ["sales", "x_ledger"]
    assert con.sql("SELECT k FROM sales").fetchall() == [(2,)]  # the view of table 'Sales'
    assert con.sql("SELECT k FROM x_ledger").fetchall() == [(0,)]  # x's raw ledger


# --- 9. bad requests: typed errors before anything runs -----------------------------------------


@pytest.fixture
def table(scratch: ledger.Warehouse) -> ledger.Table:
    t = scratch.create_table("t", SCHEMA, primary_key="k")
    t.insert([{"k": 1, "x": 1.0, "s": "a", "n": 1}])
    return t


# (request, error, whether the error can be found from the text alone, as views.sql must)
BAD_TOTALS: list[tuple[dict[str, Any], type[Exception], bool]] = [
    ({"by": ["nope"]}, ledger.UnknownColumnError, True),
    ({"sum": ["nope"]}, ledger.UnknownColumnError, True),
    ({"avg": "nope"}, ledger.UnknownColumnError, True),
    ({"by": ["trx_id"]}, ledger.UnknownColumnError, True),
    ({"where": "nope > 1"}, ledger.UnknownColumnError, True),
    ({"where": "dml_type = 1"}, ledger.UnknownColumnError, True),
    ({"sum": ["s"]}, ledger.InvalidArgumentError, True),
    ({"avg": ["s"]}, ledger.InvalidArgumentError, True),
    ({"by": [1]}, ledger.InvalidArgumentError, True),
    ({"count": False}, ledger.InvalidArgumentError, True),
    ({"count": "yes"}, ledger.InvalidArgumentError, True),
    ({"where": "n > "}, ledger.InvalidPredicateError, True),
    ({"where": ""}, ledger.InvalidPredicateError, True),
    ({"where": "n > 1; DROP TABLE t"}, ledger.InvalidPredicateError, True),
    ({"where": "n IN (SELECT 1)"}, ledger.InvalidPredicateError, True),
    ({"where": "EXISTS (SELECT 1)"}, ledger.InvalidPredicateError, True),
    # Expressions that parse but are no row filter over the table's columns.
    ({"where": "sum(n) > 0"}, ledger.InvalidPredicateError, True),
    ({"where": "row_number() OVER () = 1"}, ledger.InvalidPredicateError, True),
    ({"where": "other.n > 1"}, ledger.InvalidPredicateError, True),
    ({"where": "n"}, ledger.InvalidPredicateError, False),
    ({"where": "n + 1"}, ledger.InvalidPredicateError, False),
    ({"where": "no_such_function(n) = 1"}, ledger.InvalidPredicateError, False),
    ({"where": "s > 1"}, ledger.InvalidPredicateError, False),
]


def test_a_good_totals_request_on_the_bad_request_fixture(table: ledger.Table) -> None:
    assert views.totals(table, by=["n"], sum=["n"], avg=["n"], where="n > 0").fetchall() == [
        (1, 1, 1, 1.0)
    ]


@pytest.mark.parametrize(
    ("request_", "error", "static"), BAD_TOTALS, ids=[repr(r) for r, _, _ in BAD_TOTALS]
)
def test_bad_totals_requests_raise_typed_errors_before_reading(
    table: ledger.Table, request_: dict[str, Any], error: type[Exception], static: bool
) -> None:
    with pytest.raises(error):
        views.totals(table, **request_)
    no_reads = mock.patch.object(
        total_reads, "file_sources", side_effect=AssertionError("read files")
    )
    with no_reads, pytest.raises(error):
        views.totals(table, **request_)
    if static:
        with pytest.raises(error):
            views.sql(table, "totals", dialect="spark", **request_)


BAD_KEYS = [
    ([], ledger.InvalidArgumentError),
    ((1, 2), ledger.MissingKeyError),
    ({"nope": 1}, ledger.UnknownColumnError),
    ({"k": 1, "x": 1.0}, ledger.UnknownColumnError),
    ({}, ledger.MissingKeyError),
    ("one", ledger.InvalidArgumentError),
    (None, ledger.LedgerError),
    ({"k": None}, ledger.LedgerError),
    ([1, None], ledger.LedgerError),
]


@pytest.mark.parametrize(("key", "error"), BAD_KEYS, ids=[repr(k) for k, _ in BAD_KEYS])
def test_history_refuses_keys_of_the_wrong_shape(
    table: ledger.Table, key: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        views.history(table, key)


def test_history_of_a_two_column_key_needs_tuples_or_dicts(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table(
        "t", {"a": "BIGINT", "b": "VARCHAR", "v": "BIGINT"}, primary_key=["a", "b"]
    )
    table.insert([{"a": 1, "b": "x", "v": 1}])
    assert len(views.history(table, (1, "x")).fetchall()) == 1
    assert len(views.history(table, [(1, "x"), {"a": 1, "b": "y"}]).fetchall()) == 1
    with pytest.raises(ledger.InvalidArgumentError):
        views.history(table, 1)
    with pytest.raises(ledger.MissingKeyError):
        views.history(table, {"a": 1})
    with pytest.raises(ledger.MissingKeyError):
        views.history(table, (1,))


def test_views_refuse_what_is_not_a_table(table: ledger.Table) -> None:
    for call in (views.visible, views.totals):
        with pytest.raises(ledger.InvalidArgumentError):
            call("t")
    with pytest.raises(ledger.InvalidArgumentError):
        views.history(object(), 1)
    with pytest.raises(ledger.InvalidArgumentError, match="'nope' is not a partition field"):
        views.visible(table, partitions={"nope": 1})


# --- totals at the edges of the column types ------------------------------------------------------


def test_totals_of_a_corrected_row_holding_a_types_smallest_value(
    scratch: ledger.Warehouse,
) -> None:
    """A delete mark weights its values by -1: the smallest value of a signed integer type has no
    positive counterpart in that type, yet the totals of a table that held it are ordinary."""
    table = scratch.create_table(
        "t", {"k": "BIGINT", "big": "BIGINT", "i": "INTEGER", "tiny": "TINYINT"}, primary_key="k"
    )
    table.insert([{"k": 1, "big": -(2**63), "i": -(2**31), "tiny": -128}])
    table.update([{"k": 1, "big": 5, "i": 5, "tiny": 5}])
    assert _visible(table) == [(1, 5, 5, 5)]
    for column in ("big", "i", "tiny"):
        assert views.totals(table, sum=column, avg=column).fetchall() == [(1, 5, 5.0)], column


# --- 10. the S3 backend ---------------------------------------------------------------------------


def test_visible_and_totals_on_each_backend(warehouse: ledger.Warehouse) -> None:
    table = warehouse.create_table("t", SCHEMA, primary_key="k", partition_by="bucket(2, k)")
    oracle = InPlaceTable(table.arrow_schema, ["k"])
    batches = [
        [{"k": k, "x": k / 4, "d": Decimal(k), "s": "xy"[k % 2], "n": k} for k in range(6)],
        [{"k": 2, "x": None, "d": Decimal("-1.25"), "s": "y", "n": None}],
    ]
    for rows in batches:
        table.insert(rows)
        oracle.insert(rows)
    for rows in ([{"k": 0, "n": 100}], [{"k": 9, "s": "z"}]):  # each keeps its other columns
        table.upsert(rows)
        oracle.replace(rows)
    table.delete([3])
    oracle.delete([(3,)])
    for step in ("writes", "merge", "append"):
        if step == "merge":
            table.merge(min_files=1)
        elif step == "append":
            table.insert(batches[1])
            oracle.insert(batches[1])
        assert _visible(table) == oracle.visible(), step
        for by, where in (([], None), (["s"], "n > 0 OR s = 'y'"), (["n"], None)):
            args = {"by": by, "sum": ["x", "d", "n"], "avg": ["x", "d"], "count": True}
            _check_totals(table, oracle, {**args, "where": where})
        bucket = _bucket(2)
        rows = sorted((r for r in oracle.visible() if _bucket(r[0]) == bucket), key=repr)
        assert _visible(table, partitions={"k_bucket": bucket}) == rows


def test_a_where_predicate_is_duckdb_sql_in_every_dialect(scratch: ledger.Warehouse) -> None:
    """A quoted name in ``where`` is a column for Spark too, not a text constant."""
    table = scratch.create_table("t", {"k": "BIGINT", "my col": "VARCHAR"}, primary_key="k")
    table.insert([{"k": 1, "my col": "x"}, {"k": 2, "my col": "y"}])
    text = views.sql(table, "totals", dialect="spark", where="\"my col\" = 'x'")
    assert "`my col` = 'x'" in text
    assert "'my col' = 'x'" not in text
    assert views.totals(table, where="\"my col\" = 'x'").fetchall() == [(1,)]


def test_history_of_a_snapshot_names_its_commits(scratch: ledger.Warehouse) -> None:
    """Views take a Snapshot instead of a table (docs/views.md 5), with the same answers."""
    table = scratch.create_table("t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1, "a": 1}])
    table.update([{"k": 1, "a": 2}])
    old = table.version
    table.update([{"k": 1, "a": 3}])
    got = views.history(table.snapshot(), 1).fetchall()
    assert got == views.history(table, 1).fetchall()
    assert all(r[-2] is not None for r in got), got  # _commit_version
    at_old = views.history(table.snapshot(old), 1).fetchall()
    assert at_old == views.history(table, 1, version=old).fetchall()
    assert len(at_old) == 3 and all(r[-2] is not None for r in at_old)


def test_history_takes_a_time_key_as_docs_views_md_shows_it(scratch: ledger.Warehouse) -> None:
    """docs/views.md: ``views.history(table, (17, "2026-11-02 10:00:00"))``."""
    table = scratch.create_table(
        "probes",
        {"device_id": "BIGINT", "probe_dtime": "TIMESTAMP", "day": "DATE", "temp": "DOUBLE"},
        primary_key=["device_id", "probe_dtime", "day"],
    )
    when, day = dt.datetime(2026, 11, 2, 10), dt.date(2026, 11, 2)
    table.insert([{"device_id": 17, "probe_dtime": when, "day": day, "temp": 1.0}])
    by_value = views.history(table, (17, when, day)).fetchall()
    assert len(by_value) == 1
    assert views.history(table, (17, "2026-11-02 10:00:00", "2026-11-02")).fetchall() == by_value
    assert views.history(table, (17, "2026-11-02T10:00:00", day)).fetchall() == by_value
    with pytest.raises(ledger.InvalidArgumentError):
        views.history(table, (17, "yesterday", day))


NON_FINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


@pytest.mark.parametrize("column_type", ["DOUBLE", "FLOAT"])
@pytest.mark.parametrize("bad", list(NON_FINITE))
def test_totals_of_a_corrected_non_finite_value(
    scratch: ledger.Warehouse, bad: str, column_type: str
) -> None:
    """A sensor's NaN (or infinity) corrected later: the visible rows hold no such value, so SUM
    and AVG over them are ordinary numbers, before a merge as after it (invariant 5)."""
    table = scratch.create_table("t", {"k": "BIGINT", "x": column_type}, primary_key="k")
    # Two finite values beside it: the file's statistics then hold a range without the NaN.
    table.insert([{"k": 1, "x": NON_FINITE[bad]}, {"k": 2, "x": 1.0}, {"k": 3, "x": 5.0}])
    table.update([{"k": 1, "x": 2.0}])
    assert _visible(table) == [(1, 2.0), (2, 1.0), (3, 5.0)]
    before = views.totals(table, sum="x", avg="x").fetchall()
    table.merge(min_files=1)
    after = views.totals(table, sum="x", avg="x").fetchall()
    assert after == [(3, 8.0, 8.0 / 3)]
    assert before == after, "a merge changed the totals"


@pytest.mark.parametrize(
    ("visible", "want"),
    [
        (["nan", 1.0], "nan"),
        (["inf", 1.0], float("inf")),
        (["-inf", 1.0], float("-inf")),
        (["inf", "-inf"], "nan"),
        (["inf", "inf", "nan"], "nan"),
    ],
)
@pytest.mark.parametrize("cancelled_nan", [True, False], ids=["nan-mark", "no-marks"])
def test_totals_of_visible_non_finite_values_are_those_of_sql(
    scratch: ledger.Warehouse, visible: list[Any], want: Any, cancelled_nan: bool
) -> None:
    """Visible NaN and infinities give the SUM and AVG plain SQL gives over the visible rows,
    whether a mark holds a NaN (the exact form with counted NaN and infinities) or no mark
    does (the plain weighted sum, already exact then)."""
    table = scratch.create_table(
        "t", {"k": "BIGINT", "g": "BIGINT", "x": "DOUBLE"}, primary_key="k"
    )
    values = [NON_FINITE.get(v, v) if isinstance(v, str) else v for v in visible]
    table.insert([{"k": k, "g": 1, "x": v} for k, v in enumerate(values)])
    table.insert([{"k": 100, "g": 3, "x": float("nan")}, {"k": 101, "g": 2, "x": 5.0}])
    table.update([{"k": 100, "g": 1}] if cancelled_nan else [{"k": 101, "x": 6.0}])
    table.delete([100 if cancelled_nan else 101])  # a NaN, or a number, that no longer counts
    [(count, total, mean)] = (
        views.totals(table, by="g", sum="x", avg="x", where="g = 1")
        .project("count, sum_x, avg_x")
        .fetchall()
    )
    assert count == len(values)
    for got in (total, mean):
        if want == "nan":
            assert math.isnan(got)
        else:
            assert got == want


def _apply_feed(
    rows: dict[Any, tuple[Any, ...]], feed: list[tuple[Any, ...]]
) -> dict[Any, tuple[Any, ...]]:
    """What a change-feed consumer (Delta Lake's reading) makes of ``feed``, rows of (key,
    values..., change type) in feed order: inserts and postimages are the key's new row, deletes
    remove it, preimages only say what was there."""
    state = dict(rows)
    for *values, change in feed:
        if change in ("insert", "update_postimage"):
            state[values[0]] = tuple(values)
        elif change == "delete":
            state.pop(values[0], None)
    return state


def test_change_feed_of_one_transaction_shows_its_net_effect(scratch: ledger.Warehouse) -> None:
    """One commit's changes, read by a consumer, leave exactly the rows the commit left: a key
    inserted and deleted in one transaction was never there; one updated then deleted is gone;
    one updated twice shows its first and last rows."""
    table = scratch.create_table("t", {"k": "BIGINT", "a": "BIGINT"}, primary_key="k")
    table.insert([{"k": 1, "a": 1}, {"k": 2, "a": 2}, {"k": 3, "a": 3}])
    since = table.version
    with table.transaction() as tx:
        tx.insert([{"k": 5, "a": 1}])
        tx.delete([5])
        tx.update([{"k": 1, "a": 10}])
        tx.delete([1])
        tx.update([{"k": 2, "a": 20}])
        tx.update([{"k": 2, "a": 21}])
        tx.insert([{"k": 6, "a": 6}, {"k": 6, "a": 6}])  # the same row twice: both stay
    assert _visible(table) == [(2, 21), (3, 3), (6, 6)]
    feed = views.changes(table, since).project('"k", "a", "_change_type"').fetchall()
    assert sorted(feed) == [
        (1, 1, "delete"),
        (2, 2, "update_preimage"),
        (2, 21, "update_postimage"),
        (6, 6, "insert"),
        (6, 6, "insert"),
    ]
    before = {row[0]: row for row in _visible(table, version=since)}
    assert _apply_feed(before, feed) == {2: (2, 21), 3: (3, 3), 6: (6, 6)}, feed
    # Signed sums over the feed are still the totals' difference.
    signs = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}
    assert sum(signs[t] * a for _, a, t in feed) == 21 + 6 + 6 - 1 - 2


def test_change_feed_of_a_table_without_a_key(scratch: ledger.Warehouse) -> None:
    table = scratch.create_table("t", {"a": "BIGINT"}, primary_key=None)
    since = table.version
    table.insert([{"a": 1}, {"a": 2}])
    ids = sorted(r[1] for r in views.visible(table, system_columns=True).fetchall())
    table.update([{ROW_ID: ids[0], "a": 10}])
    table.delete([ids[1]])
    feed = views.changes(table, since).project(f'"a", "{ROW_ID}", "_change_type"').fetchall()
    assert feed == [
        (1, ids[0], "insert"),
        (2, ids[1], "insert"),
        (1, ids[0], "update_preimage"),
        (10, ids[0], "update_postimage"),
        (2, ids[1], "delete"),
    ]


# --- 11. the views on each engine -----------------------------------------------------------------
#
# The `engine` fixture (tests/support/engines.py): DuckDB through ``views.*``, Spark through
# ``ledger.spark.*``. The engine's answer is compared with literal rows, or with the embedded
# views on the same snapshot (which the oracles above check).


def _spark_only(engine: Engine, **options: Any) -> dict[str, Any]:
    """Options only Spark's reads take (``reader``), left out on DuckDB."""
    return options if engine.name == "spark" else {}


@pytest.mark.engines
@pytest.mark.parametrize("kind", POLICY_TABLES)
def test_each_engine_answers_the_visible_rows_and_totals_of_every_policy(
    engine: Engine, tmp_path: Any, kind: str
) -> None:
    table = policy_table(ledger.connect(str(tmp_path / "wh")), kind)
    # Merge one partition fully so that the views also read "isolated" files.
    table.merge(partitions={"k_bucket": "1"} if kind != "collapsing-no-key" else None, min_files=1)
    system = kind == "collapsing-no-key"
    shown = engine.visible(table, system_columns=system)
    assert shown.column_names == views.visible(table, system_columns=system).columns
    assert engine_rows(shown) == engine_rows(views.visible(table, system_columns=system).fetchall())
    if kind == "aggregating":
        return
    request = {"by": "g", "sum": ["n", "d"], "avg": "d", "where": "n > 1 OR d IS NULL"}
    summed = engine.totals(table, **request)
    assert summed.column_names == views.totals(table, **request).columns
    assert engine_rows(summed) == engine_rows(views.totals(table, **request).fetchall())


@pytest.mark.engines
@pytest.mark.parametrize("kind", ["collapsing", "collapsing-no-key", "replacing"])
def test_each_engine_gives_the_change_feed(engine: Engine, tmp_path: Any, kind: str) -> None:
    """The change feed for every starting version: written entries with their commit, a merge
    adding nothing, a dropped partition's rows as deletes."""
    table = policy_table(ledger.connect(str(tmp_path / "wh")), kind)
    table.merge(min_files=1)
    merged = table.version
    keyed = kind != "collapsing-no-key"
    table.drop_partitions({"k_bucket" if keyed else "v_bucket": "0"})
    table.insert(
        arrow_rows("k g v n d", (40, "z", 40, 1, Decimal("4.00")))
        if keyed
        else arrow_rows("g v n", ("z", 40, 1))
    )
    latest = table.version
    every = range(0, latest + 1)
    # Spark runs one job per starting version (seconds each): it takes the edges (the first
    # write, the merge, the drop, the last write) and DuckDB every version between.
    edges = sorted({0, 1, merged, merged + 1, latest})
    for since in every if engine.name == "duckdb" else edges:
        want = views.changes(table, since_version=since)
        got = engine.changes(table, since)
        assert got.column_names == want.columns
        assert engine_rows(got) == engine_rows(want.fetchall()), since
    middle = latest // 2
    want_rows = engine_rows(views.changes(table, 1, middle).fetchall())
    got = engine.changes(table, 1, middle, **_spark_only(engine, reader="pyarrow"))
    assert engine_rows(got) == want_rows
    with pytest.raises(ledger.InvalidArgumentError):
        engine.changes(table.snapshot(), 0)  # type: ignore[arg-type]
    with pytest.raises(ledger.InvalidArgumentError):
        engine.changes(table, latest + 1)


@pytest.mark.engines
@pytest.mark.parametrize("kind", ["collapsing", "collapsing-no-key", "replacing"])
def test_each_engine_lists_a_keys_history(engine: Engine, tmp_path: Any, kind: str) -> None:
    """A key's entries with their commits: one key, a list of keys, an older version, a
    snapshot."""
    table = policy_table(ledger.connect(str(tmp_path / "wh")), kind)
    if kind == "collapsing-no-key":
        ids = sorted({r[ROW_ID] for r in raw(table)})
        keys: list[Any] = [ids[0], [ids[0], ids[4]], (ids[1],)]
    else:
        keys = [1, [1, 2, 3], (5,), {"k": 2}]
    old = table.version - 2
    for key in keys:
        want = views.history(table, key)
        assert want.fetchall(), key
        got = engine.history(table, key)
        assert got.column_names == want.columns
        assert engine_rows(got) == engine_rows(want.fetchall()), key
        older = engine.history(table, key, version=old, **_spark_only(engine, reader="pyarrow"))
        assert engine_rows(older) == engine_rows(views.history(table, key, version=old).fetchall())
    assert engine_rows(engine.history(table.snapshot(), keys[0])) == engine_rows(
        views.history(table, keys[0]).fetchall()
    )


@pytest.mark.engines
def test_each_engine_totals_non_finite_doubles_as_sql_does(engine: Engine, tmp_path: Any) -> None:
    """A corrected NaN no longer counts; a visible infinity does (in Spark's dialect NaN and
    infinities are classified without isnan())."""
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"k": "BIGINT", "g": "VARCHAR", "x": "DOUBLE"}, primary_key="k"
    )
    table.insert(
        [
            {"k": 1, "g": "a", "x": float("nan")},
            {"k": 2, "g": "a", "x": 1.0},
            {"k": 3, "g": "a", "x": 5.0},
            {"k": 4, "g": "b", "x": float("inf")},
            {"k": 5, "g": "b", "x": 2.0},
        ]
    )
    table.update([{"k": 1, "x": 2.0}])
    got = engine.totals(table, by="g", sum="x", avg="x")
    assert engine_rows(got) == engine_rows(
        [("a", 3, 8.0, 8.0 / 3), ("b", 2, float("inf"), float("inf"))]
    )


@pytest.mark.engines
def test_each_engine_reads_a_rollup_as_its_own_table(engine: Engine, tmp_path: Any) -> None:
    """A rollup is read as its own (aggregating) table; a change feed starting past the latest
    version is refused in terms of ``since_version``."""
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
    shown = engine.visible(rollup).select(["user", "total"])
    assert engine_rows(shown) == engine_rows([("a", Decimal("0.30"))])
    since = rollup.table.version - 1
    changed = engine.changes(rollup, since)
    assert changed.num_rows > 0
    assert changed.num_rows == views.changes(rollup, since_version=since).to_arrow_table().num_rows
    with pytest.raises(ledger.InvalidArgumentError, match="since_version"):
        engine.changes(rollup, rollup.table.version + 1)
