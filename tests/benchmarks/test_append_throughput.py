"""Append throughput: ``table.insert(pyarrow_table)`` of 1M rows x 6 columns into a local
warehouse, against plain ``pyarrow.parquet.write_table`` of the same data (snappy) in the same run.

``test_append_list_of_dicts``: 1M rows as Python dicts inserted in batches of 100k, partitioned
by ``bucket(16, user_id)`` and not, on local disk and on S3 (moto, in a process of its own),
against ``pa.Table.from_pylist`` + ``pq.write_table`` of the same batches to the same store; for
the partitioned layout against ``pa.Table.from_pylist`` + pyarrow's own partitioned
``write_dataset`` of as many files (the one-file write is kept beside it as a diagnostic). The
writers take turns in a rotating order and start from a settled disk (see ``_dict_appends``).

ratio_throughput = raw_time / ledger_time (1.0 means the ledger writes as fast as bare pyarrow;
target >= 0.8). Raw, primary-key and no-primary-key writes are interleaved within each repetition
so that noise from the shared machine hits all of them alike.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

import ledger
from ledger.writer import ROW_GROUP_ROWS
from tests.benchmarks.timing import REPEATS, env_int, repeats, summary, timed
from tests.support.s3server import BUCKET

ROWS = env_int("LEDGER_BENCH_ROWS", 1_000_000)
SCHEMA = {
    "id": "BIGINT",
    "account": "BIGINT",
    "quantity": "INTEGER",
    "price": "DOUBLE",
    "note": "VARCHAR",
    "booked_at": "TIMESTAMP",
}
TARGET = ">= 0.8"

pytestmark = pytest.mark.timeout(1200)


def make_rows(n: int) -> pa.Table:
    """n rows in the table's exact Arrow types (so no cast is measured): an increasing BIGINT key,
    a BIGINT and an INTEGER of moderate cardinality, a DOUBLE, a VARCHAR of 5,000 distinct values
    and a TIMESTAMP spread over a month."""
    rng = np.random.default_rng(20240101)
    notes = pa.array([f"note-{i:05d}-{'x' * (i % 17)}" for i in range(5_000)], pa.string())
    start = np.datetime64("2024-01-01T00:00:00", "us")
    month_us = 30 * 86_400 * 1_000_000
    return pa.table(
        {
            "id": pa.array(np.arange(n, dtype=np.int64)),
            "account": pa.array(rng.integers(0, 10_000, n, dtype=np.int64)),
            "quantity": pa.array(rng.integers(-1_000, 1_000, n, dtype=np.int32)),
            "price": pa.array(rng.random(n) * 100.0),
            "note": notes.take(pa.array(rng.integers(0, len(notes), n))),
            "booked_at": pa.array(
                start + rng.integers(0, month_us, n).astype("timedelta64[us]"), pa.timestamp("us")
            ),
        }
    )


def _check_ledger_write(table: ledger.Table, info: ledger.CommitInfo, rows: pa.Table) -> None:
    assert info.version == 1
    assert info.inserted == rows.num_rows
    assert table.count() == rows.num_rows  # from the log alone
    [(count, id_sum)] = table.scan().aggregate("count(*), sum(id)").fetchall()  # the data
    assert count == rows.num_rows
    assert id_sum == rows.num_rows * (rows.num_rows - 1) // 2


def _ratio(raw: dict[str, Any], ledger_figures: dict[str, Any]) -> float:
    return round(raw["median_s"] / ledger_figures["median_s"], 3)


def test_append_1m_rows(tmp_path: Path, bench_results: dict[str, Any]) -> None:
    rows = make_rows(ROWS)
    assert rows.num_rows == ROWS and rows.num_columns == 6
    root = tmp_path / "append"
    warehouse = ledger.connect(str(root / "warehouse"))
    raw_dir = root / "raw"
    raw_dir.mkdir(parents=True)

    samples: dict[str, list[float]] = {
        "raw": [],
        "raw_same_row_groups": [],
        "keyed": [],
        "unkeyed": [],
    }

    def write_raw(path: Path, **options: Any) -> float:
        elapsed, _ = timed(lambda: pq.write_table(rows, path, compression="snappy", **options))
        assert pq.read_metadata(path).num_rows == ROWS
        path.unlink()
        return elapsed

    def write_ledger(name: str, primary_key: list[str] | None) -> float:
        table = warehouse.create_table(name, SCHEMA, primary_key=primary_key)
        elapsed, info = timed(lambda: table.insert(rows))
        _check_ledger_write(table, info, rows)
        shutil.rmtree(root / "warehouse" / name)  # keep the disk (and page cache) small
        return elapsed

    # Repetition 0 warms caches and imports (DuckDB, the writer) and is not counted.
    for repetition in range(REPEATS + 1):
        measured = {
            "raw": write_raw(raw_dir / f"raw-{repetition}.parquet"),
            "keyed": write_ledger(f"keyed_{repetition}", ["id"]),
            "raw_same_row_groups": write_raw(
                raw_dir / f"raw-rg-{repetition}.parquet", row_group_size=ROW_GROUP_ROWS
            ),
            "unkeyed": write_ledger(f"unkeyed_{repetition}", None),
        }
        if repetition:
            for name, seconds in measured.items():
                samples[name].append(seconds)

    raw = summary(samples["raw"])
    for result_name, sample_name in (
        ("append_1m_rows_x6", "keyed"),
        ("append_1m_rows_x6_no_primary_key", "unkeyed"),
    ):
        figures = summary(samples[sample_name])
        bench_results[result_name] = {
            "rows": ROWS,
            "columns": 6,
            "repeats": REPEATS,
            "ledger_s": figures["median_s"],
            "raw_pyarrow_s": raw["median_s"],
            "ratio_throughput": _ratio(raw, figures),
            "target": TARGET,
            # The report's figure (tests/benchmarks/report.py): the same ratio, named.
            "ratio": _ratio(raw, figures),
            "comparison": "pyarrow.parquet.write_table of the same Arrow table",
            "value_s": figures["median_s"],
            "baseline_s": raw["median_s"],
            "ledger_rows_per_s": round(ROWS / figures["median_s"]),
            "raw_rows_per_s": round(ROWS / raw["median_s"]),
            "ledger_samples_s": figures["samples_s"],
            "raw_samples_s": raw["samples_s"],
        }
    same_groups = summary(samples["raw_same_row_groups"])
    bench_results["append_diagnostics"] = {
        "note": (
            "raw pyarrow.parquet.write_table with the writer's row_group_size "
            f"(ledger.writer.ROW_GROUP_ROWS = {ROW_GROUP_ROWS}) instead of pyarrow's default"
        ),
        "raw_pyarrow_same_row_groups_s": same_groups["median_s"],
        "ratio_raw_default_vs_same_row_groups": _ratio(raw, same_groups),
        "samples_s": same_groups["samples_s"],
    }


# --- lists of dicts ------------------------------------------------------------------------------

DICT_ROWS = env_int("LEDGER_BENCH_DICT_ROWS", 1_000_000)
DICT_BATCH_ROWS = env_int("LEDGER_BENCH_DICT_BATCH_ROWS", 100_000)
DICT_REPEATS = repeats(3)
DICT_SCHEMA = {
    "id": "BIGINT",
    "user_id": "BIGINT",
    "kind": "VARCHAR",
    "amount": "DOUBLE",
    "quantity": "BIGINT",
    "note": "VARCHAR",
}
DICT_COMPARISON = "pa.Table.from_pylist + pq.write_table of the same batches to the same store"
DICT_PARTITIONED_COMPARISON = (
    "pa.Table.from_pylist + pyarrow.dataset.write_dataset of the same batches into 16 hive "
    "partitions (user_id % 16) of the same store"
)


def make_dict_batches(rows: int, batch_rows: int) -> list[list[dict[str, Any]]]:
    """Event-like rows as Python dicts: an increasing id, 10,000 users, a short kind, an amount
    with two decimals, a small count and a unicode note."""
    rng = np.random.default_rng(20240102)
    kinds = ["view", "click", "buy", "refund", "søk"]
    batches = []
    for start in range(0, rows, batch_rows):
        n = min(batch_rows, rows - start)
        users = rng.integers(0, 10_000, n).tolist()
        cents = rng.integers(0, 1_000_000, n).tolist()
        batches.append(
            [
                {
                    "id": start + i,
                    "user_id": user,
                    "kind": kinds[user % 5],
                    "amount": cent / 100,
                    "quantity": cent % 9,
                    "note": f"ü-{user % 97}",
                }
                for i, (user, cent) in enumerate(zip(users, cents, strict=True))
            ]
        )
    return batches


def _raw_one_file_write(store: Any, batch: list[dict[str, Any]], path: str) -> None:
    """from_pylist, then one Parquet file of the batch: what bare pyarrow pays for the rows.

    Compressed and cut into row groups as the ledger's files are (snappy, at most
    ``ROW_GROUP_ROWS`` rows a group), so neither side writes fewer, larger groups whatever the
    batch size; the rest is pyarrow's defaults."""
    pq.write_table(
        pa.Table.from_pylist(batch),
        path,
        filesystem=store.filesystem,
        compression="snappy",
        row_group_size=ROW_GROUP_ROWS,
    )


