"""Buffered ingestion: 100k single-row ``writer.write`` calls from 8 threads, against one
``table.insert`` of the same rows (a list of dicts) in the same run: rows of plain values
(text, integers, floats), rows with a DECIMAL(12,2) column of ``Decimal`` values, and rows with a
TIMESTAMPTZ column of ``datetime`` values with a zone.

ratio = insert_time / writer_time (1.0: as fast as handing every row over at once; target
>= 0.25). Also recorded: the data files and commits each way made, the point of buffering (one
commit per row would make 100k files), and the CPU time of the process each way took (all its
threads), which a loaded machine inflates less than the wall time.
"""

from __future__ import annotations

import datetime as dt
import shutil
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import ledger
from tests.benchmarks.timing import env_int, repeats, summary, timed

ROWS = env_int("LEDGER_BENCH_WRITER_ROWS", 100_000)
THREADS = 8
REPEATS = repeats(3)
TARGET = ">= 0.25"
SCHEMA = {"event_id": "BIGINT", "user": "VARCHAR", "kind": "VARCHAR", "amount": "DOUBLE"}
DECIMAL_SCHEMA = {**SCHEMA, "amount": "DECIMAL(12,2)"}
TIMESTAMPTZ_SCHEMA = {**SCHEMA, "at": "TIMESTAMPTZ"}
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

pytestmark = pytest.mark.timeout(1800)


def make_rows(n: int) -> list[dict[str, Any]]:
    return [
        {
            "event_id": i,
            "user": f"user-{i % 997}",
            "kind": ("view", "click", "buy")[i % 3],
            "amount": round(i % 10_000 * 0.01, 2),
        }
        for i in range(n)
    ]


def make_decimal_rows(n: int) -> list[dict[str, Any]]:
    return [{**row, "amount": Decimal(row["event_id"] % 10_000).scaleb(-2)} for row in make_rows(n)]


def make_timestamptz_rows(n: int) -> list[dict[str, Any]]:
    return [{**row, "at": START + dt.timedelta(seconds=row["event_id"])} for row in make_rows(n)]


# Figure name -> (table schema, rows); the plain figure keeps its name from before the others.
WORKLOADS = {
    "buffered_writer_100k_single_rows_8_threads": (SCHEMA, make_rows),
    "buffered_writer_100k_decimal_rows_8_threads": (DECIMAL_SCHEMA, make_decimal_rows),
    "buffered_writer_100k_timestamptz_rows_8_threads": (TIMESTAMPTZ_SCHEMA, make_timestamptz_rows),
}


def _write_with_threads(table: ledger.Table, rows: list[dict[str, Any]]) -> int:
    """Every row its own write() call, spread over THREADS threads; returns rows committed."""
    with table.writer() as writer:

        def write_share(first: int) -> None:
            for row in rows[first::THREADS]:
                writer.write(row)

        workers = [threading.Thread(target=write_share, args=(t,)) for t in range(THREADS)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    return writer.committed_rows


def _check(table: ledger.Table, rows: list[dict[str, Any]]) -> tuple[int, int]:
    """The table holds every row once; return (data files, commits)."""
    table.refresh()
    assert table.count() == len(rows)
    [(count, distinct, id_sum)] = (
        table.scan().aggregate("count(*), count(DISTINCT event_id), sum(event_id)").fetchall()
    )
    assert count == distinct == len(rows)
    assert id_sum == len(rows) * (len(rows) - 1) // 2
    commits = [c for c in table.history() if c.operation == "insert"]
    return len(table.files()), len(commits)


@pytest.mark.parametrize("figure", list(WORKLOADS))
def test_buffered_writer_against_one_insert(
    tmp_path: Path, bench_results: dict[str, Any], figure: str
) -> None:
    schema, make = WORKLOADS[figure]
    rows = make(ROWS)
    root = tmp_path / "warehouse"
    warehouse = ledger.connect(str(root))
    samples: dict[str, list[float]] = {"writer": [], "insert": []}
    cpu: dict[str, list[float]] = {"writer": [], "insert": []}
    layout: dict[str, tuple[int, int]] = {}
    # Repetition 0 warms imports and caches and is not counted.
    for repetition in range(REPEATS + 1):
        for way in ("insert", "writer"):
            name = f"{way}_{repetition}"
            table = warehouse.create_table(name, schema, primary_key="event_id")
            cpu_start = time.process_time()
            if way == "insert":
                elapsed, _ = timed(lambda t=table: t.insert(rows))
            else:
                elapsed, committed = timed(lambda t=table: _write_with_threads(t, rows))
                assert committed == len(rows)
            cpu_used = time.process_time() - cpu_start
            layout[way] = _check(table, rows)
            warehouse.drop_table(name)
            shutil.rmtree(root / name, ignore_errors=True)
            if repetition:
                samples[way].append(elapsed)
                cpu[way].append(cpu_used)
    writer, insert = summary(samples["writer"]), summary(samples["insert"])
    bench_results[figure] = {
        "rows": ROWS,
        "threads": THREADS,
        "repeats": REPEATS,
        "throughput": {
            "ratio": round(insert["median_s"] / writer["median_s"], 3),
            "target": TARGET,
            "comparison": "one table.insert of the same rows as a list of dicts",
            "value_s": writer["median_s"],
            "baseline_s": insert["median_s"],
        },
        "writer_rows_per_s": round(ROWS / writer["median_s"]),
        "writer_data_files": layout["writer"][0],
        "writer_commits": layout["writer"][1],
        "insert_data_files": layout["insert"][0],
        "insert_commits": layout["insert"][1],
        "writer_cpu_s": summary(cpu["writer"])["median_s"],
        "insert_cpu_s": summary(cpu["insert"])["median_s"],
        "writer_samples_s": writer["samples_s"],
        "insert_samples_s": insert["samples_s"],
    }
