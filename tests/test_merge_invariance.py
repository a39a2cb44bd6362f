"""Merges never change an answer (issue 3; invariant 5 of the design).

For every built-in policy, hypothesis builds a random ledger by random writes (several commits, so
several files; partitioned tables spread them further), then runs a random sequence of merges of
random subsets of the alive files in a random order (``files=`` with any subset or with the
newest files, or the planner: every partition with two files or more, or every partition). Writes
include blind re-inserts of earlier batches and of values a mark cancelled (an undone update), so
that groups of equal values meet their marks in every order. After every merge:

- everything the policy's views answer, as ``tests.support.ledger_reads.policy_answer`` computes
  it (visible rows; sign-weighted SUM/COUNT/AVG, over the visible rows for replacing tables and
  after dropping repeats for dedup tables; rollups for aggregating tables), equals the answer
  before the first merge;
- the raw entry count has not grown (no built-in policy adds entries);
- the markers' ``dml_sum`` still adds up to the data's signs, and ``count()`` (read from those
  sums only where they stay exact) equals the row count of the answer: its totals' count, or
  its rollup's groups. Comparing ``count()`` with the data's signs alone let a replacing merge
  that keeps a key's latest mark without the entries it balances (count -1, no visible row)
  through.

And time travel to the version before the first merge still gives the answer from before it.

**Well-formed ledgers.** Hand-written delete marks (``append_entries`` with ``dml_type`` -1)
cancel *every* live entry of their key, as ``update``/``delete`` do: when a key holds several live
copies of identical values (blind duplicate inserts, which are generated), the copy a single mark
cancels is ambiguous, and a merge may then switch the visible row between two values of the key
(sums stay exact regardless; docs/merges.md section 2.1). On replacing tables a key's only live
entry is its latest entry, so a hand-written mark cancels that. Aggregating tables are fed by
inserts, deletes and corrections that retract exactly a row inserted earlier; count measures are
positive. Money columns are BIGINT and DECIMAL (exact sums); the DOUBLE columns' totals are
compared with a relative tolerance, since a merge changes the order of their summation. Value
columns hold NULLs.

**Odd names, versions, refused writes.** Value columns have odd but legal names (mixed case,
unicode, spaces, quotes, dots, a system column's name with a suffix). Replacing tables' version
column is INTEGER, DATE or DECIMAL; an upsert or update whose version ranks below its key's
latest entry (docs/merges.md 2.2, computed from the raw entries) must raise StaleVersionError
and write nothing. Hand-written batches holding a delete mark that cancels nothing (other values,
no live entry, one entry marked twice) must raise UnmatchedDeleteMarkError and write nothing.
"""

from __future__ import annotations

import datetime
import math
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.engines.duckdb.session import connect
from ledger.errors import StaleVersionError, UnmatchedDeleteMarkError
from ledger.log.entries import sum_markers
from ledger.maintenance import merge as merging
from ledger.schema import ROW_ID
from ledger.sql.live import expand_sql, live_entries_sql
from tests.conftest import examples
from tests.support.engines import Engine
from tests.support.ledger_reads import policy_answer, raw_entries, sign_sums
from tests.support.maintenance import clock_ahead
from tests.support.policy_tables import POLICY_TABLES, policy_table
from tests.support.scratch import scratch_dir

# Value columns under odd but legal names: each a trap for naive quoting or comparison.
A, D, X, S, V = "Amount", "prix €", "Größe", 'say "hi".x', "trx_id_x"
SCHEMA = {"k": "BIGINT", A: "BIGINT", D: "DECIMAL(12,2)", X: "DOUBLE", S: "VARCHAR"}
# V: the version column of replacing tables and the event id of dedup tables.
SCHEMA_WITH_V = {**SCHEMA, V: "BIGINT"}
VERSION_TYPES = ["BIGINT", "INTEGER", "DATE", "DECIMAL(10,2)"]

# Small domains, so that blind inserts repeat whole rows and corrections hit existing values.
KEYS = st.sampled_from([0, 1, 4, 5])  # two keys in each bucket(2, k) partition
AMOUNTS = st.none() | st.integers(min_value=-3, max_value=3)
DECIMALS = st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("1234.56")])
FLOATS = st.none() | st.sampled_from([0.1, -2.5, 1e3 / 3])
LABELS = st.none() | st.sampled_from(["x", "y", "it's"])
VERSIONS = st.none() | st.integers(min_value=0, max_value=3)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


PREDICATES = st.sampled_from(
    [
        f"{_quoted(A)} > 0",
        f"{_quoted(A)} IS NULL",
        f"{_quoted(S)} = 'x'",
        f"{_quoted(D)} < 0",
        "k % 2 = 0",
    ]
)

