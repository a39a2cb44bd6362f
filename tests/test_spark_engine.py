"""The Spark engine (ledger.spark, ledger/engines/spark/) against the embedded engine.

Every check compares what a Spark write, read, merge or refresh did with what the embedded
DuckDB engine does on a twin (or on the same table), through answers that never run Spark:
``views.visible``/``views.totals`` and the raw ledger (``table.snapshot().scan()``).

What every engine does alike runs on Spark through the ``engine`` fixture in the behaviour
suites (tests/support/engines.py): writes and their entry order in test_writes.py, bad input in
test_bad_input.py, conversions in test_conversion.py, the views (visible rows, totals, history,
the change feed) in test_views.py, merges in test_merge_invariance.py, read-modify-write against
commits made meanwhile in test_concurrency.py. This file keeps what is Spark's own:

1. DataFrames made from Arrow or pandas, and one transaction mixing Spark and embedded writes.
2. What only ``ledger.spark`` refuses: inputs that are not DataFrames, misplaced arguments.
3. Reads: Spark's Parquet reader and pyarrow-on-executors equal ``scan()``; schema evolution;
   time travel.
4. S3 (moto) through the pyarrow fallback.
5. Each engine reads and merges the files the other's merge wrote.
6. Rollup refresh and rebuild on Spark equal the embedded refresh of a twin rollup.
7. ``ledger.spark.register`` (temporary views) and the session's Arrow batch size.

Spark jobs cost 0.2-1 s each on two cores, so DataFrames are tiny, tables are built with the
embedded engine where the Spark path is not what a test is about, and each test checks a lot.
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

import ledger
import ledger.spark as ls
import views
from ledger.engines.spark import s3a
from ledger.errors import (
    InvalidArgumentError,
    KeyNotFoundError,
    StorageError,
)
from tests.support.arrow_data import rows
from tests.support.engines import SparkEngine
from tests.support.engines import sorted_rows as norm
from tests.support.policy_tables import policy_table
from tests.support.s3server import BUCKET, S3Endpoint
from tests.support.twins import (
    SCHEMA,
    assert_same_meaning,
    footprint,
    raw,
    same_commit,
    totals,
    twins,
    visible,
)
from tests.support.twins import on_both as twin_writes

# --- data -------------------------------------------------------------------------------------


def dec(text: str) -> Decimal:
    return Decimal(text)


# --- answers ----------------------------------------------------------------------------------


def frame(spark: Any, data: pa.Table) -> Any:
    """A DataFrame of ``data``'s rows and types, built from a Python list (an RDD scan over
    two partitions). DataFrames made from Arrow or pandas (local relations) are covered by
    test_insert_of_a_dataframe_made_from_arrow_or_pandas."""
    return SparkEngine(spark).frame(data)


def on_both(spark: Any, s: Any, e: Any, operation: str, data: pa.Table) -> tuple[Any, Any]:
    """Run one write through ledger.spark on ``s`` and through the embedded engine on ``e``."""
    return twin_writes(SparkEngine(spark), s, e, operation, data)


def collected(frame: Any) -> list[tuple[Any, ...]]:
    return norm(tuple(r) for r in frame.collect())


# =============================================================================================
# 1. Writes from DataFrames equal the embedded engine
# =============================================================================================


@pytest.mark.parametrize("source", ["arrow", "pandas"])
def test_insert_of_a_dataframe_made_from_arrow_or_pandas(
    spark: Any, tmp_path: Any, source: str
) -> None:
    """The usual way to make a small DataFrame: ``spark.createDataFrame(pandas_or_arrow)``, a
    LocalRelation. Spark's optimizer folded a JVM ``spark_partition_id()`` over it on the driver
    (every row in partition 0) while ``mapInArrow`` wrote it in several tasks, so the write's own
    check refused it as non-deterministic (fixed in f7bff62: counting in mapInArrow)."""
    s, e = twins(tmp_path, primary_key="k")
    data = rows("k g x", (1, "a", 1), (2, "b", 2), (3, "a", 3))
    made = spark.createDataFrame(data if source == "arrow" else data.to_pandas())
    info = ls.insert(s, made)
    assert (info.inserted, info.deleted) == (3, 0)
    assert visible(s) == norm([(1, "a", 1, None), (2, "b", 2, None), (3, "a", 3, None)])
    entries = rows("k g x dml_type", (1, "a", 1, -1), (4, "c", 4, 1), (5, "c", 5, 1))
    assert ls.append_entries(s, spark.createDataFrame(entries)).deleted == 1
    e.insert(data)
    e.append_entries(entries)
    assert_same_meaning(s, e)


def test_one_transaction_mixing_spark_and_embedded_writes(spark: Any, tmp_path: Any) -> None:
    s, e = twins(tmp_path, primary_key="k")
    base = rows("k g x", (1, "a", 1), (2, "a", 2))
    s.insert(base)
    e.insert(base)
    start = s.version
    with s.transaction() as tx:
        assert ls.insert(tx, frame(spark, rows("k g x", (3, "b", 3), (4, "b", 4)))) == 2
        tx.update([{"k": 3, "x": 33}])  # the embedded engine sees the Spark insert
        assert ls.upsert(tx, frame(spark, rows("k x", (1, 11), (3, 333)))) == 2
        tx.insert([{"k": 5, "g": "c", "x": 5}])
        tx.delete([2, 5])
    with e.transaction() as tx:
        tx.insert(rows("k g x", (3, "b", 3), (4, "b", 4)))
        tx.update([{"k": 3, "x": 33}])
        tx.upsert(rows("k x", (1, 11), (3, 333)))
        tx.insert([{"k": 5, "g": "c", "x": 5}])
        tx.delete([2, 5])
    assert s.refresh().version == start + 1  # one commit for the whole transaction
    assert tx.commit_info is not None
    assert s.history()[-1].inserted == tx.commit_info.inserted
    assert s.history()[-1].deleted == tx.commit_info.deleted
    assert_same_meaning(s, e)
    assert visible(s) == norm([(1, "a", 11, None), (3, "b", 333, None), (4, "b", 4, None)])
    entries = [r for r in raw(s) if r["trx_id"] == 2]
    seqs = sorted(r["trx_seq"] for r in entries)
    assert seqs == list(range(len(entries))), "trx_seq not unique/contiguous in the transaction"
    # Key 3: insertion (Spark), mark + insertion (embedded), mark + insertion (Spark): in trx_seq
    # order the signs alternate, every mark right after what it cancels.
    key3 = [(r["trx_seq"], r["dml_type"], r["x"]) for r in entries if r["k"] == 3]
    assert [(d, x) for _, d, x in sorted(key3)] == [(1, 3), (-1, 3), (1, 33), (-1, 33), (1, 333)]


# =============================================================================================
# 2. Bad input: the typed error, and nothing written
# =============================================================================================


@pytest.mark.parametrize("operation", ["insert", "upsert", "update", "delete", "append_entries"])
def test_a_non_dataframe_is_refused_before_anything_runs(tmp_path: Any, operation: str) -> None:
    (table, _) = twins(tmp_path, primary_key="k")
    table.insert(rows("k g x", (1, "a", 1)))
    before = footprint(table)
    for data in ([{"k": 1, "x": 1}], rows("k x", (1, 1)), rows("k x", (1, 1)).to_pandas()):
        with pytest.raises(InvalidArgumentError, match="DataFrame"):
            getattr(ls, operation)(table, data)
    assert footprint(table) == before


def test_a_refused_write_inside_a_transaction_leaves_the_transaction_usable(
    spark: Any, tmp_path: Any
) -> None:
    (table, _) = twins(tmp_path, primary_key="k")
    with table.transaction() as tx:
        ls.insert(tx, frame(spark, rows("k x", (1, 1))))
        with pytest.raises(KeyNotFoundError):
            ls.update(tx, frame(spark, rows("k x", (2, 2))))
        with pytest.raises(InvalidArgumentError):
            ls.insert(tx, frame(spark, rows("k x", (3, 3))), evolve_schema=True)
    assert visible(table) == norm([(1, None, 1, None)])


def test_writes_to_something_else_than_a_table_are_refused(spark: Any) -> None:
    data = frame(spark, rows("k x", (1, 1)))
    with pytest.raises(InvalidArgumentError):
        ls.insert("wh.t", data)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        ls.merge(None, rows_per_task=0)  # type: ignore[arg-type]


# =============================================================================================
# 3. Reads
# =============================================================================================

LEDGER_COLUMNS = [*SCHEMA, "trx_id", "trx_seq", "dml_type"]


def _scan_rows(table: ledger.Table, **kw: Any) -> list[tuple[Any, ...]]:
    rel = table.snapshot(kw.pop("version", None)).scan(**kw)
    return norm(rel.fetchall())


def test_both_readers_equal_the_embedded_scan(spark: Any, tmp_path: Any) -> None:
    (table, _) = twins(tmp_path, primary_key="k", partition_by=["g"])
    table.insert(rows("k g x d", (1, "a", 1, dec("1.10")), (2, "b", 2, None), (3, None, 3, None)))
    table.upsert(rows("k g x", (1, "b", 11), (4, "a", 4)))
    table.delete([3])
    want = _scan_rows(table)
    for reader in ("spark", "pyarrow"):
        entries = ls.read(table, reader=reader)
        assert entries.columns == LEDGER_COLUMNS
        assert collected(entries) == want, reader
    only_b = ls.read(table, partitions={"g": "b"}, reader="pyarrow")
    assert collected(only_b) == _scan_rows(table, partitions={"g": "b"})
    with pytest.raises(InvalidArgumentError):
        ls.read(table, reader="hadoop")


def test_schema_evolution_reads_older_files_with_null(spark: Any, tmp_path: Any) -> None:
    (table, _) = twins(tmp_path, {"k": "BIGINT", "i": "INTEGER", "x": "BIGINT"}, primary_key="k")
    table.insert(rows("k i x", (1, 1, 10), (2, 2, 20)))
    # Embedded: a new column c, and i widened to BIGINT by a value that does not fit INTEGER.
    table.insert(
        rows("k i c", (3, 2**40, "c3"), types={"i": pa.int64(), "c": pa.string()}),
        evolve_schema=True,
    )
    # Spark: another new column e.
    data = frame(spark, rows("k x e", (4, 40, 4.5), types={"e": pa.float64()}))
    info = ls.insert(table, data, evolve_schema=True)
    assert info.version == table.refresh().version
    assert table.schema == {
        "k": "BIGINT",
        "i": "BIGINT",
        "x": "BIGINT",
        "c": "VARCHAR",
        "e": "DOUBLE",
    }
    want = _scan_rows(table)
    assert (1, 1.0, 10.0, None, None, 1.0, 0.0, 1.0) in want
    for reader in ("spark", "pyarrow"):
        assert collected(ls.read(table, reader=reader)) == want, reader
    assert collected(ls.visible(table)) == visible(table)


def test_time_travel_by_version_and_timestamp(spark: Any, tmp_path: Any) -> None:
    (table, _) = twins(tmp_path, primary_key="k")
    table.insert(rows("k g x", (1, "a", 1), (2, "b", 2)))
    old = table.version
    stamp = table.history()[-1].timestamp
    table.update([{"k": 1, "x": 100}])
    table.delete([2])
    assert collected(ls.read(table, version=old)) == _scan_rows(table, version=old)
    assert collected(ls.visible(table.snapshot(old))) == visible(table, version=old)
    assert collected(ls.visible(table, timestamp=stamp)) == visible(table, version=old)
    with pytest.raises(InvalidArgumentError):
        ls.read(table.snapshot(old), version=old)


# =============================================================================================
# 4. S3 through the pyarrow fallback
# =============================================================================================


def test_spark_writes_and_reads_on_s3(spark: Any, s3_endpoint: S3Endpoint) -> None:
    wh = ledger.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}", **s3_endpoint.options())
    s = wh.create_table("s", SCHEMA, primary_key="k", partition_by=["g"])
    e = wh.create_table("e", SCHEMA, primary_key="k", partition_by=["g"])
    first = rows("k g x d", (1, "a", 1, dec("1.00")), (2, "b", 2, None), (3, "a", 3, None))
    same_commit(on_both(spark, s, e, "insert", first))
    same_commit(on_both(spark, s, e, "upsert", rows("k g x", (1, "b", 10), (4, "a", 4))))
    assert_same_meaning(s, e)
    assert collected(ls.read(s)) == _scan_rows(s)
    assert collected(ls.visible(s)) == visible(e)
    if s3a.connector_present(spark):  # Spark's own reader reaches S3 through S3A
        assert collected(ls.read(s, reader="spark")) == _scan_rows(s)
    else:
        with pytest.raises(StorageError):
            ls.read(s, reader="spark")


# =============================================================================================
# 5. Files one engine's merge wrote, read and merged by the other
# =============================================================================================


def policy_views(table: ledger.Table, kind: str) -> dict[str, Any]:
    answer: dict[str, Any] = {"visible": visible(table)}
    if kind != "aggregating":
        answer["totals"] = totals(table, by="g", sum=["n", "d"], avg="d")
        answer["all"] = totals(table, sum=["v", "n", "d"])
    return answer


def test_each_engine_reads_the_files_the_others_merge_wrote(spark: Any, tmp_path: Any) -> None:
    table = policy_table(ledger.connect(str(tmp_path / "wh")), "collapsing")
    before = policy_views(table, "collapsing")
    table.merge(partitions={"k_bucket": "0"}, min_files=1)  # embedded merge of one partition
    assert collected(ls.read(table)) == _scan_rows(table)
    ls.insert(table, frame(spark, rows("k g v n", (11, "a", 30, 1))))
    ls.merge(table, min_files=1, rows_per_task=3)  # Spark merges embedded and Spark files
    after = policy_views(table, "collapsing")
    assert after["visible"] == norm([*before["visible"], (11, "a", 30, 1, None)])
    table.merge(min_files=1)  # and the embedded engine merges what Spark wrote
    assert policy_views(table, "collapsing") == after
    assert collected(ls.visible(table)) == after["visible"]


# =============================================================================================
# 6. Rollups
# =============================================================================================

ROLLUP_SCHEMA = {"k": "BIGINT", "g": "VARCHAR", "p": "BIGINT", "x": "BIGINT", "d": "DECIMAL(10,2)"}
MEASURES = {"views": "count", "total": "sum(x)", "n": "count(x)", "dsum": "sum(d)"}


def rollup_rows(rollup: ledger.Rollup) -> list[tuple[Any, ...]]:
    return visible(rollup.table)


def rollup_as_totals(rollup: ledger.Rollup) -> list[tuple[Any, ...]]:
    """The rollup's rows as ``views.totals(base, by="g", sum=["x", "d"])`` spells them."""
    held = views.visible(rollup.table).to_arrow_table().to_pylist()
    return norm((r["g"], r["views"], r["total"], r["dsum"]) for r in held if r["views"])


