"""Storage faults in maintenance: merge, vacuum, drop_partitions and rewrite_partitions.

For each operation: fail its 1st storage call, then its 2nd, and so on until it runs through
(locally; merges of the other policies, and S3, only at the calls that decide the outcome, to
keep the suite fast). Within a run of three or more consecutive reads or deletes in one folder
(the log files read on opening, the data files, log files and trx_id reservations a vacuum
deletes) the first and the last call stand for the run. Two kinds of fault:

- *fail once*: the N-th call raises and every later call works (a transient error: the
  operation's own clean-up runs);
- *crash*: the N-th call and every call after it raise (the process died there: nothing cleans
  up, so files the operation wrote are left behind).

After each fault, read through the real store, the table must answer (``policy_answer``) exactly
as before the operation or exactly as after it (a merge or a vacuum never changes the answer), a
reported failure of a merge, drop or rewrite must mean nothing was committed, every alive file
must exist, the log must read without a gap, and no file the failed operation wrote may be
referenced by the log. The operation must then run to completion, and a vacuum run once its
orphan rule allows (a clock two hours ahead) must leave no unreferenced data file behind, while a
vacuum run right away must not take the failed operation's files for orphans.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import types
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs
import pytest

import ledger
import ledger.maintenance.vacuum as vacuuming
from ledger.storage import Store
from tests.conftest import Location
from tests.support.failing import (
    FAULTS,
    CallCounter,
    CrashingStore,
    FailingStore,
    _FailingHandler,
    caused_by_fault,
)
from tests.support.ledger_reads import policy_answer
from tests.support.maintenance import POLICIES

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "n": "BIGINT"}
PARTITION_BY = ["bucket(2, k)"]
# Small, so that the merge's commit (version 9) also writes a checkpoint and its hint.
CHECKPOINT_INTERVAL = 3
LATER_S = 2 * 3600  # past the default transaction timeout (1 h) plus the clock-skew margin
GRACE_S = 60


# --- stores that fail --------------------------------------------------------------------------


# --- the tables --------------------------------------------------------------------------------


def build_base(warehouse: ledger.Warehouse, name: str, policy: str) -> ledger.Table:
    """Version 8: inserts, an update, deletes and an upsert, each writing a file per partition."""
    table = warehouse.create_table(
        name,
        SCHEMA,
        primary_key=["k"],
        partition_by=PARTITION_BY,
        policy=POLICIES[policy],
        checkpoint_interval=CHECKPOINT_INTERVAL,
    )
    for i in range(4):
        table.insert([{"k": k, "v": 10 * k + i, "n": 1} for k in range(i * 5, i * 5 + 5)])
    table.update([{"k": 1, "v": 100, "n": 1}, {"k": 6, "v": 600, "n": 1}])
    table.delete([2, 7])
    table.upsert([{"k": 3, "v": 300, "n": 1}, {"k": 50, "v": 500, "n": 1}])
    table.delete([50])
    assert table.version == 8
    return table


def build_merged_base(warehouse: ledger.Warehouse, name: str, policy: str) -> ledger.Table:
    """The base merged (version 9, checkpointed) and one more insert into partition 1."""
    table = build_base(warehouse, name, policy)
    assert table.merge().version == 9
    table.insert([{"k": k, "v": k, "n": 1} for k in (24, 25, 26)])  # all in bucket 1
    assert [len(table.snapshot().markers({"k_bucket": p})) for p in "01"] == [1, 2]
    return table


def build_vacuum_base(warehouse: ledger.Warehouse, name: str, policy: str) -> ledger.Table:
    """Tombstoned files of both kinds to expunge (merged inputs and a dropped partition), log
    files and trx_id reservations to delete, and one planted orphan data file."""
    table = warehouse.create_table(
        name,
        SCHEMA,
        primary_key=["k"],
        partition_by=PARTITION_BY,
        policy=POLICIES[policy],
        checkpoint_interval=CHECKPOINT_INTERVAL,
    )
    table.insert([{"k": k, "v": k, "n": 1} for k in range(6)])
    table.insert([{"k": k, "v": k, "n": 1} for k in range(6, 12)])
    table.delete([0, 1])
    assert table.merge({"k_bucket": "0"}).version == 4
    assert table.drop_partitions({"k_bucket": "1"}).version == 5
    table.insert([{"k": k, "v": k, "n": 1} for k in (21, 23, 25)])
    alive = table.snapshot().markers()[0]
    orphan = f"{table.prefix}_data/k_bucket=0/{uuid.uuid4().hex}.parquet"
    warehouse.store.put(orphan, warehouse.store.get(table.prefix + alive.path))
    return table


@contextmanager
def clock_ahead(seconds: float) -> Iterator[None]:
    """Vacuum's clock reads ``seconds`` later than the real one (this thread's tests only)."""
    saved = vacuuming.time
    vacuuming.time = types.SimpleNamespace(time=lambda: time.time() + seconds)  # type: ignore[assignment]
    try:
        yield
    finally:
        vacuuming.time = saved  # type: ignore[assignment]


def vacuum_later(table: ledger.Table) -> Any:
    with clock_ahead(LATER_S):
        return table.vacuum(GRACE_S)


# --- the operations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Operation:
    build: Callable[[ledger.Warehouse, str, str], ledger.Table]
    run: Callable[[ledger.Table], Any]
    commits: str  # "merge", "vacuum" or "change" (a drop or rewrite: the answer changes)


def _merge(table: ledger.Table) -> Any:
    return table.merge()


def _merge_newest_partition_subset(table: ledger.Table) -> Any:
    return table.merge(order="descending", max_partitions=1, max_files=3)


def _drop(table: ledger.Table) -> Any:
    return table.drop_partitions(where="k_bucket = '1'")


def _rewrite(table: ledger.Table) -> Any:
    return table.rewrite_partitions(
        [{"k_bucket": "0"}, {"k_bucket": "1"}], "SELECT * FROM entries WHERE k NOT IN (4, 8)"
    )


OPERATIONS = {
    "merge": Operation(build_base, _merge, "merge"),
    "merge some files": Operation(build_base, _merge_newest_partition_subset, "merge"),
    "vacuum": Operation(build_vacuum_base, vacuum_later, "vacuum"),
    "drop_partitions": Operation(build_base, _drop, "change"),
    "rewrite_partitions": Operation(build_merged_base, _rewrite, "change"),
}


# --- reading and checking ---------------------------------------------------------------------


def data_files(warehouse: ledger.Warehouse, table: ledger.Table) -> set[str]:
    """Every data file in the table's folder, relative to the table."""
    prefix = table.prefix + "_data/"
    return {info.key[len(table.prefix) :] for info in warehouse.store.list(prefix)}