ROW = st.fixed_dictionaries({"k": KEYS, A: AMOUNTS, D: DECIMALS, X: FLOATS, S: LABELS})


def _version_of(sql_type: str, step: int | None) -> Any:
    """The version of rank ``step`` in a column of ``sql_type`` (None stays NULL)."""
    if step is None:
        return None
    if sql_type == "DATE":
        return datetime.date(2026, 1, 1) + datetime.timedelta(days=step)
    if sql_type.startswith("DECIMAL"):
        return Decimal(step) / 4  # compared by value in the column's scale
    return step


def _rows_with_versions(sql_type: str = "BIGINT") -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {
            "k": KEYS,
            A: AMOUNTS,
            D: DECIMALS,
            X: FLOATS,
            S: LABELS,
            V: VERSIONS.map(lambda step: _version_of(sql_type, step)),
        }
    )


ROW_WITH_V = _rows_with_versions()
PICKS = st.lists(KEYS, min_size=1, max_size=3, unique=True)

# Modest example counts in the everyday run (`make test-deep` runs hundreds); collapsing, the
# default policy with the subtlest rule, and aggregating, whose drops depend on sums, get more.
TEST_SETTINGS = settings(max_examples=examples(6), deadline=None)
MORE_EXAMPLES = settings(max_examples=examples(8), deadline=None)


def _operations(row: st.SearchStrategy[dict[str, Any]], *, keyed: bool) -> st.SearchStrategy:
    """Random writes: a first insert, then 2 to 5 more operations of any kind.

    Operations name keys (or, on a table without a primary key, indexes into its visible rows);
    what they do is resolved against the table when they run.
    """
    rows = st.lists(row, min_size=1, max_size=4)
    tx_kinds = ["insert", "upsert", "delete"] if keyed else ["insert", "delete"]
    any_operation = st.one_of(
        st.tuples(st.just("insert"), rows),
        st.tuples(st.just("repeat"), KEYS),
        st.tuples(st.just("restore"), PICKS),
        st.tuples(st.just("update"), rows),
        st.tuples(st.just("delete"), PICKS),
        st.tuples(st.just("delete_where"), PREDICATES),
        st.tuples(st.just("entries"), st.lists(KEYS, max_size=2, unique=True), st.lists(row)),
        st.tuples(
            st.just("unmatched"),
            st.sampled_from(["other_values", "no_live_entry", "twice"]),
            st.lists(row, max_size=2),
        ),
        st.tuples(
            st.just("transaction"),
            st.lists(st.tuples(st.sampled_from(tx_kinds), rows), min_size=1, max_size=3),
        ),
        *([st.tuples(st.just("upsert"), rows)] if keyed else []),
    )
    return st.tuples(
        st.tuples(st.just("insert"), rows), st.lists(any_operation, min_size=2, max_size=5)
    ).map(lambda first_and_rest: [first_and_rest[0], *first_and_rest[1]])


# --- reading the table for the writes -----------------------------------------------------------


def _key_column(table: ledger.Table) -> str:
    return table.primary_key[0] if table.primary_key else ROW_ID


def _value_columns(table: ledger.Table) -> list[str]:
    return [*table.schema, *([ROW_ID] if table.config["generated_row_id"] else [])]


def _visible_keys(table: ledger.Table) -> list[int]:
    """Keys with a visible row, as update and delete see them."""
    if table.config["policy"]["name"] == "replacing":
        return sorted(row[0] for row in policy_answer(table)["visible"])
    return sorted(key[0] for key, net in sign_sums(table).items() if net > 0)


def _live_entries(table: ledger.Table, keys: list[int]) -> list[dict[str, Any]]:
    """One row per live entry of ``keys``: what the marks cancelling every one of them carry."""
    if not keys:
        return []
    key = _key_column(table)
    if table.config["policy"]["name"] == "replacing":  # the latest entry, if an insertion
        names = _value_columns(table)
        visible = [dict(zip(names, row, strict=True)) for row in policy_answer(table)["visible"]]
        return [row for row in visible if row[key] in keys]
    con = connect()
    try:
        in_keys = f'"{key}" IN ({", ".join(str(int(k)) for k in keys)})'
        table.scan(con=con).filter(in_keys).create_view("picked")
        values = _value_columns(table)
        con.execute(f"CREATE TEMP TABLE live AS {live_entries_sql('picked', values)}")
        return con.sql(expand_sql("live", values)).to_arrow_table().to_pylist()
    finally:
        con.close()


