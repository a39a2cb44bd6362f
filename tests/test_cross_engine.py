"""The embedded engine (DuckDB) and the Spark engine (``ledger.spark``) on the same tables.

- A random scenario of inserts, upserts, updates and deletes runs once through each engine into
  two tables: the raw ledgers hold the same sign sums per value tuple, the commits report the
  same counts, ``views.visible``/``views.totals`` answer the same, and both agree with a plain
  dict updated in place; ``ledger.spark.visible``/``totals`` answer like ``views`` on the same
  snapshot. Collapsing tables and replacing tables.
- Files one engine writes are read, updated and read back by the other (every column type,
  partitions, schema evolution, the Spark and pyarrow readers, S3).
- A merge by one engine while the other appends: every appended row is visible exactly once and
  totals equal the oracle's. A Spark read-modify-write on a table is retried on conflict
  (conflicts with commits made meanwhile, on each engine, are in test_concurrency.py).
- ``ledger.spark`` called from a thread (no active session there) leaves the session's settings.

Spark jobs cost about a second each on two cores, so the data is tiny and examples few.
"""

from __future__ import annotations

import datetime as dt
import tempfile
import threading
from collections import Counter
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import ledger
import ledger.spark as ls
import views
from ledger.engines.duckdb.session import connect
from ledger.schema import ROW_ID
from tests.conftest import Location, examples
from tests.support.spark_s3a import require_s3a
from tests.support.view_oracle import assert_same_rows

pytestmark = pytest.mark.spark

SCHEMA = {"k": "BIGINT", "a": "BIGINT", "d": "DECIMAL(12,2)", "x": "DOUBLE", "s": "VARCHAR"}
COLUMNS = list(SCHEMA)
ARROW = pa.schema(
    [
        ("k", pa.int64()),
        ("a", pa.int64()),
        ("d", pa.decimal128(12, 2)),
        ("x", pa.float64()),
        ("s", pa.string()),
    ]
)

KEYS = st.integers(min_value=0, max_value=4)
VALUES = {
    "a": st.none() | st.integers(min_value=-3, max_value=3),
    "d": st.none() | st.sampled_from([Decimal("0.10"), Decimal("-2.50"), Decimal("1234.56")]),
    "x": st.none() | st.sampled_from([0.5, -2.25, 1e3 / 3]),
    "s": st.none() | st.sampled_from(["x", "y", "it's"]),
}
# Each operation writes one column set (the key always); missing columns are NULL for inserts
# and keep their values for upserts and updates.
COLUMN_SETS = st.sampled_from([tuple(COLUMNS), ("k", "a"), ("k", "d", "s")])


@st.composite
def _rows(draw: Any, unique: bool) -> list[dict[str, Any]]:
    columns = draw(COLUMN_SETS)
    keys = draw(st.lists(KEYS, min_size=1, max_size=3, unique=unique))
    return [{"k": k, **{c: draw(VALUES[c]) for c in columns if c != "k"}} for k in keys]


OPERATION = st.one_of(
    st.tuples(st.just("insert"), _rows(unique=False)),
    st.tuples(st.just("upsert"), _rows(unique=True)),
    st.tuples(st.just("update"), _rows(unique=True)),
    st.tuples(st.just("delete"), st.lists(KEYS, min_size=1, max_size=3, unique=True)),
)
SCENARIO = st.tuples(
    st.tuples(st.just("insert"), _rows(unique=False)), st.lists(OPERATION, min_size=1, max_size=2)
).map(lambda first_rest: [first_rest[0], *first_rest[1]])


# --- the oracle: a plain dict updated in place ----------------------------------------------------