def test_spark_refresh_and_rebuild_equal_the_embedded_refresh(spark: Any, tmp_path: Any) -> None:
    wh = ledger.connect(str(tmp_path / "wh"))
    base = wh.create_table("base", ROLLUP_SCHEMA, primary_key="k", partition_by=["p"])
    first = pa.table(
        {
            "k": pa.array([1, 2, 3], pa.int64()),
            "g": pa.array(["a", "b", "c"]),
            "p": pa.array([1, 1, 2], pa.int64()),
            "x": pa.array([10, None, 30], pa.int64()),
            "d": pa.array([dec("1.00"), None, dec("3.00")], pa.decimal128(10, 2)),
        }
    )
    base.insert(first)
    by_spark = base.create_rollup("by_spark", by="g", measures=MEASURES)
    embedded = base.create_rollup("embedded", by="g", measures=MEASURES)
    assert rollup_rows(by_spark) == rollup_rows(embedded)

    # Base writes (one of them through Spark), then both refresh.
    ls.upsert(base, frame(spark, rows("k g x", (1, "b", 11), (4, "a", 4))))
    base.update([{"k": 3, "x": None}])
    base.delete([2])
    spark_result = ls.refresh(by_spark)
    embedded_result = embedded.refresh()
    assert spark_result.watermark == embedded_result.watermark == base.version
    assert spark_result.groups == embedded_result.groups
    assert rollup_rows(by_spark) == rollup_rows(embedded)
    assert ls.refresh(by_spark).version is None  # already at the base's latest version

    # A merge and a partition drop of the base.
    base.merge(min_files=1)
    base.drop_partitions({"p": "2"})
    ls.refresh(by_spark)
    embedded.refresh()
    assert rollup_rows(by_spark) == rollup_rows(embedded)
    # A rollup reads a sum over no non-NULL value as 0 where the totals view says NULL.
    summed = [
        tuple(0.0 if v is None else v for v in r) for r in totals(base, by="g", sum=["x", "d"])
    ]
    assert rollup_as_totals(by_spark) == summed

    # Rebuild from scratch on Spark: the same rows.
    held = rollup_rows(by_spark)
    result = ls.rebuild(by_spark)
    assert result.watermark == base.version
    assert rollup_rows(by_spark) == held