def _last_cancelled(table: ledger.Table, picks: list[int]) -> list[dict[str, Any]]:
    """The values the newest delete mark of some keys cancelled (keys chosen by index among
    the keys that have marks)."""
    key = _key_column(table)
    con = connect()
    try:
        table.scan(con=con).filter("dml_type = -1").create_view("marks")
        newest = f'PARTITION BY "{key}" ORDER BY trx_id DESC, trx_seq DESC'
        rows = (
            con.sql(
                "SELECT * EXCLUDE (trx_id, trx_seq, dml_type) FROM marks "
                f'QUALIFY row_number() OVER ({newest}) = 1 ORDER BY "{key}"'
            )
            .to_arrow_table()
            .to_pylist()
        )
    finally:
        con.close()
    return [rows[i] for i in sorted({p % len(rows) for p in picks})] if rows else []


def _unique_keys(rows: list[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return list({row[key]: row for row in rows}.values())


def _resolve(table: ledger.Table, picks: list[int]) -> list[int]:
    """Keys on a keyed table; on a table without one, row ids of visible rows chosen by index."""
    if table.primary_key:
        return picks
    ids = _visible_keys(table)
    return sorted({ids[p % len(ids)] for p in picks}) if ids else []


def _with_row_ids(table: ledger.Table, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Update rows of a table without a primary key: each row names a visible row by index."""
    ids = _visible_keys(table)
    if not ids:
        return []
    return _unique_keys([{**row, ROW_ID: ids[row["k"] % len(ids)]} for row in rows], ROW_ID)


def _apply(
    table: ledger.Table, operation: tuple[Any, ...], written: list[list[dict[str, Any]]]
) -> None:
    """Run one operation; ``written`` collects the batches of rows inserted, for ``repeat``.
    An upsert or update giving a replacing table's row a lower version than its key's latest
    entry is refused before writing (docs/merges.md 2.2), and leaves the table as it was."""
    version = table.refresh().version
    expected_stale = _stale(table, operation)
    try:
        _apply_or_refuse(table, operation, written)
    except StaleVersionError:
        assert table.refresh().version == version, "a refused write committed"
        assert expected_stale is not False, f"{operation} was refused, though no row is stale"
        return
    assert not expected_stale, f"{operation} wrote a row below its key's latest version"


def _rank(version: Any) -> tuple[bool, Any]:
    """NULL ranks below every version."""
    return (version is not None, version if version is not None else 0)


def _latest_versions(table: ledger.Table) -> dict[Any, Any]:
    """Each key's latest entry's version (a delete mark's included), from the raw entries."""
    latest: dict[Any, tuple[tuple[bool, Any], int, int, Any]] = {}
    for entry in raw_entries(table):
        order = (_rank(entry[V]), entry["trx_id"], entry["trx_seq"], entry[V])
        if entry["k"] not in latest or order[:3] > latest[entry["k"]][:3]:
            latest[entry["k"]] = order
    return {key: order[3] for key, order in latest.items()}


def _stale(table: ledger.Table, operation: tuple[Any, ...]) -> bool | None:
    """Whether an upsert or update must be refused as stale; None when not predicted here
    (transactions: their writes see their own earlier writes)."""
    policy = table.config["policy"]
    if policy["name"] != "replacing" or not policy.get("version_column"):
        return False
    kind, argument, *_ = operation
    if kind not in ("upsert", "update"):
        return None if kind == "transaction" else False
    latest = _latest_versions(table)
    rows = _unique_keys(argument, "k")
    if kind == "update":
        rows = [r for r in rows if r["k"] in set(_visible_keys(table))]
    return any(r["k"] in latest and _rank(r[V]) < _rank(latest[r["k"]]) for r in rows)


def _apply_or_refuse(
    table: ledger.Table, operation: tuple[Any, ...], written: list[list[dict[str, Any]]]
) -> None:
    kind, argument, *rest = operation
    key = _key_column(table)
    if kind == "insert":
        table.insert(argument)
        written.append(argument)
    elif kind == "repeat":  # a batch loaded again, or a row re-inserted as it was
        if table.primary_key:
            if written:
                table.insert(written[argument % len(written)])
        else:  # the same row id and values: a blind duplicate of a visible row
            copies = _live_entries(table, _resolve(table, [argument]))[:1]
            if copies:
                table.append_entries([{**row, "dml_type": 1} for row in copies])
    elif kind == "restore":  # re-insert values a delete mark cancelled, e.g. undo an update
        restored = _last_cancelled(table, argument)
        if restored:
            table.append_entries([{**row, "dml_type": 1} for row in restored])
    elif kind == "upsert":
        table.upsert(_unique_keys(argument, key))
        written.append(_unique_keys(argument, key))
    elif kind == "update":
        if table.primary_key:
            visible = set(_visible_keys(table))
            rows = [r for r in _unique_keys(argument, key) if r[key] in visible]
        else:
            rows = _with_row_ids(table, argument)
        if rows:
            table.update(rows)
            written.append([{c: v for c, v in row.items() if c != ROW_ID} for row in rows])
    elif kind == "delete":
        table.delete(_resolve(table, argument))
    elif kind == "delete_where":
        table.delete_where(argument)
    elif kind == "entries":
        marks = [{**m, "dml_type": -1} for m in _live_entries(table, _resolve(table, argument))]
        insertions = [{**r, "dml_type": 1} for r in rest[0]]
        # Two calls: insertions get new row ids only when no row of the batch carries one.
        with table.transaction() as tx:
            for entries in (marks, insertions):
                if entries:
                    tx.append_entries(entries)
        if rest[0]:
            written.append(rest[0])
    elif kind == "unmatched":
        _refuse_unmatched_marks(table, argument, rest[0])
    elif kind == "transaction":
        with table.transaction() as tx:
            for step, rows in argument:
                if step == "insert":
                    tx.insert(rows)
                    written.append(rows)
                elif step == "upsert":
                    tx.upsert(_unique_keys(rows, key))
                    written.append(_unique_keys(rows, key))
                else:
                    tx.delete(_resolve(table, [r["k"] for r in rows]))
    else:
        raise AssertionError(f"unknown operation {kind!r}")


def _refuse_unmatched_marks(
    table: ledger.Table, how: str, insertions: list[dict[str, Any]]
) -> None:
    """A hand-written batch with one delete mark that cancels nothing is refused whole."""
    live = _live_entries(table, _resolve(table, [0, 1, 4, 5]))
    key = _key_column(table)
    if how == "other_values" and live:  # an amount never generated: no entry holds it
        bad = [{**live[0], A: 1000}]
    elif how == "twice" and live:  # one mark more than the live entries holding these values
        bad = [live[0]] * (live.count(live[0]) + 1)
    else:  # a key (or row id) that never had an entry
        bad = [{**(live[0] if live else {}), key: 10**9}]
    entries = [{**m, "dml_type": -1} for m in bad] + [{**r, "dml_type": 1} for r in insertions]
    if not table.primary_key:
        entries = [{ROW_ID: 10**9, **e} for e in entries]  # one batch: every entry names its id
    version = table.refresh().version
    with pytest.raises(UnmatchedDeleteMarkError):
        table.append_entries(entries)
    assert table.refresh().version == version, "a refused append_entries committed"


# --- merging and checking -----------------------------------------------------------------------


def _raw_counts(table: ledger.Table, version: int | None = None) -> tuple[int, int]:
    """(entries, sum of dml_type) over the data files."""
    con = connect()
    try:
        row = table.scan(version=version, con=con).aggregate("count(*), coalesce(sum(dml_type), 0)")
        entries, signs = row.fetchall()[0]
        return int(entries), int(signs)
    finally:
        con.close()


def _normalised(answer: Any) -> Any:
    """An answer with "no value" spelled one way.

    Over the raw entries, SUM is 0 when entries exist but cancel out and NULL when there are
    none, or only NULLs; a merge that drops cancelled entries turns the first into the second.
    Over the visible rows both are "no value": a total whose column has no visible value (its
    average is NULL) is NULL, and a count over no entries is 0.
    (Worth doing in ``policy_answer`` itself, and in the generated views.)
    """
    if not isinstance(answer, dict) or "totals" not in answer:
        return answer
    totals = {}
    for name, total in answer["totals"].items():
        if name == "count" or len(total) == 1:  # the row count, or a text column's count
            empty = 0 if name == "count" else (0,)
            totals[name] = empty if total in (None, (None,)) else total
        else:
            total_sum, average = total
            nothing = total_sum is None or abs(total_sum) < 1e-9  # DOUBLE sums leave residue
            totals[name] = (None, None) if average is None and nothing else total
    return {**answer, "totals": totals}


def _row_count(answer: Any) -> int:
    """The row count an answer implies: the totals' count, or the groups of a rollup."""
    if isinstance(answer, dict) and "totals" in answer:
        return int(answer["totals"]["count"])
    return len(answer)


def _same(left: Any, right: Any) -> bool:
    """Equal answers; floats (sums of DOUBLE columns) up to rounding."""
    if isinstance(left, float) and isinstance(right, float):
        return math.isclose(left, right, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[k], right[k]) for k in left)
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return (
            type(left) is type(right)
            and len(left) == len(right)
            and all(_same(a, b) for a, b in zip(left, right, strict=True))
        )
    return bool(left == right)


def _files_in_commit_order(table: ledger.Table) -> list[str]:
    """Alive files, oldest first (not by path: file names are random, examples must replay)."""
    markers = sorted(
        table.snapshot().markers(),
        key=lambda m: (m.trx_min, m.trx_max, repr(sorted(m.partition.items())), m.rows),
    )
    return [m.path for m in markers]


def _merge_something(table: ledger.Table, data: st.DataObject) -> merging.MergeResult:
    how = data.draw(st.sampled_from(["subset", "subset", "newest", "planner", "full"]), "merge")
    paths = _files_in_commit_order(table)
    if how == "subset":  # any subset, each file in or out with even odds
        chosen = data.draw(st.lists(st.booleans(), min_size=len(paths), max_size=len(paths)))
        return table.merge(files=[p for p, c in zip(paths, chosen, strict=True) if c] or paths[-1:])
    if how == "newest":  # the newest files, as a frequent small merge would
        return table.merge(files=paths[-data.draw(st.integers(1, len(paths)), "newest") :])
    if how == "planner":  # the partitions with at least two files, each fully
        return table.merge()
    return table.merge(min_files=1)  # every partition fully


def _check_merges_keep_answers(table: ledger.Table, data: st.DataObject) -> None:
    before = _normalised(policy_answer(table))
    version_before = table.refresh().version
    entries, _ = _raw_counts(table)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4), label="merges")):
        if not table.snapshot().markers():
            break
        result = _merge_something(table, data)
        after = _normalised(policy_answer(table))
        assert _same(after, before), f"{result} changed the answer:\n{before}\n->\n{after}"
        now, signs = _raw_counts(table)
        assert now <= entries, f"{result} grew the ledger from {entries} to {now} entries"
        markers = table.snapshot().markers()
        assert sum_markers(markers) == signs, "the log's dml_sum disagrees with the merged files"
        assert table.count() == _row_count(after), "count() disagrees with the totals' count"
        entries = now
    travelled = _normalised(policy_answer(table, version=version_before))
    assert _same(travelled, before), "time travel changed the answer"
    assert table.count(version=version_before) == _row_count(before), "count() by time travel"