class DictOracle:
    """key -> the rows a plain table would hold for it, oldest first; the last is visible.

    ``replacing``: a key holds one row only (a blind insert replaces it, as the latest entry of
    a replacing table is its only live one); otherwise a blind insert adds a row."""

    def __init__(self, replacing: bool) -> None:
        self.replacing = replacing
        self.rows: dict[int, list[dict[str, Any]]] = {}

    def insert(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            full = {c: row.get(c) for c in COLUMNS}
            if self.replacing:
                self.rows[row["k"]] = [full]
            else:
                self.rows.setdefault(row["k"], []).append(full)

    def replace(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            merged = {c: None for c in COLUMNS}
            if row["k"] in self.rows:
                merged.update(self.rows[row["k"]][-1])
            merged.update(row)
            self.rows[row["k"]] = [merged]

    def delete(self, keys: list[int]) -> None:
        for k in keys:
            self.rows.pop(k, None)

    def visible(self) -> list[tuple[Any, ...]]:
        return sorted((tuple(rs[-1][c] for c in COLUMNS) for rs in self.rows.values()), key=repr)

    def live(self) -> list[dict[str, Any]]:
        return [row for rs in self.rows.values() for row in rs]

    def totals(self, by: str | None = None) -> list[tuple[Any, ...]]:
        """count, sum(a), sum(d), sum(x), avg(a), avg(x) per group, as SQL computes them."""
        groups: dict[Any, list[dict[str, Any]]] = {}
        for row in self.live():
            groups.setdefault(row[by] if by else None, []).append(row)
        if not by and not groups:
            groups[None] = []
        out = []
        for group, rows in groups.items():

            def values(c: str, rows: list[dict[str, Any]] = rows) -> list[Any]:
                return [r[c] for r in rows if r[c] is not None]

            sums = [sum(values(c)) if values(c) else None for c in ("a", "d", "x")]
            avgs = [sum(values(c)) / len(values(c)) if values(c) else None for c in ("a", "x")]
            out.append(((group,) if by else ()) + (len(rows), *sums, *avgs))
        return out


TOTALS = {"sum": ["a", "d", "x"], "avg": ["a", "x"]}


# --- reading both tables --------------------------------------------------------------------------


def _arrow(rows: list[dict[str, Any]]) -> pa.Table:
    columns = [c for c in COLUMNS if c in rows[0]]
    return pa.Table.from_pylist(rows, schema=pa.schema([ARROW.field(c) for c in columns]))


DDL = {"k": "bigint", "a": "bigint", "d": "decimal(12,2)", "x": "double", "s": "string"}


def _frame(spark: Any, data: pa.Table, local: bool = False) -> Any:
    """A DataFrame of an Arrow table's rows: built from Python rows (an RDD scan), or with
    ``local`` straight from Arrow (a local relation, which Spark plans differently)."""
    if local:
        return spark.createDataFrame(data)
    ddl = ", ".join(f"`{c}` {DDL[c]}" for c in data.column_names)
    return spark.createDataFrame([tuple(r.values()) for r in data.to_pylist()], ddl)


def value_sign_sums(table: ledger.Table | ledger.Snapshot) -> Counter[tuple[Any, ...]]:
    """sum(dml_type) per tuple of user columns over the raw ledger, zero sums left out."""
    con = connect()
    try:
        raw = table.scan(con=con)
        raw.create_view("raw")
        names = ", ".join(f'"{c}"' for c in raw.columns if c not in _SYSTEM)
        rows = con.sql(
            f"SELECT {names}, CAST(sum(dml_type) AS BIGINT) FROM raw GROUP BY ALL"
        ).fetchall()
    finally:
        con.close()
    return Counter({tuple(r[:-1]): int(r[-1]) for r in rows if r[-1] != 0})


_SYSTEM = ("trx_id", "trx_seq", "dml_type", "_row_id")


def _totals(relation_or_frame: Any) -> list[tuple[Any, ...]]:
    if hasattr(relation_or_frame, "fetchall"):
        return [tuple(r) for r in relation_or_frame.fetchall()]
    return [tuple(r) for r in relation_or_frame.collect()]


def _visible(table: ledger.Table | ledger.Snapshot) -> list[tuple[Any, ...]]:
    return sorted(views.visible(table).fetchall(), key=repr)


def _spark_visible(snap: ledger.Snapshot, spark: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in ls.visible(snap, spark=spark).collect()), key=repr)


# --- 1. random scenarios through both engines -----------------------------------------------------


def _apply(
    spark: Any,
    embedded: ledger.Table,
    on_spark: ledger.Table,
    oracle: DictOracle,
    operation: tuple[str, Any],
    local: bool,
) -> None:
    kind, argument = operation
    if kind == "delete":
        keys = pa.table({"k": pa.array(argument, pa.int64())})
        got_embedded = embedded.delete(keys)
        got_spark = ls.delete(on_spark, _frame(spark, keys, local))
        oracle.delete(argument)
    else:
        data = _arrow(argument)
        if kind == "update" and not all(row["k"] in oracle.rows for row in argument):
            before = (embedded.refresh().version, on_spark.refresh().version)
            with pytest.raises(ledger.KeyNotFoundError):
                embedded.update(data)
            with pytest.raises(ledger.KeyNotFoundError):
                ls.update(on_spark, _frame(spark, data, local))
            assert (embedded.refresh().version, on_spark.refresh().version) == before
            return
        got_embedded = getattr(embedded, kind)(data)
        got_spark = getattr(ls, kind)(on_spark, _frame(spark, data, local))
        if kind == "insert":
            oracle.insert(argument)
        else:
            oracle.replace(argument)
    assert (got_spark.version, got_spark.inserted, got_spark.deleted) == (
        got_embedded.version,
        got_embedded.inserted,
        got_embedded.deleted,
    ), (kind, argument)


def _run_scenario(spark: Any, policy: Any, scenario: list[tuple[str, Any]]) -> None:
    with tempfile.TemporaryDirectory(prefix="cross-") as root:
        _check_scenario(spark, ledger.connect(root), policy, scenario)


def _check_scenario(
    spark: Any, wh: ledger.Warehouse, policy: Any, scenario: list[tuple[str, Any]]
) -> None:
    options: dict[str, Any] = {"primary_key": "k", "policy": policy}
    if policy == "collapsing":
        options["partition_by"] = "bucket(2, k)"
    embedded = wh.create_table("embedded", SCHEMA, **options)
    on_spark = wh.create_table("on_spark", SCHEMA, **options)
    oracle = DictOracle(replacing=policy == "replacing")
    for n, operation in enumerate(scenario):  # DataFrames from rows and from Arrow, in turn
        _apply(spark, embedded, on_spark, oracle, operation, local=n % 2 == 1)

    snap_e, snap_s = embedded.snapshot(), on_spark.snapshot()
    assert value_sign_sums(snap_s) == value_sign_sums(snap_e)
    want_visible = oracle.visible()
    assert _visible(snap_e) == want_visible
    assert _visible(snap_s) == want_visible
    for by in (None, "s"):
        want = oracle.totals(by)
        groups = 1 if by else 0
        options = {"by": by, **TOTALS}
        assert_same_rows(_totals(views.totals(snap_e, **options)), want, groups, "embedded")
        assert_same_rows(_totals(views.totals(snap_s, **options)), want, groups, "spark-written")
    # Spark's views on the same snapshots (one of each, to keep Spark jobs few).
    assert _spark_visible(snap_s, spark) == want_visible
    got = _totals(ls.totals(snap_e, spark=spark, **TOTALS))
    assert_same_rows(got, oracle.totals(None), 0, "ledger.spark.totals")


# Seven examples in all in the everyday run (`make test-deep` runs hundreds): a
# read-modify-write costs Spark about seven jobs (3-5 s on two cores), and these two were the
# longest tests of the Spark worker, which sets the length of the whole run.
# No shrinking: shrinking one failure took more than five minutes.
PROPERTY = {"deadline": None, "phases": [Phase.explicit, Phase.reuse, Phase.generate]}


@settings(max_examples=examples(4), **PROPERTY)
@given(scenario=SCENARIO)
def test_random_writes_agree_across_engines_collapsing(spark: Any, scenario: Any) -> None:
    _run_scenario(spark, "collapsing", scenario)


@settings(max_examples=examples(3), **PROPERTY)
@given(scenario=SCENARIO)
def test_random_writes_agree_across_engines_replacing(spark: Any, scenario: Any) -> None:
    _run_scenario(spark, "replacing", scenario)


# --- 2. files written by one engine, read and updated by the other --------------------------------

TYPES = {
    "k": "VARCHAR",
    "b": "BOOLEAN",
    "i1": "TINYINT",
    "i2": "SMALLINT",
    "i4": "INTEGER",
    "i8": "BIGINT",
    "f4": "FLOAT",
    "f8": "DOUBLE",
    "bl": "BLOB",
    "dt": "DATE",
    "ts": "TIMESTAMP",
    "tz": "TIMESTAMPTZ",
    "dec": "DECIMAL(18,3)",
}
UTC = dt.UTC


def _typed_row(k: str, n: int) -> dict[str, Any]:
    return {
        "k": k,
        "b": n % 2 == 0,
        "i1": -n,
        "i2": 300 + n,
        "i4": -70_000 - n,
        "i8": 2**40 + n,
        "f4": 1.5 * n,
        "f8": n / 3,
        "bl": bytes([n, 0, 255]),
        "dt": dt.date(2026, 1 + n % 12, 1 + n),
        "ts": dt.datetime(2026, 11, 21, 5, n, 7, 123456),
        "tz": dt.datetime(2025, 1 + n % 12, 2, 23, 59, 59, 999999, tzinfo=UTC),
        "dec": Decimal(f"{n}.125") if n % 3 else None,
    }


def _normal(value: Any) -> Any:
    """One spelling per value across engines: bytes for BLOB, naive UTC for TIMESTAMPTZ (DuckDB
    gives aware datetimes, Spark naive ones in the session's zone, UTC here)."""
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value


def _rows_of(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(_normal(v) for v in row) for row in rows), key=repr)