@dataclass(frozen=True)
class Reading:
    version: int
    answer: Any
    referenced: frozenset[str]  # every file the state knows, alive or tombstoned
    alive: frozenset[str]
    present: frozenset[str]  # every .parquet file in the folder


def read_table(warehouse: ledger.Warehouse, name: str) -> Reading:
    """Open the table afresh through the real store and check what must hold at any time."""
    table = warehouse.table(name)
    state = table.snapshot().state
    present = frozenset(p for p in data_files(warehouse, table) if p.endswith(".parquet"))
    alive = frozenset(m.path for m in state.alive_files)
    lost = sorted(alive - present)
    assert not lost, f"alive files are missing from the store: {lost}"
    history = table.history()  # vacuum may have left only a checkpoint
    versions = [r.version for r in history]
    assert versions == list(range(table.version + 1 - len(versions), table.version + 1)), versions
    trx_ids = [r.trx_id for r in history if r.trx_id is not None]
    assert len(set(trx_ids)) == len(trx_ids), f"a trx_id was committed twice: {trx_ids}"
    answer = policy_answer(table)
    if isinstance(answer, dict):
        keys = [row[0] for row in answer["visible"]]
        assert len(set(keys)) == len(keys), f"a key is visible twice: {answer['visible']}"
    return Reading(table.version, answer, frozenset(state.files), alive, present)