# =============================================================================================
# 7. The temp-view catalog, and the session's settings
# =============================================================================================


def test_register_creates_a_visible_and_a_ledger_view_per_table(spark: Any, tmp_path: Any) -> None:
    wh = ledger.connect(str(tmp_path / "wh"))
    first = policy_table(wh, "collapsing")
    second = policy_table(wh, "replacing")
    names = ls.register(wh)
    assert sorted(names) == ["collapsing", "collapsing_ledger", "replacing", "replacing_ledger"]
    assert collected(spark.sql("SELECT * FROM collapsing")) == visible(first)
    assert collected(spark.sql("SELECT * FROM replacing")) == visible(second)
    counts = spark.sql(
        "SELECT count(*), sum(dml_type), sum(dml_type * n) FROM collapsing_ledger"
    ).collect()[0]
    want = first.snapshot().scan().aggregate("count(*), sum(dml_type), sum(dml_type * n)")
    assert norm([tuple(counts)]) == norm(want.fetchall())


def test_arrow_batch_size_is_raised_for_writes_and_put_back_after_the_last_one(
    spark: Any, tmp_path: Any
) -> None:
    """Writes raise the session's Arrow batch size while they run; overlapping writes (as from
    two threads) put the session's own value back only when the last one ends."""
    from ledger.engines.spark import session as engine

    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    own = spark.conf.get(key)
    first, second = engine.arrow_batches(spark), engine.arrow_batches(spark, 1 << 20)
    first.__enter__()
    assert spark.conf.get(key) == str(engine.ARROW_BATCH_ROWS)
    second.__enter__()
    assert spark.conf.get(key) == str(1 << 20)
    first.__exit__(None, None, None)
    assert spark.conf.get(key) == str(1 << 20)  # the second write still runs
    second.__exit__(None, None, None)
    assert spark.conf.get(key) == own
    # A session that asks for larger batches (or none: 0) keeps its own setting.
    for setting in ("500000", "0"):
        spark.conf.set(key, setting)
        try:
            with engine.arrow_batches(spark):
                assert spark.conf.get(key) == setting
            assert spark.conf.get(key) == setting
        finally:
            spark.conf.set(key, own)
    # A real write leaves the session as it found it.
    table = ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT"}, primary_key="k")
    ls.insert(table, spark.range(0, 10).withColumnRenamed("id", "k"))
    assert spark.conf.get(key) == own