def _typed_frame(spark: Any, table: ledger.Table, rows: list[dict[str, Any]]) -> Any:
    from ledger.engines.spark import convert as spark_engine

    schema = spark_engine.spark_schema(table.arrow_schema)
    columns = [f.name for f in schema.fields]
    return spark.createDataFrame([tuple(row[c] for c in columns) for row in rows], schema)


def _expected(rows: dict[str, dict[str, Any]]) -> list[tuple[Any, ...]]:
    return _rows_of(tuple(row.values()) for row in rows.values())


def _spark_rows(frame: Any) -> list[tuple[Any, ...]]:
    return _rows_of(tuple(r) for r in frame.collect())


@pytest.mark.parametrize(
    ("location", "reader"),
    [("local", "auto"), ("s3", "s3a"), ("s3", "pyarrow")],
    indirect=["location"],
)
def test_spark_writes_then_embedded_reads_and_updates(
    spark: Any, location: Location, reader: str
) -> None:
    """Every column type, month partitions (a NULL partition too), local disk and S3 (through
    Hadoop's S3A connector and through pyarrow on the executors)."""
    if reader == "s3a":
        require_s3a(spark)
    wh = location.connect()
    table = wh.create_table("typed", TYPES, primary_key="k", partition_by="month(ts)")
    want = {f"r{n}": _typed_row(f"r{n}", n) for n in range(4)}
    want["r3"]["ts"] = None
    assert ls.insert(table, _typed_frame(spark, table, list(want.values()))).inserted == 4
    assert _rows_of(views.visible(table).fetchall()) == _expected(want)

    # The embedded engine updates rows Spark wrote, and Spark reads its files back.
    table.upsert([{"k": "r1", "f8": -1.0, "dec": Decimal("-7.000")}])
    want["r1"].update(f8=-1.0, dec=Decimal("-7.000"))
    assert table.delete(["r2"]).deleted == 1
    del want["r2"]
    table.insert([_typed_row("r9", 9)])
    want["r9"] = _typed_row("r9", 9)
    assert _spark_rows(ls.visible(table, spark=spark, reader=reader)) == _expected(want)

    # And Spark updates rows the embedded engine wrote.
    info = ls.update(
        table, spark.createDataFrame([("r9", True, None)], "k string, b boolean, i1 tinyint")
    )
    assert (info.inserted, info.deleted) == (1, 1)
    want["r9"].update(b=True, i1=None)
    assert _rows_of(views.visible(table).fetchall()) == _expected(want)
    raw = _rows_of(table.scan().fetchall())
    assert _rows_of(tuple(r) for r in ls.read(table, spark=spark, reader=reader).collect()) == raw
    assert table.count() == len(want)
    got = _totals(views.totals(table, sum=["i8", "dec"]))
    decimals = sum(r["dec"] for r in want.values() if r["dec"] is not None)
    assert got == [(len(want), sum(r["i8"] for r in want.values()), decimals)]


