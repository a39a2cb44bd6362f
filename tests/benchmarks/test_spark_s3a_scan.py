"""Spark scanning a ledger on S3: Spark's own Parquet reader through Hadoop's S3A connector
(``reader="s3a"``) against pyarrow inside the executors (``reader="pyarrow"``), same table, same
session, same endpoint.

The table: ``S3A_ROWS`` entries (``LEDGER_BENCH_S3A_ROWS``, default 10M) with distinct BIGINT keys,
a DOUBLE with two decimals and a VARCHAR of 12 values, inserted by the embedded engine in 1M-row
commits into a warehouse on the test S3 endpoint (moto's server on 127.0.0.1, out of process).
Each timed run is ``ledger.spark.read(table, reader=...)`` with every row and column sent to
Spark's noop sink; the row count and key sum are observed on the way and checked. One untimed
run of each reader first, then medians of ``LEDGER_BENCH_REPEATS`` (default 3) runs, the readers
in alternating order. ratio = pyarrow_s / s3a_s (no target: reported only). The endpoint is a
Python server sharing the machine's two cores with Spark, so the figures say more about the
readers' CPU cost than about S3's bandwidth.
"""

from __future__ import annotations

import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import ledger
import ledger.spark
from tests.benchmarks.timing import env_int, repeats, summary, timed
from tests.support.s3server import BUCKET, S3Endpoint
from tests.support.spark_s3a import require_s3a

S3A_ROWS = env_int("LEDGER_BENCH_S3A_ROWS", 10_000_000)
CHUNK_ROWS = 1_000_000
REPEATS = repeats(3)
SCHEMA = {"k": "BIGINT", "amount": "DOUBLE", "category": "VARCHAR"}

pytestmark = pytest.mark.timeout(3600)


def build_table(endpoint: S3Endpoint) -> ledger.Table:
    warehouse = ledger.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}", **endpoint.options())
    table = warehouse.create_table("entries", SCHEMA, primary_key="k")
    rng = np.random.default_rng(16)
    categories = pa.array([f"category-{i}" for i in range(12)])
    for start in range(0, S3A_ROWS, CHUNK_ROWS):
        n = min(CHUNK_ROWS, S3A_ROWS - start)
        chunk = pa.table(
            {
                "k": pa.array(np.arange(start, start + n, dtype=np.int64)),
                "amount": pa.array(np.round(rng.random(n) * 10_000, 2)),
                "category": categories.take(pa.array(rng.integers(0, 12, n))),
            }
        )
        assert table.insert(chunk).inserted == n
    return table


def scanned(table: ledger.Table, spark: Any, reader: str) -> tuple[int, int]:
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observed = Observation(f"scan_{reader}")
    ledger.spark.read(table, spark=spark, reader=reader).observe(
        observed, F.count(F.lit(1)).alias("rows"), F.sum("k").alias("key_sum")
    ).write.format("noop").mode("overwrite").save()
    got = observed.get
    return int(got["rows"]), int(got["key_sum"])


def test_spark_scan_of_s3_through_s3a_vs_pyarrow(
    spark: Any, s3_endpoint: S3Endpoint, bench_results: dict[str, Any], capsys: Any
) -> None:
    require_s3a(spark)
    build_s, table = timed(lambda: build_table(s3_endpoint))
    expected = (S3A_ROWS, S3A_ROWS * (S3A_ROWS - 1) // 2)
    readers = ["s3a", "pyarrow"]
    for reader in readers:  # untimed: starts workers, compiles plans
        assert scanned(table, spark, reader) == expected
    samples: dict[str, list[float]] = {reader: [] for reader in readers}
    for repetition in range(REPEATS):
        for reader in readers if repetition % 2 == 0 else readers[::-1]:
            elapsed, got = timed(lambda reader=reader: scanned(table, spark, reader))
            assert got == expected, reader
            samples[reader].append(elapsed)

    s3a, pyarrow = summary(samples["s3a"]), summary(samples["pyarrow"])
    ratio = round(pyarrow["median_s"] / s3a["median_s"], 3)
    bench_results["spark_s3_scan_s3a_vs_pyarrow"] = {
        "entries": S3A_ROWS,
        "files": len(table.files()),
        "bytes": sum(m.size for m in table.snapshot().markers()),
        "build_s": round(build_s, 2),
        "repeats": REPEATS,
        "scan": {
            "ratio": ratio,
            "target": "none (reported only)",
            "comparison": "reader='pyarrow' (pyarrow in the executors), same table and session",
            "value_s": s3a["median_s"],
            "baseline_s": pyarrow["median_s"],
        },
        "s3a_samples_s": s3a["samples_s"],
        "pyarrow_samples_s": pyarrow["samples_s"],
    }
    with capsys.disabled():
        print(
            f"\nspark scan of {S3A_ROWS:,} entries on S3 (moto): S3A {s3a['median_s']:.2f} s, "
            f"pyarrow in executors {pyarrow['median_s']:.2f} s (medians of {REPEATS}); "
            f"ratio pyarrow/s3a {ratio} (no target)"
        )