def _build(table: ledger.Table, operations: list[tuple[Any, ...]]) -> ledger.Table:
    written: list[list[dict[str, Any]]] = []
    for operation in operations:
        _apply(table, operation, written)
    return table


@contextmanager
def _scratch_warehouse() -> Iterator[ledger.Warehouse]:
    """A fresh local warehouse for one hypothesis example, in memory where possible
    (tests/support/scratch.py): these tests check answers, not durability."""
    with scratch_dir("ledger-merges-") as directory:
        yield ledger.connect(directory)


@contextmanager
def _every_transaction_settled() -> Iterator[None]:
    """Merges take every committed transaction as settled (as if their timeout had long passed),
    so replacing merges may drop delete marks: no transaction is in flight in these tests."""
    with mock.patch.object(merging, "CLOCK_SKEW_MS", -86_400_000):
        yield


# --- the invariant, policy by policy ------------------------------------------------------------


@pytest.mark.parametrize(
    ("primary_key", "partition_by"),
    [("k", None), ("k", "bucket(2, k)"), (None, f"bucket(2, {A})")],
    ids=["keyed", "partitioned-by-key", "no-primary-key-partitioned-by-value"],
)
@MORE_EXAMPLES
@given(data=st.data())
def test_collapsing_merges_keep_every_answer(
    primary_key: str | None,
    partition_by: str | None,
    data: st.DataObject,
) -> None:
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t", SCHEMA, primary_key=primary_key, partition_by=partition_by, policy="collapsing"
        )
        operations = data.draw(_operations(ROW, keyed=primary_key is not None), label="writes")
        _check_merges_keep_answers(_build(table, operations), data)