def attempt(store: Store, name: str, operation: Operation) -> tuple[Any, BaseException | None]:
    try:
        return operation.run(ledger.Warehouse(store).table(name)), None
    except Exception as e:
        return None, e


@dataclass(frozen=True)
class Expected:
    before: Reading
    after: Any  # the answer after a clean run
    calls: list[str]


def clone_table(warehouse: ledger.Warehouse, source: str, name: str) -> None:
    """Copy every object of table ``source`` to table ``name`` (paths in the log are relative
    to the table, so the copy is the same table; building it again would cost more)."""
    store = warehouse.store
    for info in store.list(f"{source}/"):
        target = name + info.key[len(source) :]
        source_path, target_path = store.local_path(info.key), store.local_path(target)
        if source_path is not None and target_path is not None:
            os.makedirs(os.path.dirname(target_path), exist_ok=True)
            shutil.copy2(source_path, target_path)
        else:
            store.put(target, store.get(info.key))


def clean_run(warehouse: ledger.Warehouse, operation: Operation) -> Expected:
    """Run the operation once without faults on a copy of the template, counting its calls."""
    before = read_table(warehouse, "template")
    clone_table(warehouse, "template", "clean")
    probe = FailingStore(warehouse.store, fail_at=None)
    result, error = attempt(probe, "clean", operation)
    assert error is None, repr(error)
    assert result.version is not None, result
    after = read_table(warehouse, "clean")
    assert after.version == result.version == before.version + 1
    if operation.commits in ("merge", "vacuum"):
        assert after.answer == before.answer, "a merge or vacuum changed the table's answer"
    else:
        assert after.answer != before.answer, "the operation should change the answer"
    return Expected(before, after.answer, probe.counter.log)


def check_after_fault(
    warehouse: ledger.Warehouse,
    name: str,
    operation: Operation,
    expected: Expected,
    failing: FailingStore,
    result: Any,
    error: BaseException | None,
) -> None:
    base = expected.before
    fail_at = failing.counter.fail_at or 0
    failed_call = failing.counter.log[fail_at - 1]
    where = f"fault at storage call {fail_at} ({failed_call})"
    if error is not None:
        assert caused_by_fault(error), f"{where}: unrelated error {error!r}"
    now = read_table(warehouse, name)
    assert now.answer in (base.answer, expected.after), f"{where}: neither before nor after"

    committed = now.version > base.version
    if operation.commits != "vacuum":
        # Nothing the library does after a merge, drop or rewrite commits can raise.
        assert committed == (error is None), f"{where}: raised {error!r}, committed {committed}"
        assert now.version == base.version + committed
    if error is None:
        assert result.version == now.version, (where, result)
        assert now.answer == expected.after, f"{where}: reported success, reads before"
    elif operation.commits == "change":
        assert now.answer == base.answer, f"{where}: raised {error!r} but changed the table"

    # Files the attempt wrote: referenced only if it committed, and then all of them alive.
    written = now.present - base.present
    if committed:
        assert written & now.referenced <= now.alive, where
    else:
        assert not (written & now.referenced), f"{where}: uncommitted files are in the log"
    leftovers = now.present - now.referenced - (base.present - base.referenced)
    # A transient fault is cleaned up after, unless it struck the log write itself: whether
    # that landed is unknown, so the files stay for vacuum (deleting them could lose a commit).
    # And a fault in a best-effort delete leaves that file for vacuum too.
    ambiguous = failed_call.startswith("put_if_absent ") and "/_log/" in failed_call
    best_effort = failed_call.startswith("delete ")
    transient = not isinstance(failing, CrashingStore)
    if transient and operation.commits != "vacuum" and not (ambiguous or best_effort):
        assert not leftovers, f"{where}: the failed operation left files behind: {leftovers}"

    # A vacuum now must not take the attempt's files for orphans: they are younger than the
    # transaction timeout (an operation still running could yet commit them).
    if leftovers and operation.commits != "vacuum":
        warehouse.table(name).vacuum(0)
        assert leftovers <= read_table(warehouse, name).present, f"{where}: deleted too early"

    # The operation runs to completion on a working store.
    rerun = operation.run(warehouse.table(name))
    if not committed and operation.commits != "vacuum":
        assert rerun.version is not None, f"{where}: the re-run committed nothing: {rerun}"

    # Once old enough, whatever the failed attempt left behind is collected as an orphan.
    vacuum_later(warehouse.table(name))
    collected = read_table(warehouse, name)
    assert collected.answer == expected.after, f"{where}: the re-run reads wrong"
    stray = collected.present - collected.referenced
    assert not stray, f"{where}: vacuum left unreferenced data files: {stray}"
    expired = collected.referenced - collected.alive
    assert not expired, f"{where}: vacuum left tombstoned files: {expired}"