def test_embedded_writes_then_spark_reads_and_updates(spark: Any, tmp_path: Any) -> None:
    """Schema evolution by either engine; Spark's own reader and the pyarrow one."""
    wh = ledger.connect(str(tmp_path))
    table = wh.create_table("t", {"k": "BIGINT", "n": "INTEGER"}, primary_key="k")
    table.insert([{"k": 1, "n": 10}, {"k": 2, "n": 20}])
    # A new column, and n widened to BIGINT by a value that does not fit an INTEGER.
    table.insert([{"k": 3, "n": 2**40, "note": "wide"}], evolve_schema=True)
    assert table.schema == {"k": "BIGINT", "n": "BIGINT", "note": "VARCHAR"}
    table.upsert([{"k": 1, "note": "kept n"}])
    want = [(1, 10, "kept n"), (2, 20, None), (3, 2**40, "wide")]
    raw = _rows_of(table.scan().fetchall())
    for reader in ("spark", "pyarrow"):
        assert _spark_rows(ls.read(table, spark=spark, reader=reader)) == raw, reader
        assert _spark_rows(ls.visible(table, spark=spark, reader=reader)) == want, reader

    # Spark changes them (partial columns keep their values) and adds a column of its own.
    ls.upsert(table, spark.createDataFrame([(2, 21), (4, 40)], "k bigint, n bigint"))
    ls.delete(table, spark.createDataFrame([(3,)], "k bigint"))
    ls.insert(
        table,
        spark.createDataFrame([(5, 50, 0.5)], "k bigint, n bigint, score double"),
        evolve_schema=True,
    )
    assert table.refresh().schema == {
        "k": "BIGINT",
        "n": "BIGINT",
        "note": "VARCHAR",
        "score": "DOUBLE",
    }
    want = [(1, 10, "kept n", None), (2, 21, None, None), (4, 40, None, None), (5, 50, None, 0.5)]
    assert _rows_of(views.visible(table).fetchall()) == want
    assert _totals(views.totals(table, sum="n")) == [(4, 121)]
    # The embedded engine keeps working on the evolved table.
    table.update([{"k": 5, "score": 1.5}])
    assert _spark_rows(ls.visible(table, spark=spark)) == [*want[:3], (5, 50, None, 1.5)]


