"""Spark speed: ``ledger.spark.insert`` of a 10M-row DataFrame against Spark's own
``df.write.parquet`` of the same DataFrame, and ``ledger.spark.visible`` against DuckDB's
``views.visible`` on the same snapshot, in the same run, on the shared local Spark session
(``local[2]``, the ``spark`` fixture of tests/conftest.py).

Append: the DataFrame comes from ``spark.range`` (its default two partitions) with a shuffled
distinct BIGINT key ``k`` (``id * prime mod rows``), a DOUBLE, a VARCHAR of 12 distinct values
and a TIMESTAMP spread over a month, every column already in the table's Spark type (so no
type-check pass runs). It is not cached: each write computes it, as a caller's query would be.
The baseline is ``df.write.mode("overwrite").parquet(folder)`` (Spark's writer, snappy, one file
per partition, no sort); the ledger run is ``ledger.spark.insert(table, df)`` into a fresh table
with primary key ``k`` (files sorted by key) and includes the counting pass, the write job and
the commit. ratio_throughput = plain_time / ledger_time (target >= 0.8).

Visible: a collapsing table with primary key ``k``, built once with the embedded engine
(untimed): ``VIEW_KEYS`` (default 2M) rows in two commits, then 10% of the keys corrected with
``table.update`` (a delete mark carrying the old row plus an insertion of the new one): 2.4M
entries. Both engines read the same ``Snapshot`` and consume every visible row and column: Spark
``ledger.spark.visible(snap).write.format("noop")``, DuckDB ``views.visible(snap)`` through its
Arrow reader, batches dropped. ratio = spark_time / duckdb_time (no target: reported only).

Every figure is the median of ``LEDGER_BENCH_REPEATS`` (default 3) repetitions, the two sides back
to back in alternating order. The append's repetition 0 writes a 1M-row DataFrame through both
paths and is not counted (it starts the Python workers and warms the JVM without two more 10M-row
writes). The visible test likewise first reads a 20k-key table of the same shape through both
engines (Spark compiles the same plans), not counted. Every timed run checks its answer (Spark:
metrics observed on the way to the noop sink; DuckDB: the row count, plus one untimed full
check). ``spark_append_breakdown`` (information
only, never asserted) gives the driver's phases of the measured inserts (medians; each insert's
phases are timed by wrapping ``_conformed_columns``, ``count_partitions``, ``write_entries`` and
``Transaction.commit``), the time of ``df.count()``, and one extra run of a timed replica of the
write job's tasks (where the executors' time goes: waiting for rows from the JVM, building entries,
the writer's sort and Parquet encoding). ``LEDGER_BENCH_SPARK_ROWS`` and
``LEDGER_BENCH_SPARK_VIEW_KEYS`` shrink the inputs. A full run takes about 5 minutes on a quiet
2-core machine, much longer under load.
"""

from __future__ import annotations

import functools
import math
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pytest

import ledger
import ledger.spark
import ledger.transaction
import views
from ledger.schema import DML_TYPE
from tests.benchmarks.timing import env_int, repeats, summary, timed

ROWS = env_int("LEDGER_BENCH_SPARK_ROWS", 10_000_000)
VIEW_KEYS = env_int("LEDGER_BENCH_SPARK_VIEW_KEYS", 2_000_000)
VIEW_CORRECTIONS = VIEW_KEYS // 10  # each a delete mark and an insertion
VIEW_ENTRIES = VIEW_KEYS + 2 * VIEW_CORRECTIONS
VIEW_WARMUP_KEYS = min(VIEW_KEYS, 20_000)  # a small table of the same shape, read once first
REPEATS = repeats(3)
WARMUP_ROWS = min(ROWS, 1_000_000)  # repetition 0 (not counted) writes this many
SCHEMA = {"k": "BIGINT", "amount": "DOUBLE", "category": "VARCHAR", "booked_at": "TIMESTAMP"}
KEY_STRIDE = 2_654_435_761  # a prime: id * stride mod n visits every key of 0..n-1 once
CATEGORIES = 12
START_US = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
MONTH_US = 30 * 86_400 * 1_000_000
APPEND_TARGET = 0.8