def sweep(
    location: Location,
    operation: Operation,
    policy: str,
    fault: type[FailingStore],
    pick: Callable[[list[str]], list[int]] | None = None,
) -> list[str]:
    """Fail each chosen storage call of the operation in turn; return the clean run's calls."""
    warehouse = location.connect()
    operation.build(warehouse, "template", policy)
    expected = clean_run(warehouse, operation)
    calls = expected.calls
    for n in pick(calls) if pick is not None else range(1, len(calls) + 1):
        name = f"t{n}"
        clone_table(warehouse, "template", name)
        failing = fault(warehouse.store, fail_at=n)
        result, error = attempt(failing, name, operation)
        assert failing.counter.failed, f"call {n} not reached: the call count changed"
        assert failing.counter.log[n - 1].split()[0] == calls[n - 1].split()[0]
        check_after_fault(warehouse, name, operation, expected, failing, result, error)
    return calls


def _kind(call: str) -> str:
    """A call's kind: its verb and the folder it touches (``delete t/_data/k_bucket=1``)."""
    verb, _, key = call.partition(" ")
    if verb == "fs":
        operation, _, key = key.partition(" ")
        verb = f"fs {operation}"
    return f"{verb} {key.rsplit('/', 1)[0]}"


def runs_collapsed(calls: list[str]) -> list[int]:
    """Every call (1-based), except inside a run of consecutive reads or deletes of one kind
    (in one folder), where the first and the last stand for the run: failing the 3rd of 10
    log-file deletes of a vacuum is the same fault as failing the 2nd. Every write, every
    listing, the commit and the last call are always chosen."""
    chosen = []
    for n, call in enumerate(calls, 1):
        collapsible = call.startswith(("get ", "fs path ", "delete ", "fs delete "))
        same_before = n > 1 and _kind(calls[n - 2]) == _kind(call)
        same_after = n < len(calls) and _kind(calls[n]) == _kind(call)
        if not (collapsible and same_before and same_after):
            chosen.append(n)
    return chosen


def calls_where(*tests: Callable[[str], bool]) -> Callable[[list[str]], list[int]]:
    """A pick: for each test, the 1-based position of the first call it accepts."""

    def pick(calls: list[str]) -> list[int]:
        chosen = []
        for test in tests:
            found = [n for n, call in enumerate(calls, 1) if test(call)]
            assert found, f"no such call in {calls}"
            chosen.append(found[0])
        return sorted(set(chosen))

    return pick


def _is_commit(call: str) -> bool:
    return call.startswith("put_if_absent ") and "/_log/" in call and ".checkpoint." not in call


def _is_output_write(call: str) -> bool:
    return call.startswith("fs write ")