# --- 3. a merge by one engine while the other appends ---------------------------------------------

PLAIN = {"k": "BIGINT", "v": "BIGINT", "who": "VARCHAR"}


def _seeded(tmp_path: Any) -> tuple[ledger.Warehouse, ledger.Table, dict[int, tuple[Any, ...]]]:
    """A collapsing table with a few small files (inserts, an upsert, a delete) to merge."""
    wh = ledger.connect(str(tmp_path))
    table = wh.create_table("t", PLAIN, primary_key="k", partition_by="bucket(2, k)")
    oracle = {}
    for start in (0, 4):
        rows = [{"k": k, "v": k, "who": "seed"} for k in range(start, start + 4)]
        table.insert(rows)
        oracle.update({r["k"]: (r["k"], r["v"], "seed") for r in rows})
    table.upsert([{"k": 1, "v": 100, "who": "fix"}, {"k": 6, "v": 600, "who": "fix"}])
    oracle[1], oracle[6] = (1, 100, "fix"), (6, 600, "fix")
    table.delete([2])
    del oracle[2]
    return wh, table, oracle


def _check_against(table: ledger.Table, oracle: dict[int, tuple[Any, ...]], appended: Any) -> None:
    snap = table.refresh().snapshot()
    assert _visible(snap) == sorted(oracle.values(), key=repr)
    sums = value_sign_sums(snap)
    assert all(n == 1 for n in sums.values()), sums
    for k in appended:  # every appended row exactly once
        assert sum(n for row, n in sums.items() if row[0] == k) == 1, k
    total = sum(v for _, v, _ in oracle.values())
    assert _totals(views.totals(snap, sum="v")) == [(len(oracle), total)]
    assert table.count() == len(oracle)