def _raw_partitioned_write(store: Any, batch: list[dict[str, Any]], folder: str) -> None:
    """from_pylist, then pyarrow's own partitioned write of the batch into 16 files (one per
    ``user_id % 16``, hive folders): what bare pyarrow pays for as many files as the ledger's
    bucket(16, user_id) layout writes."""
    table = pa.Table.from_pylist(batch)
    table = table.append_column("bucket", pc.bit_wise_and(table.column("user_id"), 15))
    local = store.local_path("") is not None
    ds.write_dataset(
        table,
        folder,
        format="parquet",
        filesystem=store.filesystem,
        partitioning=ds.partitioning(pa.schema([("bucket", pa.int64())]), flavor="hive"),
        basename_template=f"{uuid.uuid4().hex}-{{i}}.parquet",
        existing_data_behavior="overwrite_or_ignore",
        file_options=ds.ParquetFileFormat().make_write_options(compression="snappy"),
        max_rows_per_group=ROW_GROUP_ROWS,  # as the ledger's files (see _raw_one_file_write)
        create_dir=local,  # S3 has no folders: no marker objects
    )


def _timed_with_cpu(action: Callable[[], Any]) -> tuple[float, float, Any]:
    """Run ``action`` once; return its wall seconds, the CPU seconds this process spent meanwhile
    (every thread: the ledger's upload threads and pyarrow's alike) and its result.

    On a machine shared with other work the wall time mostly says how often the process got a
    core; the CPU time says what each writer asked of one, whatever the load (moto's server
    runs in a process of its own, so its CPU is not counted)."""
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    result = action()
    return time.perf_counter() - wall_start, time.process_time() - cpu_start, result


