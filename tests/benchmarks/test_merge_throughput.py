"""Merge throughput: a full merge (``table.merge(min_files=1)``) of one 10M-entry partition of a
collapsing table, 10% of whose entries are delete marks, against a plain DuckDB
``COPY (SELECT * FROM read_parquet([...]) ORDER BY k, trx_id, trx_seq) TO ...`` of the same files
in the same run.

Like with like: the baseline writes what the merge writes, in the same way. The same sort (the
table's sort order, ``NULLS LAST`` as the merge sorts), the same compression (snappy), the same
row group size (the merge's, ``merging.copy_row_group_rows()``), one output file, on a DuckDB
connection opened inside its timed span as the merge opens its own (a merge of a store this
process has not read before opens the store's database). What differs is the merge's own work:
its policy query, reading back the written file's key and system columns for the checks and the
marker, its fsync and its log commit; it writes fewer entries (the marks and what they cancel
are dropped), the baseline all of them.

ratio_throughput = baseline_time / merge_time (1.0 means the merge rewrites entries as fast as a
bare sorted copy; target >= 0.7). Throughputs count *input* entries per second. ratio_cpu is
the same ratio of the process's CPU seconds (every thread), which other tenants of a shared
machine disturb less than wall time, and ratio_paired_median the median of the per-repetition
ratios (the two ran back to back): information only.

The table is built once: 9M insertions of shuffled keys over several commits (so several files
whose key ranges overlap), then 1M delete marks carrying the values of existing rows, so each one
cancels an insertion and the merge must drop 2M entries. The built folder stays pristine; every
repetition merges a fresh copy of it (the copy and the open are not timed). The merge and the
copy are interleaved within each repetition, with dirty pages flushed before each, so that noise
from the shared machine hits both alike. The merge's time includes its fsync of the new file and
its log commit (see ``merge_breakdown``); the COPY's has neither.

Repetition 0 warms caches and imports and is not counted; ``LEDGER_BENCH_REPEATS`` more follow
(a full run takes 2-3 minutes; ``LEDGER_BENCH_MERGE_ENTRIES`` shrinks the table). After them, one
instrumented merge and a few single queries split the time into phases (``merge_breakdown``):
information only, never asserted.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import ledger
import ledger.writer
from ledger.engines.duckdb import rewrite
from ledger.engines.duckdb.session import connect
from ledger.maintenance import merge as merging
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql import ident
from ledger.sql.names import ENTRIES as ENTRIES_RELATION
from ledger.sql.names import ENTRIES_OF_INSERTION_FILES, ENTRIES_OF_MARK_FILES
from ledger.writer import file_schema, sort_columns
from merge_policies import load_policy
from merge_policies.base import MergeContext
from tests.benchmarks.builders import SCHEMA, keyed_rows, slices
from tests.benchmarks.timing import REPEATS, env_int, summary, timed

ENTRIES = env_int("LEDGER_BENCH_MERGE_ENTRIES", 10_000_000)
MARKS = ENTRIES // 10
INSERTS = ENTRIES - MARKS
INSERT_COMMITS = 6
MARK_COMMITS = 2
NAME = "ledger"
TARGET_RATIO = 0.7
TARGET = f">= {TARGET_RATIO}"

pytestmark = pytest.mark.timeout(3600)


@dataclass(frozen=True)
class MergeInput:
    """A built table that is never merged, and what a correct full merge of it returns."""

    warehouse: Path
    files: list[str]  # its data files, absolute local paths
    input_bytes: int
    surviving_key_sum: int  # sum of k over the insertions no delete mark cancels


@pytest.fixture(scope="module")
def merge_input(
    tmp_path_factory: pytest.TempPathFactory, bench_results: dict[str, Any]
) -> Iterator[MergeInput]:
    root = tmp_path_factory.mktemp("merge_throughput")
    warehouse = root / "pristine"
    started = time.perf_counter()
    table = ledger.connect(str(warehouse)).create_table(
        NAME, SCHEMA, primary_key=["k"], policy="collapsing"
    )
    rows = keyed_rows(INSERTS, seed=20240301)
    for offset, length in slices(INSERTS, INSERT_COMMITS):
        assert table.insert(rows.slice(offset, length)).inserted == length
    # Each mark carries the values of one distinct insertion, so it cancels exactly that one.
    marked = np.random.default_rng(7).choice(INSERTS, MARKS, replace=False)
    marks = rows.take(pa.array(marked))
    marks = marks.append_column(DML_TYPE, pa.repeat(pa.scalar(-1, pa.int8()), MARKS))
    for offset, length in slices(MARKS, MARK_COMMITS):
        assert table.append_entries(marks.slice(offset, length)).deleted == length
    build_s = time.perf_counter() - started

    markers = table.snapshot().markers()
    assert sum(m.rows for m in markers) == ENTRIES
    assert table.count() == INSERTS - MARKS
    key_sum = INSERTS * (INSERTS - 1) // 2 - pc.sum(marks.column("k")).as_py()
    files = table.files()
    bench_results["merge_input"] = {
        "entries": ENTRIES,
        "insertions": INSERTS,
        "delete_marks": MARKS,
        "commits": table.version,
        "files": len(files),
        "bytes": sum(m.size for m in markers),
        "build_s": round(build_s, 2),
        "note": "information only: the table every repetition merges a fresh copy of",
    }
    yield MergeInput(warehouse, files, sum(m.size for m in markers), key_sum)
    shutil.rmtree(root, ignore_errors=True)


def _literal(text: str) -> str:
    return str(exp.Literal.string(text).sql(dialect="duckdb"))


def _copy_sql(files: list[str], out: Path, order: bool = True) -> str:
    """The baseline: DuckDB reading the same files and writing one Parquet file sorted as the
    merge sorts, with the merge's compression and row group size."""
    file_list = "[" + ", ".join(_literal(f) for f in files) + "]"
    sort = ", ".join(f"{ident(c)} ASC NULLS LAST" for c in ("k", TRX_ID, TRX_SEQ))
    order_by = f" ORDER BY {sort}" if order else ""
    return (
        f"COPY (SELECT * FROM read_parquet({file_list}){order_by}) "
        f"TO {_literal(str(out))} (FORMAT parquet, COMPRESSION snappy, "
        f"ROW_GROUP_SIZE {merging.copy_row_group_rows()})"
    )