@pytest.mark.parametrize("partition_by", [None, "bucket(2, k)", f"bucket(2, {V})"])
@TEST_SETTINGS
@given(data=st.data())
def test_replacing_merges_keep_every_answer(partition_by: str | None, data: st.DataObject) -> None:
    """Every transaction counts as settled, so full merges of a partition drop delete marks
    (unless a key's entries can span partitions: partitioned by v); partial merges keep them."""
    version_column = data.draw(st.sampled_from([None, V]), label="version_column")
    version_type = data.draw(st.sampled_from(VERSION_TYPES), label="version_type")
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t",
            {**SCHEMA, V: version_type},
            primary_key="k",
            partition_by=partition_by,
            policy={"name": "replacing", "version_column": version_column},
        )
        rows = _rows_with_versions(version_type)
        _build(table, data.draw(_operations(rows, keyed=True), label="writes"))
        with _every_transaction_settled():
            _check_merges_keep_answers(table, data)


@TEST_SETTINGS
@given(data=st.data())
def test_dedup_merges_keep_every_answer(data: st.DataObject) -> None:
    partition_by = data.draw(st.sampled_from([None, "bucket(2, k)"]), label="partition_by")
    dedup_key = data.draw(st.sampled_from([None, [V]]), label="dedup_key")
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t",
            SCHEMA_WITH_V,
            primary_key="k",
            partition_by=partition_by,
            policy={"name": "dedup", **({"dedup_key": dedup_key} if dedup_key else {})},
        )
        operations = data.draw(_operations(ROW_WITH_V, keyed=True), label="writes")
        _check_merges_keep_answers(_build(table, operations), data)