def _settle_disk(store: Any) -> None:
    """Before each timed write to local disk, write out whatever is still pending (untimed).

    Bare pyarrow leaves its bytes in the page cache while the ledger fsyncs its files before
    the commit points at them. Left pending, the earlier writes (the raw ones, an earlier
    layout's, anything else on the machine) reach the disk some 30 s later, in the middle of
    whichever write runs then, and an fsync waits behind them: the same 16 files took 8 ms to
    sync on a quiet disk and over 100 ms behind such a flush. Settling before every timed write,
    whichever side it is, starts both sides from the same quiet disk."""
    if store.local_path("") is not None:
        os.sync()


def _dict_appends(
    warehouse: ledger.Warehouse,
    batches: list[list[dict[str, Any]]],
    partition_by: str | None,
    label: str,
) -> dict[str, Any]:
    """Median seconds of writing every batch through ``table.insert`` and through bare
    pyarrow into the same store: from_pylist + write_table of one file, and for a partitioned
    table from_pylist + pyarrow's own partitioned write of as many files (the baseline of the
    partitioned figure; the one-file write is kept beside it as a diagnostic).

    The writers take turns batch by batch, in an order that rotates from one batch to the next,
    so whatever one leaves behind (freed memory in Arrow's pool, warm threads, pending disk
    writes) falls on each of them alike; the disk is settled before every timed write (see
    :func:`_settle_disk`)."""
    store = warehouse.store
    raw_prefix = f"raw-{label}/"
    local_folder = store.local_path(raw_prefix)
    if local_folder is not None:
        store.filesystem.create_dir(local_folder, recursive=True)
    names = ["ledger", "raw", *(["raw_partitioned"] if partition_by is not None else [])]
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu_samples: dict[str, list[float]] = {name: [] for name in names}
    turn = 0
    for repetition in range(DICT_REPEATS + 1):  # repetition 0 warms up, not counted
        table = warehouse.create_table(
            f"{label}_{repetition}", DICT_SCHEMA, primary_key="id", partition_by=partition_by
        )
        totals = dict.fromkeys(names, 0.0)
        cpu_totals = dict.fromkeys(names, 0.0)
        for number, batch in enumerate(batches):
            one_file = store.fs_path(f"{raw_prefix}{repetition}-{number}.parquet")
            partitioned = store.fs_path(f"{raw_prefix}partitioned-{repetition}")
            writes: dict[str, Callable[[], Any]] = {
                "ledger": partial(table.insert, batch),
                "raw": partial(_raw_one_file_write, store, batch, one_file),
                "raw_partitioned": partial(_raw_partitioned_write, store, batch, partitioned),
            }
            turn += 1
            for name in names[turn % len(names) :] + names[: turn % len(names)]:
                _settle_disk(store)
                elapsed, cpu, result = _timed_with_cpu(writes[name])
                if name == "ledger":
                    assert result.inserted == len(batch)
                totals[name] += elapsed
                cpu_totals[name] += cpu
        total = sum(len(b) for b in batches)
        assert table.count() == total
        [(count, id_sum)] = table.scan().aggregate("count(*), sum(id)").fetchall()
        assert (count, id_sum) == (total, total * (total - 1) // 2)
        if repetition:
            for name in names:
                samples[name].append(totals[name])
                cpu_samples[name].append(cpu_totals[name])
        warehouse.drop_table(table.name, purge=True)
    ledger_figures, raw_figures = summary(samples["ledger"]), summary(samples["raw"])
    rows = sum(len(b) for b in batches)
    baseline, comparison, diagnostics = raw_figures, DICT_COMPARISON, {}
    baseline_name = "raw" if partition_by is None else "raw_partitioned"
    if partition_by is not None:
        baseline, comparison = summary(samples["raw_partitioned"]), DICT_PARTITIONED_COMPARISON
        diagnostics = {
            "raw_one_file_s": raw_figures["median_s"],
            "raw_one_file_comparison": DICT_COMPARISON,
            "ratio_vs_raw_one_file": round(raw_figures["median_s"] / ledger_figures["median_s"], 3),
            "raw_one_file_samples_s": raw_figures["samples_s"],
        }
    return {
        "ratio": round(baseline["median_s"] / ledger_figures["median_s"], 3),
        "target": TARGET,
        "comparison": comparison,
        "value_s": ledger_figures["median_s"],
        "baseline_s": baseline["median_s"],
        "rows": rows,
        "batch_rows": DICT_BATCH_ROWS,
        "ledger_rows_per_s": round(rows / ledger_figures["median_s"]),
        "raw_rows_per_s": round(rows / baseline["median_s"]),
        "ledger_samples_s": ledger_figures["samples_s"],
        "raw_samples_s": baseline["samples_s"],
        **_cpu_diagnostics(cpu_samples["ledger"], cpu_samples[baseline_name]),
        **diagnostics,
    }


def _cpu_diagnostics(ledger_cpu: list[float], baseline_cpu: list[float]) -> dict[str, Any]:
    """The CPU seconds of both writers (medians over the repetitions) and their ratio, beside the
    wall-time figure: a ratio of CPU near 1.0 under a wall-time ratio well below it says the
    difference was waiting (requests, a loaded machine), not work."""
    ledger_median, baseline_median = (
        summary(ledger_cpu)["median_s"],
        summary(baseline_cpu)["median_s"],
    )
    return {
        "ledger_cpu_s": ledger_median,
        "raw_cpu_s": baseline_median,
        "cpu_ratio": round(baseline_median / ledger_median, 3) if ledger_median else None,
    }


@pytest.mark.parametrize("backend", ["local", "s3"])
def test_append_list_of_dicts(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, bench_results: dict[str, Any]
) -> None:
    if backend == "local":
        warehouse = ledger.connect(str(tmp_path / "warehouse"))
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        warehouse = ledger.connect(f"s3://{BUCKET}/{uuid.uuid4().hex}", **endpoint.options())
    batches = make_dict_batches(DICT_ROWS, DICT_BATCH_ROWS)
    figures = {
        layout: _dict_appends(warehouse, batches, partition_by, f"{layout}_{backend}")
        for layout, partition_by in (
            ("unpartitioned", None),
            ("bucket_16_user_id", "bucket(16, user_id)"),
        )
    }
    bench_results[f"append_list_of_dicts_{backend}"] = figures


REQUEST_BATCHES = 3


def _requests_by_kind(requests: list[tuple[str, str]]) -> dict[str, int]:
    """Requests counted by what they touch: data files, the log, trx_id reservations, listings."""
    kinds: dict[str, int] = {}
    for method, path in requests:
        if path.endswith(".parquet"):
            kind = f"{method} data file"
        elif "/_log/" in path:
            kind = f"{method} log"
        elif "/_trx/" in path:
            kind = f"{method} reservation"
        else:
            kind = f"{method} {'listing' if method == 'GET' else 'other'}"
        kinds[kind] = kinds.get(kind, 0) + 1
    return dict(sorted(kinds.items()))


def test_append_list_of_dicts_requests_on_s3(
    counting_server: Any, bench_results: dict[str, Any]
) -> None:
    """Storage requests per 100k-row commit of a list of dicts on S3, ours against bare pyarrow
    writing the same batch (one file, and 16 partitions for the partitioned layout), counted at
    the server: a diagnostic beside ``append_list_of_dicts_s3``, each request costing the server
    a few milliseconds."""
    assert counting_server.endpoint is not None
    warehouse = ledger.connect(
        f"s3://{BUCKET}/{uuid.uuid4().hex}", **counting_server.endpoint.options()
    )
    store = warehouse.store
    batches = make_dict_batches(DICT_BATCH_ROWS * (REQUEST_BATCHES + 1), DICT_BATCH_ROWS)
    figures: dict[str, Any] = {}
    for layout, partition_by in (
        ("unpartitioned", None),
        ("bucket_16_user_id", "bucket(16, user_id)"),
    ):
        table = warehouse.create_table(
            f"requests_{layout}", DICT_SCHEMA, primary_key="id", partition_by=partition_by
        )
        table.insert(batches[0])  # the store's one-time probe of conditional writes, caches
        ours: list[list[tuple[str, str]]] = []
        raw: list[list[tuple[str, str]]] = []
        for number, batch in enumerate(batches[1:]):
            counting_server.taken()
            assert table.insert(batch).inserted == len(batch)
            ours.append(counting_server.taken())
            if partition_by is None:
                path = store.fs_path(f"raw-requests/{number}.parquet")
                _raw_one_file_write(store, batch, path)
            else:
                folder = store.fs_path(f"raw-requests/partitioned-{number}")
                _raw_partitioned_write(store, batch, folder)
            raw.append(counting_server.taken())
        assert table.count() == DICT_BATCH_ROWS * (REQUEST_BATCHES + 1)
        figures[layout] = {
            "rows_per_commit": DICT_BATCH_ROWS,
            "commits": REQUEST_BATCHES,
            "ledger_requests_per_commit": [len(r) for r in ours],
            "raw_requests_per_batch": [len(r) for r in raw],
            "ledger_by_kind": _requests_by_kind(ours[-1]),
            "raw_by_kind": _requests_by_kind(raw[-1]),
            "raw": (
                "pyarrow.dataset.write_dataset into 16 hive partitions"
                if partition_by
                else "pq.write_table of one file"
            ),
        }
    bench_results["append_list_of_dicts_s3_requests"] = figures