pytestmark = pytest.mark.timeout(1800)


def ratio_of(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3)


# --- append --------------------------------------------------------------------------------------


def make_frame(spark: Any, n: int) -> Any:
    """n rows from ``spark.range``: shuffled distinct keys 0..n-1 and three value columns, each
    in the table's Spark type (TIMESTAMP is TIMESTAMP_NTZ); deterministic, so every evaluation
    gives the same rows."""
    from pyspark.sql import functions as F

    assert math.gcd(KEY_STRIDE, n) == 1
    ids = F.col("id")
    return spark.range(0, n).select(
        F.pmod(ids * F.lit(KEY_STRIDE), F.lit(n)).alias("k"),
        (F.pmod(F.xxhash64(ids), F.lit(10_000_000)) / F.lit(100.0)).alias("amount"),
        F.concat(
            F.lit("category-"), F.pmod(F.xxhash64(ids, F.lit(1)), F.lit(CATEGORIES)).cast("string")
        ).alias("category"),
        F.timestamp_micros(F.lit(START_US) + F.pmod(F.xxhash64(ids, F.lit(2)), F.lit(MONTH_US)))
        .cast("timestamp_ntz")
        .alias("booked_at"),
    )


def check_ledger_append(table: ledger.Table, info: ledger.CommitInfo, n: int) -> None:
    assert info.version == 1 and info.inserted == n
    assert table.count() == n  # the log
    [(count, key_sum, keys)] = table.scan().aggregate("count(*), sum(k), max(k) + 1").fetchall()
    assert (count, key_sum, keys) == (n, n * (n - 1) // 2, n)  # the data
    assert all(m.unique_keys for m in table.snapshot().markers())  # each file sorted by key


def check_plain_write(folder: Path, n: int) -> None:
    assert pads.dataset(str(folder), format="parquet").count_rows() == n


def with_timed_calls(
    targets: list[tuple[Any, str]], action: Callable[[], Any]
) -> tuple[Any, dict[str, float]]:
    """Run ``action`` with each ``getattr(owner, name)`` wrapped to add its wall time to a
    figure of that name (a wrapper costs two clock reads); return the result and the figures."""
    spent: dict[str, float] = {}
    saved = [(owner, name, getattr(owner, name)) for owner, name in targets]

    def wrap(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[name] = spent.get(name, 0.0) + time.perf_counter() - start

        return timed_call

    try:
        for owner, name, original in saved:
            setattr(owner, name, wrap(name, original))
        result = action()
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
    return result, spent


PHASES = {  # figure name -> (owner, attribute) timed inside ledger.spark.insert
    "schema_check_s": ("ledger.engines.spark.write", "conformed_columns"),
    "count_pass_s": ("ledger.engines.spark.write", "count_partitions"),
    "write_job_s": ("ledger.engines.spark.write", "write_entries"),
    "commit_s": ("ledger.transaction.Transaction", "commit"),
}


def _phase_targets() -> list[tuple[Any, str]]:
    from ledger.engines.spark import write

    owners = {
        "ledger.engines.spark.write": write,
        "ledger.transaction.Transaction": ledger.transaction.Transaction,
    }
    return [(owners[owner], name) for owner, name in PHASES.values()]


def timed_insert(table: ledger.Table, df: Any) -> tuple[float, ledger.CommitInfo, dict[str, float]]:
    """``ledger.spark.insert(table, df)`` timed as a whole and by driver phase."""
    elapsed, (info, spent) = timed(
        lambda: with_timed_calls(_phase_targets(), lambda: ledger.spark.insert(table, df))
    )
    phases = {figure: spent.get(name, 0.0) for figure, (_, name) in PHASES.items()}
    phases["other_s"] = elapsed - sum(phases.values())
    return elapsed, info, phases


def test_spark_append_10m_rows(
    spark: Any, tmp_path: Path, bench_results: dict[str, Any], capsys: Any
) -> None:
    df = make_frame(spark, ROWS)
    warm_df = make_frame(spark, WARMUP_ROWS)
    warehouse = ledger.connect(str(tmp_path / "warehouse"))
    plain_dir = tmp_path / "plain"
    expected = {
        "k": "bigint",
        "amount": "double",
        "category": "string",
        "booked_at": "timestamp_ntz",
    }
    assert dict(df.dtypes) == expected  # the table's types: no checked cast, no extra job

    def write_plain(frame: Any, n: int) -> float:
        elapsed, _ = timed(lambda: frame.write.mode("overwrite").parquet(str(plain_dir)))
        check_plain_write(plain_dir, n)
        shutil.rmtree(plain_dir)
        return elapsed

    phase_samples: dict[str, list[float]] = {}

    def write_ledger(frame: Any, n: int, repetition: int) -> float:
        name = f"spark_append_{repetition}"
        table = warehouse.create_table(name, SCHEMA, primary_key=["k"])
        elapsed, info, phases = timed_insert(table, frame)
        check_ledger_append(table, info, n)
        if repetition:
            for figure, seconds in phases.items():
                phase_samples.setdefault(figure, []).append(seconds)
            phase_samples.setdefault("files", []).append(len(table.files()))
        shutil.rmtree(tmp_path / "warehouse" / name)  # keep the disk (and page cache) small
        return elapsed

    # Repetition 0 (not counted) writes a smaller DataFrame through both paths: it starts the
    # Python workers and warms the JVM without costing two more 10M-row writes.
    samples: dict[str, list[float]] = {"plain": [], "ledger": []}
    for repetition in range(REPEATS + 1):
        frame, n = (df, ROWS) if repetition else (warm_df, WARMUP_ROWS)
        runners: list[tuple[str, Callable[[], float]]] = [
            ("plain", functools.partial(write_plain, frame, n)),
            ("ledger", functools.partial(write_ledger, frame, n, repetition)),
        ]
        if repetition % 2:
            runners.reverse()
        for name, run in runners:
            seconds = run()
            if repetition:
                samples[name].append(seconds)

    plain, ours = summary(samples["plain"]), summary(samples["ledger"])
    ratio = ratio_of(plain["median_s"], ours["median_s"])
    paired = [p / o for p, o in zip(samples["plain"], samples["ledger"], strict=True)]
    bench_results["spark_append_10m_rows"] = {
        "rows": ROWS,
        "columns": 4,
        "spark_partitions": df.rdd.getNumPartitions(),
        "repeats": REPEATS,
        "ledger_s": ours["median_s"],
        "plain_spark_parquet_s": plain["median_s"],
        "ratio_throughput": ratio,
        "target": f">= {APPEND_TARGET}",
        "ratio": ratio,
        "comparison": "df.write.parquet of the same DataFrame",
        "value_s": ours["median_s"],
        "baseline_s": plain["median_s"],
        "meets_target": ratio >= APPEND_TARGET,
        "ratio_paired_median": round(statistics.median(paired), 3),
        "ledger_rows_per_s": round(ROWS / ours["median_s"]),
        "plain_rows_per_s": round(ROWS / plain["median_s"]),
        "ledger_samples_s": ours["samples_s"],
        "plain_samples_s": plain["samples_s"],
    }
    with capsys.disabled():
        print(
            f"\nspark append {ROWS:,} rows: ledger.spark.insert {ours['median_s']:.2f} s, "
            f"df.write.parquet {plain['median_s']:.2f} s (medians of {REPEATS}); "
            f"ratio plain/ledger {ratio} (target >= {APPEND_TARGET}: "
            f"{'met' if ratio >= APPEND_TARGET else 'NOT met'})"
        )

    breakdown = append_breakdown(df, warehouse, tmp_path / "warehouse", phase_samples)
    bench_results["spark_append_breakdown"] = breakdown
    with capsys.disabled():
        print_breakdown(breakdown)


# --- append breakdown (information only) ---------------------------------------------------------


def append_breakdown(
    df: Any, warehouse: ledger.Warehouse, root: Path, phase_samples: dict[str, list[float]]
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from ledger.engines.spark import write as engine
    from ledger.engines.spark.convert import conformed_columns
    from ledger.sql.names import KIND

    # 1. The driver's phases of the measured inserts (medians).
    driver = {
        figure: round(statistics.median(values), 3)
        for figure, values in phase_samples.items()
        if figure != "files"
    }
    driver["total_s"] = round(sum(driver.values()), 3)
    files = int(statistics.median(phase_samples["files"]))

    # 2. What computing the DataFrame alone costs the JVM.
    count_s, counted = timed(df.count)
    assert counted == ROWS

    # 3. The write job's tasks once more, with timers: a replica of ledger.engines.spark.write's
    # _write_task (same chunking, entries and writer) over the same entries DataFrame the insert
    # writes, into a scratch table that is never committed.
    scratch = warehouse.create_table("spark_append_scratch", SCHEMA, primary_key=["k"])
    tx = scratch.transaction()
    try:
        entries = conformed_columns(tx, df, require_keys=True)
        entries = entries.withColumn(DML_TYPE, F.lit(1).cast("tinyint")).withColumn(
            KIND, F.lit(engine.INSERTIONS)
        )
        job = engine.WriteJob(
            store=scratch.store,
            table_prefix=scratch.prefix,
            schema=tx.schema,
            config=tx.config,
            trx_id=tx.trx_id,
            first_seq={},
            first_row={},
            expected={},
        )
        tasks_wall_s, tasks = timed(
            lambda: entries.mapInArrow(
                profiled_write_task(job),
                "partition int, rows long, chunks int, files int, task_s double, "
                "waiting_for_rows_s double, make_entries_s double, writer_write_s double, "
                "of_which_sort_s double",
            ).collect()
        )
    finally:
        tx.abort()
        shutil.rmtree(root / "spark_append_scratch", ignore_errors=True)
    assert sum(t["rows"] for t in tasks) == ROWS

    per_task = [
        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in t.asDict().items()}
        for t in sorted(tasks, key=lambda t: t["partition"])
    ]
    return {
        "note": "information only. driver_phases: medians over the measured inserts; "
        "write_tasks: one extra run of a timed replica of the write job (2 tasks at once on 2 "
        "cores); of_which_sort_s is measured by sorting each chunk a second time, outside "
        "task_s (the writer's own sort is inside writer_write_s)",
        "files_written": files,
        "driver_phases": driver,
        "spark_df_count_s": round(count_s, 3),
        "replica_write_job_wall_s": round(tasks_wall_s, 3),
        "write_tasks": per_task,
        "explain": {
            "schema_check_s": "column and type check on the driver (an extra Spark job only "
            "when a column needs a checked cast; none here)",
            "count_pass_s": "a first Spark job: rows per Spark partition (to number the entries "
            "before writing), NULL keys; computes the whole DataFrame once",
            "write_job_s": "the second Spark job: computes the DataFrame again, ships it to "
            "Python workers as Arrow, builds entries, sorts by key, writes Parquet",
            "commit_s": "the log commit on the driver",
            "spark_df_count_s": "df.count(): about what computing the DataFrame costs the JVM",
            "waiting_for_rows_s": "inside a task: blocked on the next Arrow batch from the JVM "
            "(computing and serialising the rows, and the Python side decoding them)",
            "make_entries_s": "inside a task: ledger.engines.spark.write._chunk_entries (entry "
            "numbers, conform, system columns)",
            "writer_write_s": "inside a task: DataWriter.write (sort by key, Parquet encode on "
            "threads, fsync)",
        },
    }


def profiled_write_task(job: Any) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """A mapInArrow function doing what ``ledger.engines.spark.write._write_task`` does (without the
    count check), timing each part; it yields one row per task. Everything it uses is imported
    inside it, so the closure pickles by value with no reference to this test module."""

    def task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import time as clock

        import pyarrow as arrow
        from pyspark import TaskContext

        from ledger.engines.spark import write as eng
        from ledger.partitioning import PartitionSpec
        from ledger.writer import DataWriter, file_schema

        started = clock.perf_counter()
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        writer = DataWriter(
            job.store,
            job.table_prefix,
            job.schema,
            job.config,
            PartitionSpec.parse(list(job.config.partition_by), job.schema),
        )
        target = file_schema(job.schema, job.config)
        done = {eng.MARKS: 0, eng.INSERTIONS: 0}
        spent = {"wait": 0.0, "entries": 0.0, "write": 0.0, "sort": 0.0}
        rows = chunks = files = 0
        new_rows = 0
        chunk_iter = eng._chunks(batches, eng._TASK_ROWS)
        while True:
            mark = clock.perf_counter()
            chunk = next(chunk_iter, None)
            spent["wait"] += clock.perf_counter() - mark
            if chunk is None:
                break
            mark = clock.perf_counter()
            entries, new_ids = eng._chunk_entries(job, target, partition, chunk, done, new_rows)
            spent["entries"] += clock.perf_counter() - mark
            new_rows += new_ids
            mark = clock.perf_counter()
            markers = writer.write(entries)
            spent["write"] += clock.perf_counter() - mark
            mark = clock.perf_counter()
            for _ in writer._split(entries.select(target.names).cast(target)):
                pass
            spent["sort"] += clock.perf_counter() - mark
            rows += entries.num_rows
            chunks += 1
            files += len(markers)
        yield arrow.RecordBatch.from_pydict(
            {
                "partition": arrow.array([partition], arrow.int32()),
                "rows": arrow.array([rows], arrow.int64()),
                "chunks": arrow.array([chunks], arrow.int32()),
                "files": arrow.array([files], arrow.int32()),
                # Task time without the extra (diagnostic) sort.
                "task_s": [clock.perf_counter() - started - spent["sort"]],
                "waiting_for_rows_s": [spent["wait"]],
                "make_entries_s": [spent["entries"]],
                "writer_write_s": [spent["write"]],
                "of_which_sort_s": [spent["sort"]],
            }
        )

    return task


def print_breakdown(breakdown: dict[str, Any]) -> None:
    d = breakdown["driver_phases"]
    print(
        f"spark append breakdown, driver phases (medians of the measured inserts, "
        f"{d['total_s']:.2f} s): schema check {d['schema_check_s']:.2f} s, count pass "
        f"{d['count_pass_s']:.2f} s, write job {d['write_job_s']:.2f} s, commit "
        f"{d['commit_s']:.2f} s, other {d['other_s']:.2f} s; {breakdown['files_written']} files"
    )
    print(
        f"  df.count() {breakdown['spark_df_count_s']:.2f} s; timed replica of the write job "
        f"{breakdown['replica_write_job_wall_s']:.2f} s wall (with its extra diagnostic sort):"
    )
    for t in breakdown["write_tasks"]:
        rest = t["task_s"] - t["waiting_for_rows_s"] - t["make_entries_s"] - t["writer_write_s"]
        print(
            f"  task {t['partition']}: {t['rows']:,} rows in {t['chunks']} chunk(s), "
            f"{t['files']} files, {t['task_s']:.2f} s = waiting for rows from the JVM "
            f"{t['waiting_for_rows_s']:.2f} s + entries {t['make_entries_s']:.2f} s + writer "
            f"{t['writer_write_s']:.2f} s (its sort alone ~{t['of_which_sort_s']:.2f} s) + rest "
            f"{rest:.2f} s"
        )


# --- visible -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ViewTable:
    """A built table (never changed) and what its visible rows add up to."""

    name: str
    keys: int  # visible rows; their keys are 0..keys-1
    entries: int
    amount_sum: float

    @property
    def key_sum(self) -> int:
        return self.keys * (self.keys - 1) // 2

    @property
    def key_square_sum(self) -> int:
        return (self.keys - 1) * self.keys * (2 * self.keys - 1) // 6


@dataclass(frozen=True)
class ViewInput:
    warehouse: Path
    measured: ViewTable
    warmup: ViewTable  # the same shape, small: runs the same plans once before timing


def _values(n: int, rng: np.random.Generator) -> dict[str, pa.Array]:
    categories = pa.array([f"category-{i}" for i in range(CATEGORIES)], pa.string())
    start = np.datetime64("2024-01-01T00:00:00", "us")
    return {
        "amount": pa.array(np.round(rng.random(n) * 100_000.0, 2)),
        "category": categories.take(pa.array(rng.integers(0, CATEGORIES, n))),
        "booked_at": pa.array(
            start + rng.integers(0, MONTH_US, n).astype("timedelta64[us]"), pa.timestamp("us")
        ),
    }


def build_view_table(warehouse: ledger.Warehouse, name: str, keys: int) -> ViewTable:
    """``keys`` rows with shuffled keys in two commits, then 10% of the keys corrected by
    ``table.update`` (a mark and an insertion each)."""
    rng = np.random.default_rng(20240601 + keys)
    rows = pa.table({"k": pa.array(rng.permutation(keys).astype(np.int64)), **_values(keys, rng)})
    table = warehouse.create_table(name, SCHEMA, primary_key=["k"])
    half = keys // 2
    assert table.insert(rows.slice(0, half)).inserted == half
    assert table.insert(rows.slice(half)).inserted == keys - half
    corrections = keys // 10
    old = rows.take(pa.array(rng.choice(keys, corrections, replace=False)))
    new = pa.table({"k": old.column("k"), **_values(corrections, rng)})
    info = table.update(new)
    assert (info.inserted, info.deleted) == (corrections, corrections)
    entries = keys + 2 * corrections
    assert sum(m.rows for m in table.snapshot().markers()) == entries
    assert table.count() == keys
    amount_sum = (
        pc.sum(rows.column("amount")).as_py()
        - pc.sum(old.column("amount")).as_py()
        + pc.sum(new.column("amount")).as_py()
    )
    return ViewTable(name, keys, entries, amount_sum)


@pytest.fixture(scope="module")
def view_input(
    tmp_path_factory: pytest.TempPathFactory, bench_results: dict[str, Any]
) -> Iterator[ViewInput]:
    root = tmp_path_factory.mktemp("spark_view_speed")
    warehouse = ledger.connect(str(root))
    started = time.perf_counter()
    measured = build_view_table(warehouse, "ledger", VIEW_KEYS)
    build_s = time.perf_counter() - started
    assert measured.entries == VIEW_ENTRIES
    warmup = build_view_table(warehouse, "warmup", VIEW_WARMUP_KEYS)
    markers = warehouse.table("ledger").snapshot().markers()
    bench_results["spark_view_input"] = {
        "entries": VIEW_ENTRIES,
        "delete_marks": VIEW_CORRECTIONS,
        "visible_rows": VIEW_KEYS,
        "commits": warehouse.table("ledger").version,
        "files": len(markers),
        "bytes": sum(m.size for m in markers),
        "build_s": round(build_s, 2),
        "note": "information only: the table both engines read (embedded engine build)",
    }
    yield ViewInput(root, measured, warmup)
    shutil.rmtree(root, ignore_errors=True)


def spark_visible_consumed(spark: Any, snap: Any, expected: ViewTable) -> int:
    """Every visible row and column of ``snap`` through Spark to the noop sink; the answer is
    checked from metrics observed on the way (cheap running sums, no extra job)."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observed = Observation("visible")
    ledger.spark.visible(snap, spark=spark).observe(
        observed,
        F.count(F.lit(1)).alias("rows"),
        F.sum("k").alias("key_sum"),
        F.sum("amount").alias("amount_sum"),
    ).write.format("noop").mode("overwrite").save()
    got = observed.get
    assert got["key_sum"] == expected.key_sum
    assert math.isclose(got["amount_sum"], expected.amount_sum, rel_tol=1e-9)
    return int(got["rows"])


def duckdb_visible_consumed(snap: Any) -> int:
    """Every visible row and column of ``snap`` through DuckDB's Arrow reader, dropped."""
    reader = views.visible(snap).to_arrow_reader(128 * 1024)
    return sum(batch.num_rows for batch in reader)


def test_spark_visible_vs_duckdb(
    spark: Any, view_input: ViewInput, bench_results: dict[str, Any], capsys: Any
) -> None:
    warehouse = ledger.connect(str(view_input.warehouse))
    measured, warmup = view_input.measured, view_input.warmup
    snap = warehouse.table(measured.name).snapshot()

    # DuckDB's answer, checked in full once (untimed; it also brings the files into the page
    # cache for both engines). The keys are 0..keys-1, each once: count, sum and sum of squares
    # say so. Spark's answer is checked on every timed run.
    square = "CAST(k AS DECIMAL(20, 0)) * CAST(k AS DECIMAL(20, 0))"  # no BIGINT overflow
    [(count, key_sum, square_sum, amount_sum)] = (
        views.visible(snap).aggregate(f"count(*), sum(k), sum({square}), sum(amount)").fetchall()
    )
    assert (count, key_sum, square_sum) == (VIEW_KEYS, measured.key_sum, measured.key_square_sum)
    assert math.isclose(amount_sum, measured.amount_sum, rel_tol=1e-9)

    # Warm-up, not counted: the same plans on the small table (Spark compiles its code once).
    warm_snap = warehouse.table(warmup.name).snapshot()
    assert spark_visible_consumed(spark, warm_snap, warmup) == warmup.keys
    assert duckdb_visible_consumed(warm_snap) == warmup.keys

    runners: list[tuple[str, Callable[[], int]]] = [
        ("spark", lambda: spark_visible_consumed(spark, snap, measured)),
        ("duckdb", lambda: duckdb_visible_consumed(snap)),
    ]
    samples: dict[str, list[float]] = {"spark": [], "duckdb": []}
    for repetition in range(REPEATS):
        for name, action in runners if repetition % 2 == 0 else runners[::-1]:
            elapsed, rows = timed(action)
            assert rows == VIEW_KEYS
            samples[name].append(elapsed)

    ours, duck = summary(samples["spark"]), summary(samples["duckdb"])
    ratio = ratio_of(ours["median_s"], duck["median_s"])
    paired = [s / d for s, d in zip(samples["spark"], samples["duckdb"], strict=True)]
    bench_results["spark_visible_vs_duckdb"] = {
        "entries": VIEW_ENTRIES,
        "delete_marks": VIEW_CORRECTIONS,
        "visible_rows": VIEW_KEYS,
        "spark_partitions_read": ledger.spark.read(snap, spark=spark).rdd.getNumPartitions(),
        "repeats": REPEATS,
        "consumed": "every visible row and column (Spark: noop write; DuckDB: Arrow reader)",
        "spark_s": ours["median_s"],
        "duckdb_s": duck["median_s"],
        "ratio": ratio,
        "ratio_is": "spark_s / duckdb_s",
        "target": "none (reported only)",
        "ratio_paired_median": round(statistics.median(paired), 3),
        "spark_samples_s": ours["samples_s"],
        "duckdb_samples_s": duck["samples_s"],
    }
    with capsys.disabled():
        print(
            f"\nspark vs duckdb views.visible, {VIEW_ENTRIES:,} entries, {VIEW_KEYS:,} visible, "
            f"every row and column consumed: spark {ours['median_s']:.2f} s, duckdb "
            f"{duck['median_s']:.2f} s (medians of {REPEATS}); ratio spark/duckdb {ratio} "
            "(no target)"
        )