def test_spark_merge_while_the_embedded_engine_appends(spark: Any, tmp_path: Any) -> None:
    wh, table, oracle = _seeded(tmp_path)
    before = _visible(table)
    results: list[Any] = []
    failures: list[BaseException] = []

    def merge() -> None:
        try:
            for _ in range(2):
                results.append(ls.merge(wh.table("t"), spark=spark, min_files=2))
        except BaseException as e:
            failures.append(e)

    merger = threading.Thread(target=merge)
    merger.start()
    appended = []
    n = 0
    while merger.is_alive() or n < 3:
        k = 1000 + n
        table.insert([{"k": k, "v": n, "who": "append"}])
        oracle[k] = (k, n, "append")
        appended.append(k)
        if n % 4 == 3:  # a read-modify-write of a seeded key during the merge
            table.upsert([{"k": 3, "v": 30 + n, "who": "upsert"}])
            oracle[3] = (3, 30 + n, "upsert")
        n += 1
    merger.join()
    assert not failures, failures
    assert results[0].version is not None and results[0].merged, results
    assert not any(r.conflicts for r in results), results
    _check_against(table, oracle, appended)
    assert before  # the seed was visible
    assert _spark_visible(table.snapshot(), spark) == _visible(table)


def test_embedded_merge_while_spark_appends(spark: Any, tmp_path: Any) -> None:
    wh, table, oracle = _seeded(tmp_path)
    merges: list[Any] = []
    failures: list[BaseException] = []
    done = threading.Event()

    def merge() -> None:
        handle = wh.table("t")
        try:
            while not done.is_set():
                merges.append(handle.merge(min_files=2))
        except BaseException as e:
            failures.append(e)

    merger = threading.Thread(target=merge)
    merger.start()
    appended = []
    try:
        for n in range(3):
            rows = [(2000 + 2 * n, n, "spark"), (2001 + 2 * n, -n, "spark")]
            ls.insert(table, spark.createDataFrame(rows, "k bigint, v bigint, who string"))
            for row in rows:
                oracle[row[0]] = row
                appended.append(row[0])
        ls.upsert(
            table, spark.createDataFrame([(5, 55, "spark")], "k bigint, v bigint, who string")
        )
        oracle[5] = (5, 55, "spark")
    finally:
        done.set()
        merger.join()
    assert not failures, failures
    assert [m for m in merges if m.version is not None], merges
    _check_against(table, oracle, appended)
    # A last merge leaves one file per partition and changes no answer.
    table.merge(min_files=2)
    _check_against(table, oracle, appended)


def test_spark_calls_from_a_thread_leave_the_session_settings_alone(
    spark: Any, tmp_path: Any
) -> None:
    """A thread has no active Spark session (it is thread-local in the JVM); ``ledger.spark``
    must then use the running session as it is, not re-apply its own defaults to it."""
    table = ledger.connect(str(tmp_path)).create_table("t", PLAIN, primary_key="k")
    table.insert([{"k": 1, "v": 1, "who": "x"}])
    keys = ("spark.sql.shuffle.partitions", "spark.sql.session.timeZone")
    before = {k: spark.conf.get(k) for k in keys}
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    got: list[Any] = []
    try:
        thread = threading.Thread(target=lambda: got.append(ls.visible(table).count()))
        thread.start()
        thread.join()
        after = {k: spark.conf.get(k) for k in keys}
    finally:
        for k, v in before.items():
            spark.conf.set(k, v)
    assert got == [1]
    assert after == {**before, "spark.sql.session.timeZone": "America/New_York"}


# --- 4. read-modify-write across engines (the same answer to the same write on every engine is
# test_conversion.py's test_a_write_gets_the_same_answer_on_every_engine; conflicts with commits
# made meanwhile, on each engine, are test_concurrency.py's) ------------------------------------


@pytest.mark.parametrize("retries", [0, 1])
def test_a_spark_read_modify_write_on_a_table_is_retried_on_conflict(
    spark: Any, tmp_path: Any, monkeypatch: Any, retries: int
) -> None:
    """An embedded commit lands between a Spark upsert's read and its commit (it is made from
    inside the first commit call, through the real code): with ``retries`` left, the upsert
    runs again against the newer snapshot, like ``Table.upsert``; without, it raises."""
    table = ledger.connect(str(tmp_path)).create_table("t", PLAIN, primary_key="k")
    table.insert([{"k": 1, "v": 0, "who": "seed"}])
    rival = ledger.connect(str(tmp_path)).table("t")
    real_commit = ledger.Transaction.commit
    calls: list[Any] = []

    def commit_after_a_rival(tx: Any) -> Any:
        if tx.table is table:  # the Spark upsert's attempts, not the rival's own commit
            calls.append(tx)
            if len(calls) == 1:
                rival.upsert([{"k": 1, "v": 1, "who": "embedded"}])
        return real_commit(tx)

    monkeypatch.setattr(ledger.Transaction, "commit", commit_after_a_rival)
    data = spark.createDataFrame([(1, 2, "spark")], "k bigint, v bigint, who string")
    if retries == 0:
        with pytest.raises(ledger.ConflictError):
            ls.upsert(table, data, retries=0)
        assert _visible(table) == [(1, 1, "embedded")]
    else:
        info = ls.upsert(table, data, retries=retries)
        assert (info.inserted, info.deleted) == (1, 1)
        assert _visible(table) == [(1, 2, "spark")]
    assert len(calls) == retries + 1
    assert all(n == 1 for n in value_sign_sums(table).values())
    with pytest.raises(ledger.InvalidArgumentError):
        ls.delete(table, data, retries=-1)