AGGREGATE_SCHEMA = {
    "k": "BIGINT",
    "n": "BIGINT",
    "total": "BIGINT",
    "amount": "DECIMAL(12,2)",
    "score": "DOUBLE",
}
AGGREGATE_ROW = st.fixed_dictionaries(
    {
        "k": st.integers(min_value=0, max_value=3),
        "n": st.sampled_from([1, 1, 2]),  # positive: every row counts
        "total": AMOUNTS,
        "amount": DECIMALS,
        "score": FLOATS,
    }
)
AGGREGATE_ROWS = st.lists(AGGREGATE_ROW, min_size=1, max_size=4)


@MORE_EXAMPLES
@given(data=st.data())
def test_aggregating_merges_keep_every_rollup(data: st.DataObject) -> None:
    partition_by = data.draw(st.sampled_from([None, "bucket(2, k)"]), label="partition_by")
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t",
            AGGREGATE_SCHEMA,
            primary_key="k",
            partition_by=partition_by,
            policy={
                "name": "aggregating",
                "measures": {"n": "count", "total": "sum", "amount": "sum", "score": "sum"},
            },
        )
        operations = data.draw(
            st.lists(
                st.one_of(
                    st.tuples(st.just("insert"), AGGREGATE_ROWS),
                    # Retract rows inserted earlier, some replaced by a corrected row of their key.
                    st.tuples(
                        st.just("correct"),
                        PICKS,
                        st.lists(st.sampled_from([True, True, False]), min_size=3, max_size=3),
                    ),
                    st.tuples(st.just("delete"), PICKS),
                ),
                min_size=2,
                max_size=6,
            ),
            label="writes",
        )
        retractable: list[dict[str, Any]] = []  # inserted rows not yet retracted or deleted
        for kind, argument, *rest in [("insert", data.draw(AGGREGATE_ROWS)), *operations]:
            if kind == "insert":
                table.insert(argument)
                retractable += argument
            elif kind == "delete":
                table.delete(argument)
                retractable = [r for r in retractable if r["k"] not in argument]
            elif retractable:
                chosen = sorted({p % len(retractable) for p in argument})
                marks = [{**retractable[i], "dml_type": -1} for i in chosen]
                replaced = [i for i, replace in zip(chosen, rest[0], strict=False) if replace]
                corrected = [
                    {**data.draw(AGGREGATE_ROW), "k": retractable[i]["k"], "n": retractable[i]["n"]}
                    for i in replaced
                ]
                table.append_entries(marks + [{**r, "dml_type": 1} for r in corrected])
                retractable = [r for i, r in enumerate(retractable) if i not in chosen] + corrected
        _check_merges_keep_answers(table, data)


@TEST_SETTINGS
@given(data=st.data())
def test_insert_only_aggregating_merges_keep_min_and_max(data: st.DataObject) -> None:
    with _scratch_warehouse() as warehouse:
        table = warehouse.create_table(
            "t",
            {"k": "BIGINT", "n": "BIGINT", "total": "BIGINT", "lo": "BIGINT", "hi": "VARCHAR"},
            primary_key="k",
            policy={
                "name": "aggregating",
                "measures": {"n": "count", "total": "sum", "lo": "min", "hi": "max"},
                "insert_only": True,
            },
        )
        row = st.fixed_dictionaries(
            {
                "k": st.integers(0, 3),
                "n": st.integers(1, 2),
                "total": AMOUNTS,
                "lo": AMOUNTS,
                "hi": LABELS,
            }
        )
        for rows in data.draw(
            st.lists(st.lists(row, min_size=1, max_size=3), min_size=2, max_size=5)
        ):
            table.insert(rows)
        _check_merges_keep_answers(table, data)