def cpu_seconds() -> float:
    """CPU time of this process, every thread (DuckDB's workers included), user and system."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@dataclass(frozen=True)
class Run:
    """One timed action: wall seconds, CPU seconds and the bytes it wrote."""

    seconds: float
    cpu_seconds: float
    bytes_written: int
    result: Any = None


def run_baseline(source: MergeInput, out: Path, order: bool = True) -> Run:
    """The COPY on a new connection (opened on its time, see the module docstring), its output
    checked, then deleted."""
    sql = _copy_sql(source.files, out, order)

    def copy() -> None:
        with closing(connect()) as con:
            con.execute(sql)

    os.sync()  # earlier writes must not be flushed on this run's time
    cpu_before = cpu_seconds()
    elapsed, _ = timed(copy)
    cpu = cpu_seconds() - cpu_before
    assert pq.read_metadata(out).num_rows == ENTRIES
    size = out.stat().st_size
    out.unlink()
    return Run(elapsed, cpu, size)


def run_merge(source: MergeInput, work: Path) -> Run:
    """Merge a fresh copy of the pristine table; only ``table.merge`` is timed."""
    shutil.copytree(source.warehouse, work)
    try:
        table = ledger.connect(str(work)).table(NAME)
        os.sync()
        cpu_before = cpu_seconds()
        elapsed, result = timed(lambda: table.merge(min_files=1))
        cpu = cpu_seconds() - cpu_before
        _check_merged(table, result, source)
        written = sum(m.size for m in table.snapshot().markers())
    finally:
        shutil.rmtree(work)  # keep the disk (and page cache) small
    return Run(elapsed, cpu, written, result)


def _check_merged(table: ledger.Table, result: merging.MergeResult, source: MergeInput) -> None:
    assert result.version == table.version and not result.conflicts
    assert result.files_in == len(source.files)
    assert result.entries_in == ENTRIES
    # Every mark cancels one insertion; the marks and what they cancelled are gone.
    assert result.entries_out == INSERTS - MARKS
    assert table.count() == INSERTS - MARKS
    totals = table.scan().aggregate(f"count(*), sum(k), min({DML_TYPE})").fetchall()
    assert totals == [(INSERTS - MARKS, source.surviving_key_sum, 1)]


def _ratio(baseline_s: float, ours_s: float) -> float:
    return round(baseline_s / ours_s, 3)


def test_merge_10m_entries_collapsing(
    merge_input: MergeInput,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    bench_results: dict[str, Any],
) -> None:
    runs: dict[str, list[Run]] = {"merge": [], "copy": []}
    # Repetition 0 warms caches and imports (DuckDB, the policy) and is not counted.
    for repetition in range(REPEATS + 1):
        # Alternate which goes first, so a slow spell of the machine does not favour one side.
        order = ["merge", "copy"] if repetition % 2 == 0 else ["copy", "merge"]
        for name in order:
            if name == "merge":
                run = run_merge(merge_input, tmp_path / f"merge-{repetition}")
            else:
                run = run_baseline(merge_input, tmp_path / f"copy-{repetition}.parquet")
            if repetition:
                runs[name].append(run)

    ours = summary([r.seconds for r in runs["merge"]])
    baseline = summary([r.seconds for r in runs["copy"]])
    ours_cpu = statistics.median(r.cpu_seconds for r in runs["merge"])
    baseline_cpu = statistics.median(r.cpu_seconds for r in runs["copy"])
    result: merging.MergeResult = runs["merge"][-1].result
    ratio = _ratio(baseline["median_s"], ours["median_s"])
    # Per repetition, the copy and the merge ran back to back: their ratio resists slow spells.
    paired = [c.seconds / m.seconds for m, c in zip(runs["merge"], runs["copy"], strict=True)]
    bench_results["merge_10m_entries_collapsing"] = {
        "entries_in": result.entries_in,
        "entries_out": result.entries_out,
        "delete_marks_in": MARKS,
        "files_in": result.files_in,
        "files_out": result.files_out,
        "repeats": REPEATS,
        "ledger_s": ours["median_s"],
        "duckdb_copy_s": baseline["median_s"],
        "ratio_throughput": ratio,
        "target": TARGET,
        "ratio": ratio,
        "comparison": "DuckDB COPY of the same files into one sorted Parquet file",
        "value_s": ours["median_s"],
        "baseline_s": baseline["median_s"],
        "meets_target": ratio >= TARGET_RATIO,
        "ledger_entries_per_s": round(ENTRIES / ours["median_s"]),
        "duckdb_copy_entries_per_s": round(ENTRIES / baseline["median_s"]),
        "ledger_cpu_s": round(ours_cpu, 3),
        "duckdb_copy_cpu_s": round(baseline_cpu, 3),
        "ratio_cpu": _ratio(baseline_cpu, ours_cpu),
        "ratio_paired_median": round(statistics.median(paired), 3),
        "bytes_in": merge_input.input_bytes,
        "ledger_bytes_written": runs["merge"][-1].bytes_written,
        "duckdb_copy_bytes_written": runs["copy"][-1].bytes_written,
        "ledger_samples_s": ours["samples_s"],
        "duckdb_copy_samples_s": baseline["samples_s"],
    }
    bench_results["merge_breakdown"] = breakdown(merge_input, tmp_path, monkeypatch)


# --- where the time goes (information only) ------------------------------------------------------


class _Clock:
    """Exclusive seconds per phase: time spent in a nested timed call counts for the inner
    phase only (e.g. Parquet encoding inside the sink's write)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._nested: list[float] = []  # per open timed call, the time of the calls inside it

    def add(self, phase: str, seconds: float) -> None:
        self.seconds[phase] = self.seconds.get(phase, 0.0) + seconds

    def wrap(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed_call(*args: Any, **kwargs: Any) -> Any:
            self._nested.append(0.0)
            start = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                self.add(phase, elapsed - self._nested.pop())
                if self._nested:
                    self._nested[-1] += elapsed

        return timed_call


class _TimedReader:
    """A record batch reader that charges the waits for its batches to ``fetch_batches_s``."""

    def __init__(self, reader: pa.RecordBatchReader, clock: _Clock) -> None:
        self.schema = reader.schema
        self._reader = reader
        self._clock = clock

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        while True:
            start = time.perf_counter()
            try:
                batch = self._reader.read_next_batch()
            except StopIteration:
                return
            finally:
                self._clock.add("fetch_batches_s", time.perf_counter() - start)
            yield batch


def instrumented_merge(
    source: MergeInput, work: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, float]:
    """One merge with its phases timed by wrapping the functions the merge calls."""
    clock = _Clock()
    rewrite_entries = rewrite.rewrite_entries

    @contextmanager
    def timed_rewrite_entries(*args: Any, **kwargs: Any) -> Iterator[_TimedReader]:
        start = time.perf_counter()
        with rewrite_entries(*args, **kwargs) as reader:
            # DuckDB runs the whole query before the reader exists: scan, policy, blocking sort.
            clock.add("duckdb_scan_policy_sort_s", time.perf_counter() - start)
            yield _TimedReader(reader, clock)

    with monkeypatch.context() as patch:
        patch.setattr(rewrite, "rewrite_entries", timed_rewrite_entries)
        patch.setattr(
            merging.SortedFileSink,
            "write",
            clock.wrap("sink_buffering_s", merging.SortedFileSink.write),
        )
        patch.setattr(
            merging.SortedFileSink,
            "close",
            clock.wrap("sink_close_s", merging.SortedFileSink.close),
        )
        # The path a local merge of one output file takes (merging.copy_query_result).
        patch.setattr(
            merging, "copy_entries", clock.wrap("duckdb_query_sort_write_s", merging.copy_entries)
        )
        patch.setattr(merging, "_read_back", clock.wrap("read_back_s", merging._read_back))
        patch.setattr(
            merging.DataWriter,
            "make_durable",
            clock.wrap("fsync_s", merging.DataWriter.make_durable),
        )
        patch.setattr(merging, "_commit", clock.wrap("log_commit_s", merging._commit))
        run = run_merge(source, work)
    phases = dict(clock.seconds)
    phases["everything_else_s"] = run.seconds - sum(phases.values())
    return {"total_s": round(run.seconds, 3), **{k: round(v, 3) for k, v in phases.items()}}


def drain_query(source: MergeInput, sql: str) -> tuple[float, int]:
    """Seconds to run ``sql`` over the entries through the merge's own engine call and read
    every batch (nothing written), and the rows it returned."""
    snapshot = ledger.connect(str(source.warehouse)).table(NAME).snapshot()
    state = snapshot.state
    schema = file_schema(state.schema, state.config)

    def drain() -> int:
        with rewrite.rewrite_entries(
            snapshot.store,
            snapshot.prefix,
            snapshot.markers(),
            schema,
            sql,
            sort_columns(state.config),
            merging._BATCH_ROWS,
        ) as reader:
            return sum(batch.num_rows for batch in reader)

    os.sync()
    return timed(drain)


def collapsing_sql(source: MergeInput) -> str:
    """The query a full merge of the table runs (as ``merging._merge_partition`` builds it)."""
    state = ledger.connect(str(source.warehouse)).table(NAME).snapshot().state
    config = state.config
    context = MergeContext(
        source=ENTRIES_RELATION,
        columns=tuple(file_schema(state.schema, config).names),
        key_columns=config.key_columns,
        value_columns=tuple(state.schema.names),
        covers_every_entry_of_its_keys=True,
        settled_trx_id=None,
        split_sources=(ENTRIES_OF_INSERTION_FILES, ENTRIES_OF_MARK_FILES),
    )
    return load_policy(config.policy, state.schema, config).merge_sql(context)


def breakdown(
    source: MergeInput, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    policy_s, policy_rows = drain_query(source, collapsing_sql(source))
    assert policy_rows == INSERTS - MARKS
    identity_s, identity_rows = drain_query(source, f"SELECT * FROM {ENTRIES_RELATION}")
    assert identity_rows == ENTRIES
    unsorted_copy = run_baseline(source, tmp_path / "copy-unsorted.parquet", order=False)
    return {
        "note": "one run each, information only",
        "instrumented_merge": instrumented_merge(source, tmp_path / "instrumented", monkeypatch),
        "policy_query_drained_s": round(policy_s, 3),
        "identity_query_drained_s": round(identity_s, 3),
        "duckdb_copy_unsorted_s": round(unsorted_copy.seconds, 3),
        "explain": {
            "instrumented_merge": (
                "phases of one table.merge on its calling thread (exclusive times). One output "
                "file on local disk (the copy path): DuckDB's COPY running the query, its sort "
                "and its parallel Parquet writer, reading back the key and system columns for "
                "the checks and the marker, fsync. Otherwise (the streaming path): DuckDB "
                "running the query and its sort, DuckDB->Arrow batches, SortedFileSink.write "
                "(slicing, casting, queueing row groups to the per-file encoder threads), "
                "SortedFileSink.close (waiting for the encoders, footers and fsync). Then the "
                "log commit, the rest"
            ),
            "policy_query_drained_s": (
                "rewrite.rewrite_entries with the collapsing SQL, every batch read, nothing written"
            ),
            "identity_query_drained_s": "the same with SELECT * FROM entries (scan + sort only)",
            "duckdb_copy_unsorted_s": "the baseline COPY without ORDER BY (scan + write only)",
        },
    }


# --- keys that grow with time: files copied as they are (information only) ---------------------

TIME_ORDERED_COMMITS = 8


def _time_ordered_table(root: Path) -> ledger.Table:
    """ENTRIES entries: insertions whose keys grow commit by commit (ids, timestamps), then
    corrections (a delete mark carrying the old values and a new insertion) of 10% of the
    newest commit's keys, as a table corrected while recent rows are still moving."""
    corrections = max(1, ENTRIES // 20)
    inserts = ENTRIES - 2 * corrections
    table = ledger.connect(str(root)).create_table(NAME, SCHEMA, primary_key=["k"])
    rows = keyed_rows(inserts, seed=20240302).sort_by("k")
    for offset, length in slices(inserts, TIME_ORDERED_COMMITS):
        table.insert(rows.slice(offset, length))
    newest = rows.slice(inserts - corrections)
    table.append_entries(
        newest.append_column(DML_TYPE, pa.repeat(pa.scalar(-1, pa.int8()), corrections))
    )
    table.insert(newest.set_column(1, "a", pc.add(newest.column("a"), 1)))
    return table


def test_merge_time_ordered_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bench_results: dict[str, Any]
) -> None:
    """A full merge of a table whose keys grow with time, against the same merge sending every
    file through the policy's query (``merging.passing_files`` answering none), alternated in
    one run: the files of older keys, which no mark can touch, are copied as they are."""
    pristine = tmp_path / "pristine"
    table = _time_ordered_table(pristine)
    source = MergeInput(pristine, table.files(), sum(m.size for m in table.snapshot().markers()), 0)
    runs: dict[str, list[float]] = {"copied_as_they_are": [], "every_file_queried": []}
    for repetition in range(REPEATS + 1):
        names = list(runs) if repetition % 2 == 0 else list(runs)[::-1]
        for name in names:
            with monkeypatch.context() as patch:
                if name == "every_file_queried":
                    patch.setattr(merging, "passing_files", lambda *args: [])
                work = tmp_path / f"{name}-{repetition}"
                shutil.copytree(source.warehouse, work)
                merged = ledger.connect(str(work)).table(NAME)
                os.sync()
                elapsed, result = timed(lambda merged=merged: merged.merge(min_files=1))
                assert result.entries_out == ENTRIES - 2 * max(1, ENTRIES // 20)
                shutil.rmtree(work)
            if repetition:
                runs[name].append(elapsed)
    ours = statistics.median(runs["copied_as_they_are"])
    queried = statistics.median(runs["every_file_queried"])
    bench_results["merge_time_ordered_keys"] = {
        "note": "information only: files of older keys copied as they are vs every file queried",
        "entries_in": ENTRIES,
        "files_in": len(source.files),
        "repeats": REPEATS,
        "copied_as_they_are_s": round(ours, 4),
        "every_file_queried_s": round(queried, 4),
        "speedup": round(queried / ours, 3),
        "copied_as_they_are_samples_s": [round(s, 4) for s in runs["copied_as_they_are"]],
        "every_file_queried_samples_s": [round(s, 4) for s in runs["every_file_queried"]],
    }