def test_spark_writes_marks_sharing_a_dedup_key_in_the_order_of_their_entries(
    spark: Any, tmp_path: Any
) -> None:
    """On a dedup table whose dedup key every row shares, a correction's marks are repeats of
    each other and only the first written stays: Spark, like the embedded engine, writes them
    in the order of the insertions they cancel, so the one kept cancels the insertion kept."""
    from tests.support.ledger_reads import policy_answer

    schema = {"k": "BIGINT", "j": "VARCHAR", "v": "BIGINT"}
    policy = {"name": "dedup", "dedup_key": ["v"]}
    wh = ledger.connect(str(tmp_path))
    rows = [{"k": 0, "j": j, "v": None} for j in "yxy"]
    rows += [{"k": k, "j": "x", "v": None} for k in range(1, 6)]
    deleted = wh.create_table("deleted", schema, primary_key="k", policy=policy)
    deleted.insert(rows)
    ls.delete(deleted, spark.createDataFrame([(k,) for k in range(6)], "k bigint"))
    assert policy_answer(deleted)["visible"] == []
    updated = wh.create_table("updated", schema, primary_key="k", policy=policy)
    updated.insert(rows)
    ls.update(updated, spark.createDataFrame([(k, 3) for k in range(6)], "k bigint, v bigint"))
    # The insertions share v=3 too: key 0's, with the j of its visible row, is the earliest.
    assert policy_answer(updated)["visible"] == [(0, "y", 3)]


@pytest.mark.parametrize("primary_key", ["k", None])
def test_a_dataframe_that_changes_between_its_evaluations_is_written_once_consistently(
    spark: Any, tmp_path: Any, monkeypatch: Any, primary_key: str | None
) -> None:
    """A DataFrame filtered by a random Python UDF yields other rows each time it is
    evaluated, so the write's tasks see other rows than the counting pass did: the write is
    refused by its own check, the DataFrame checkpointed, counted and written again. What is
    committed is consistent: as many entries as the log says, unique entry numbers and row ids.
    (Spark's rand() would not do: its seed is fixed when the DataFrame is made.)"""
    import random

    from pyspark.sql import functions as F

    from ledger.engines.spark import write as spark_write

    schema = {"k": "BIGINT", "a": "BIGINT"}
    table = ledger.connect(str(tmp_path)).create_table("t", schema, primary_key=primary_key)
    coin = F.udf(lambda _: random.random() < 0.5, "boolean").asNondeterministic()
    frame = (
        spark.range(0, 2000, numPartitions=2)
        .select(F.col("id").alias("k"), (F.col("id") * 2).alias("a"))
        .filter(coin(F.col("k")))
    )
    real_write_once = spark_write._write_once
    attempts: list[int] = []

    def counted_write_once(*args: Any, **kwargs: Any) -> Any:
        attempts.append(1)
        return real_write_once(*args, **kwargs)

    monkeypatch.setattr(spark_write, "_write_once", counted_write_once)
    info = ls.insert(table, frame)
    entries = table.scan().to_arrow_table().to_pylist()
    assert 0 < info.inserted == len(entries) == table.count() < 2000
    assert len({e["trx_seq"] for e in entries}) == len(entries)
    if primary_key is None:
        assert len({e[ROW_ID] for e in entries}) == len(entries)
    assert all(e["a"] == 2 * e["k"] for e in entries)
    assert len(attempts) == 2  # refused once by the write's own check, then checkpointed