# --- collapsing: the two cases that keep the visible row exact -----------------------------------


def _collapsing_table(tmp_path: Any) -> ledger.Table:
    return ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT", "a": "BIGINT"}, "k")


def test_collapsing_keeps_a_reinsertion_newer_than_the_mark_it_meets(tmp_path: Any) -> None:
    table = _collapsing_table(tmp_path)
    table.insert([{"k": 1, "a": 1}])
    table.update([{"k": 1, "a": 2}])  # a mark of a=1, then a=2
    table.insert([{"k": 1, "a": 1}])  # a blind re-insert of a=1: the visible row again
    before = policy_answer(table)
    assert before["visible"] == [(1, 1)]
    _, update, reinsert = _files_in_commit_order(table)

    # Within the merge a=1 nets to zero, but its insertion is newer than its mark.
    table.merge(files=[update, reinsert])

    assert policy_answer(table) == before


def test_collapsing_keeps_the_newest_insertions_of_a_group(tmp_path: Any) -> None:
    table = _collapsing_table(tmp_path)
    table.insert([{"k": 1, "a": 1}])
    table.delete([1])
    table.insert([{"k": 1, "a": 1}])
    table.insert([{"k": 1, "a": 2}])
    table.insert([{"k": 1, "a": 1}])  # the latest: a=1 is visible, live twice
    before = policy_answer(table)
    assert before["visible"] == [(1, 1)]

    table.merge(min_files=1)

    assert policy_answer(table) == before


# --- time travel --------------------------------------------------------------------------------


PLAIN_SCHEMA_WITH_V = {
    "k": "BIGINT",
    "a": "BIGINT",
    "d": "DECIMAL(12,2)",
    "x": "DOUBLE",
    "s": "VARCHAR",
    "v": "BIGINT",
}
POLICIES = [
    "collapsing",
    {"name": "replacing", "version_column": "v"},
    {"name": "dedup", "dedup_key": ["v"]},
]


@pytest.mark.parametrize("policy", POLICIES, ids=["collapsing", "replacing", "dedup"])
def test_time_travel_to_before_a_merge_answers_as_before(
    tmp_path: Any, policy: str | dict[str, Any]
) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", PLAIN_SCHEMA_WITH_V, primary_key="k", policy=policy
    )
    table.insert([{"k": k, "a": k, "v": 1, "s": "x"} for k in range(4)])
    table.insert([{"k": 1, "a": 10, "v": 2}, {"k": 2, "a": 2, "v": 1, "s": "x"}])  # repeats
    table.upsert([{"k": 3, "a": 30, "v": 3}])
    table.delete([0])
    before, version, timestamp = policy_answer(table), table.version, table.snapshot().timestamp_ms
    entries_before, _ = _raw_counts(table)

    with _every_transaction_settled():
        result = table.merge(min_files=1)

    assert result.version == version + 1
    assert result.entries_out < result.entries_in, "the merge collapsed nothing"
    assert policy_answer(table) == before
    assert policy_answer(table, version=version) == before
    assert table.snapshot(timestamp=timestamp).version == version
    assert _raw_counts(table, version=version)[0] == entries_before


# --- replacing: when delete marks may go --------------------------------------------------------


def _marks(table: ledger.Table) -> list[tuple[Any, ...]]:
    return table.scan().filter("dml_type = -1").project("k").order("k").fetchall()


def _bucket(value: int) -> int:
    """The ``bucket(2, column)`` partition of an integer (docs/format.md section 8)."""
    return zlib.crc32(str(value).encode()) % 2


def _same_bucket_as(key: int, avoid: set[int]) -> int:
    """Another key in the same ``bucket(2, k)`` partition as ``key``."""
    return next(k for k in range(100) if k not in avoid and _bucket(k) == _bucket(key))