# The calls where a merge's outcome changes: its trx_id reservation, its first and last output
# file (after the last one every output exists), its commit, and the checkpoint after it.
MERGE_KEY_CALLS = calls_where(
    lambda c: c.startswith("put_if_absent ") and "/_trx/" in c,
    _is_output_write,
    _is_commit,
    lambda c: c.startswith("put ") and c.endswith("_last_checkpoint"),
)


def merge_key_calls(calls: list[str]) -> list[int]:
    last_write = max(n for n, c in enumerate(calls, 1) if _is_output_write(c))
    return sorted({*MERGE_KEY_CALLS(calls), last_write})


S3_PICKS = {
    # Reading an input (through the filesystem on S3), writing an output, and the commit.
    "merge": calls_where(
        lambda c: c.startswith("fs path ") and "/_data/" in c, _is_output_write, _is_commit
    ),
    # The expunge commit, then deleting a data file and a log file.
    "vacuum": calls_where(
        _is_commit,
        lambda c: c.startswith("delete ") and "/_data/" in c,
        lambda c: c.startswith("delete ") and "/_log/" in c,
    ),
}


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.timeout(300)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_fault_at_any_call_of_a_merge_never_changes_the_answer(
    local_location: Location, fault: str
) -> None:
    calls = sweep(local_location, OPERATIONS["merge"], "collapsing", FAULTS[fault], runs_collapsed)
    # The sweep went through the calls that matter: the trx_id, both outputs, the commit and
    # the checkpoint it writes.
    assert any(c.startswith("put_if_absent ") and "/_trx/" in c for c in calls), calls
    assert sum(c.startswith("fs write ") for c in calls) == 2, calls
    assert any(_is_commit(c) and c.endswith("09.jsonl") for c in calls), calls
    assert any(c.endswith("_log/_last_checkpoint") and c.startswith("put ") for c in calls), calls


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("policy", "fault"),
    [("replacing", "crash"), ("aggregating", "fail once"), ("dedup", "crash")],
)
def test_a_fault_at_a_key_call_of_a_merge_never_changes_any_policys_answer(
    local_location: Location, policy: str, fault: str
) -> None:
    """The calls a merge makes do not depend on the policy, but what it writes (and so what
    must read the same afterwards) does: every other policy at the calls that decide."""
    calls = sweep(local_location, OPERATIONS["merge"], policy, FAULTS[fault], merge_key_calls)
    assert len(merge_key_calls(calls)) == 5


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("operation", "fault"),
    [
        ("merge some files", "crash"),
        ("vacuum", "fail once"),
        ("vacuum", "crash"),
        ("drop_partitions", "fail once"),
        ("drop_partitions", "crash"),
        ("rewrite_partitions", "fail once"),
        ("rewrite_partitions", "crash"),
    ],
)
def test_a_fault_at_any_call_of_maintenance_leaves_before_or_after(
    local_location: Location, operation: str, fault: str
) -> None:
    calls = sweep(
        local_location, OPERATIONS[operation], "collapsing", FAULTS[fault], runs_collapsed
    )
    if operation == "vacuum":
        deletes = [c for c in calls if c.startswith("delete ")]
        assert any("/_data/" in c for c in deletes), calls  # tombstoned files and the orphan
        assert any("/_log/" in c for c in deletes), calls
        assert any("/_trx/" in c for c in deletes), calls
    if operation == "rewrite_partitions":
        # Two files rewritten, one unchanged (compared, never copied), and one commit.
        assert sum(c.startswith("fs write ") for c in calls) == 2, calls
        assert not any(c.startswith("delete ") and "/_data/" in c for c in calls), calls
        assert sum(_is_commit(c) for c in calls) == 1, calls


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("operation", "policy", "fault"),
    [("merge", "replacing", "fail once"), ("vacuum", "collapsing", "crash")],
)
def test_a_fault_on_s3_leaves_before_or_after(
    s3_location: Location, operation: str, policy: str, fault: str
) -> None:
    calls = sweep(s3_location, OPERATIONS[operation], policy, FAULTS[fault], S3_PICKS[operation])
    assert len(S3_PICKS[operation](calls)) == 3


def test_an_uncommitted_merge_output_is_an_orphan_only_once_old_enough(
    local_location: Location,
) -> None:
    """A merge that dies at its commit leaves its output files: no log entry names them, a
    vacuum right away keeps them (they may still be committed by a live merge), and a vacuum
    past the transaction timeout and the clock-skew margin deletes them. (On S3 the sampled
    sweep checks the same at the merge's commit.)"""
    warehouse = local_location.connect()
    build_base(warehouse, "t", "collapsing")
    clone_table(warehouse, "t", "probe")
    before = read_table(warehouse, "t")
    probe = FailingStore(warehouse.store, fail_at=None)
    attempt(probe, "probe", OPERATIONS["merge"])
    commit_call = calls_where(_is_commit)(probe.counter.log)[0]

    crashing = CrashingStore(warehouse.store, fail_at=commit_call)
    _, error = attempt(crashing, "t", OPERATIONS["merge"])
    assert error is not None and caused_by_fault(error)
    now = read_table(warehouse, "t")
    assert (now.version, now.answer) == (before.version, before.answer)
    written = now.present - before.present
    assert len(written) == 2, written  # one output per partition, left behind by the crash
    assert not written & now.referenced
    log_text = b"".join(
        warehouse.store.get(info.key) for info in warehouse.store.list("t/_log/")
    ).decode()
    assert not any(path in log_text for path in written), "the log names an uncommitted file"

    result = warehouse.table("t").vacuum(0)
    assert result.orphans_deleted == 0
    assert written <= read_table(warehouse, "t").present

    with clock_ahead(3600 + 1):  # the timeout has passed, but not the clock-skew margin
        assert warehouse.table("t").vacuum(0).orphans_deleted == 0
    assert written <= read_table(warehouse, "t").present

    result = vacuum_later(warehouse.table("t"))
    assert result.orphans_deleted == 2
    after = read_table(warehouse, "t")
    assert not written & after.present
    assert after.answer == before.answer
    assert warehouse.table("t").merge().version == before.version + 1
    assert read_table(warehouse, "t").answer == before.answer


class _ThreadRecordingHandler(_FailingHandler):
    """The fault-injecting store's filesystem, noting the thread of every call that reads."""

    def __init__(self, fs: pafs.FileSystem, counter: CallCounter) -> None:
        super().__init__(fs, counter)
        self.reading_threads: set[int] = set()

    def get_file_info(self, paths: list[str]) -> Any:
        self.reading_threads.add(threading.get_ident())
        return super().get_file_info(paths)

    def open_input_stream(self, path: str) -> Any:
        self.reading_threads.add(threading.get_ident())
        return super().open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        self.reading_threads.add(threading.get_ident())
        return super().open_input_file(path)


@pytest.mark.timeout(300)
def test_data_files_on_a_python_filesystem_are_opened_by_the_calling_thread(
    s3_location: Location,
) -> None:
    """The fault-injecting store's filesystem is written in Python: opening a file there takes
    the GIL. A scan of data files that pyarrow opened on its own threads hung for good now and
    then (DuckDB starts the scan holding the GIL while pyarrow's thread opening a file holds the
    scan's lock), in merges and reads alike; the files are opened by the thread that runs the
    statement, before the scan starts. A collapsing merge reads its entries three times."""
    warehouse = s3_location.connect()
    build_base(warehouse, "t", "collapsing")
    before = policy_answer(warehouse.table("t"))
    store = FailingStore(warehouse.store, fail_at=None)
    handler = _ThreadRecordingHandler(warehouse.store.filesystem, store.counter)
    store._fs = pafs.PyFileSystem(handler)
    table = ledger.Warehouse(store).table("t")
    assert table.merge().version == 9
    assert policy_answer(table) == before
    assert handler.reading_threads == {threading.get_ident()}