@pytest.mark.parametrize("partition_by", [None, "bucket(2, k)"])
def test_replacing_drops_marks_only_in_full_merges_past_the_timeout(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, partition_by: str | None
) -> None:
    timeout = 1.0  # longer than any single write takes here, or writes would time out
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "a": "BIGINT"},
        primary_key="k",
        partition_by=partition_by,
        policy="replacing",
        transaction_timeout=timeout,
    )
    table.insert([{"k": k, "a": k} for k in range(6)])
    table.insert([{"k": 1, "a": 11}])  # a blind repeat: replaces
    table.delete([1, 2])
    table.upsert([{"k": 3, "a": 33}])
    answer = policy_answer(table)

    # Within the clock-skew margin nothing is settled: a full merge keeps every mark.
    table.merge(min_files=1)
    assert _marks(table) == [(1,), (2,)]
    assert policy_answer(table) == answer

    # A mark in a new file, and an insertion of another key of its partition in a second one.
    deleted = 4
    other = _same_bucket_as(deleted, avoid=set(range(6)))
    earlier = {m.path for m in table.snapshot().markers()}
    table.delete([deleted])
    mark_files = [m.path for m in table.snapshot().markers() if m.path not in earlier]
    table.insert([{"k": other, "a": other}])
    answer = policy_answer(table)
    assert [row[0] for row in answer["visible"]] == sorted([0, 3, 5, other])

    monkeypatch.setattr(merging, "CLOCK_SKEW_MS", 0)
    clock_ahead(monkeypatch, merging, timeout + 0.2)  # the merges' clock, past the timeout

    # Past the timeout, a merge that leaves a file of the partition out keeps its marks:
    # an older entry of a deleted key might be in that file.
    partial = table.merge(files=mark_files)
    assert partial.version is not None
    assert _marks(table) == [(1,), (2,), (deleted,)]
    assert policy_answer(table) == answer

    entries_before, _ = _raw_counts(table)
    full = table.merge(min_files=1)
    assert full.version is not None
    assert _marks(table) == [], "marks of settled transactions survived a full merge"
    assert policy_answer(table) == answer, "a deleted key came back"
    assert _raw_counts(table)[0] == len(answer["visible"]) < entries_before


def test_replacing_keeps_marks_when_a_key_can_span_partitions(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(merging, "CLOCK_SKEW_MS", 0)
    timeout = 1.0
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "a": "BIGINT"},
        primary_key="k",
        partition_by="bucket(2, a)",  # an update may move a key to another partition
        policy="replacing",
        transaction_timeout=timeout,
    )
    table.insert([{"k": k, "a": k} for k in range(6)])
    moved = next(a for a in range(10, 100) if _bucket(a) != _bucket(1))
    table.update([{"k": 1, "a": moved}])  # the mark stays behind in the old partition
    table.delete([3])
    answer = policy_answer(table)
    clock_ahead(monkeypatch, merging, timeout + 0.2)  # the merge's clock, past the timeout

    table.merge(min_files=1)

    assert policy_answer(table) == answer
    # Each mark is the latest entry of its key in its partition, and the merge cannot know
    # that no other partition holds an older entry of the key: both marks stay.
    assert _marks(table) == [(1,), (3,)]


# --- aggregating: a correction merged without what it corrects ------------------------------------


def test_aggregating_partial_merge_keeps_a_group_whose_merged_count_is_zero(tmp_path: Any) -> None:
    """Merging only a correction and a later insertion of the same group nets the count measure
    to zero within the merge, yet the group still has rows outside it."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"k": "BIGINT", "n": "BIGINT", "total": "BIGINT"},
        primary_key="k",
        policy={"name": "aggregating", "measures": {"n": "count", "total": "sum"}},
    )
    table.insert([{"k": 1, "n": 1, "total": 5}])
    table.insert([{"k": 1, "n": 1, "total": 7}])
    table.append_entries([{"k": 1, "n": 1, "total": 5, "dml_type": -1}])  # retracts the first
    assert policy_answer(table) == [(1, 1, 7)]
    _, insertion, correction = sorted(table.snapshot().markers(), key=lambda m: m.trx_min)

    table.merge(files=[insertion.path, correction.path])

    assert policy_answer(table) == [(1, 1, 7)]


# --- merges on each engine ----------------------------------------------------------------------


@pytest.mark.engines
@pytest.mark.parametrize("kind", POLICY_TABLES)
def test_a_merge_on_each_engine_keeps_every_answer(
    engine: Engine, tmp_path: Any, kind: str
) -> None:
    """A full merge through the engine (Spark's rewrite on the executors, with partitions cut
    into several key ranges) keeps the policy's answer, now and by time travel."""
    table = policy_table(ledger.connect(str(tmp_path / "wh")), kind)
    before = _normalised(policy_answer(table))
    version = table.version
    entries = len(raw_entries(table))
    result = engine.merge(table, min_files=1, rows_per_task=2)
    assert result.version == table.refresh().version and result.merged
    if engine.name == "spark":
        # Two rows per task: a partition's keys are spread over several ranges, each a file.
        assert max(m.files_out for m in result.merged) >= 2, result
    assert _same(_normalised(policy_answer(table)), before)
    assert len(raw_entries(table)) <= entries
    assert _same(_normalised(policy_answer(table, version=version)), before)  # time travel
