"""Storage faults: whichever storage call fails, the table reads as before or after, never between.

For an insert, an update and a transaction, on a plain and a partitioned table, on local disk
(and on S3 for the transaction on a partitioned table, which makes every kind of call): fail the
1st storage call, then the 2nd, and so on until the operation runs through without reaching the
fault. After each failure the table (opened again through the real store) must read
exactly as before the operation or exactly as after it, with consistent sign sums and a gapless
log, and the next write must succeed. Then: faults that strike after the store did its work (a
lost response), and log files that are corrupt or truncated.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

import ledger
import ledger.log.commit
from ledger.storage import Store
from tests.conftest import Location
from tests.support.failing import (
    FailingStore,
    caused_by_fault,
)
from tests.support.ledger_reads import raw_entries, sign_sums_of, visible_of, visible_rows
from tests.support.lost_responses import (
    MUTATING,
    LateFailingStore,
    LosesLogResponses,
    LostCommitResponseStore,
)
from tests.support.s3server import BUCKET, S3Endpoint

Rows = dict[int, str]

SCHEMA = {"k": "BIGINT", "v": "VARCHAR"}
BASE: Rows = {k: f"v{k}" for k in range(12)}
LAYOUTS: dict[str, list[str] | None] = {"plain": None, "partitioned": ["bucket(2, k)"]}
NEXT_WRITE: Rows = {0: "next", 1000: "next"}  # overwrites a key every operation touches


@dataclass(frozen=True)
class Operation:
    run: Callable[[ledger.Table], Any]
    expected: Callable[[Rows], Rows]


def _insert(table: ledger.Table) -> Any:
    return table.insert([{"k": k, "v": "new"} for k in range(100, 108)])


def _update(table: ledger.Table) -> Any:
    return table.update([{"k": k, "v": f"u{k}"} for k in range(6)])


def _transaction(table: ledger.Table) -> Any:
    with table.transaction() as tx:
        tx.update([{"k": 0, "v": "tx"}, {"k": 5, "v": "tx"}])
        tx.insert([{"k": 200, "v": "tx"}, {"k": 201, "v": "tx"}])
        tx.delete([2, 3])
    return tx.commit_info


OPERATIONS = {
    "insert": Operation(_insert, lambda rows: {**rows, **{k: "new" for k in range(100, 108)}}),
    "update": Operation(_update, lambda rows: {**rows, **{k: f"u{k}" for k in range(6)}}),
    "transaction": Operation(
        _transaction,
        lambda rows: {
            **{k: v for k, v in rows.items() if k not in (2, 3)},
            0: "tx",
            5: "tx",
            200: "tx",
            201: "tx",
        },
    ),
}


# --- reading and checking a table -----------------------------------------------------------


def read_ledger(table: ledger.Table) -> tuple[Rows, dict[int, int]]:
    """Visible rows and sign sums per key (zero sums left out), from one read of the files.

    The plain-Python reference of tests/support/ledger_reads.py over entries read once, because
    these suites read thousands of tables over S3.
    """
    entries = raw_entries(table)
    rows = visible_of(entries, ["k"], ["k", "v"])
    visible = {k: v for k, v in rows}
    assert len(visible) == len(rows), f"a key is visible twice: {sorted(rows)}"
    return visible, {k: s for (k,), s in sign_sums_of(entries, ["k"]).items()}


def read_rows(table: ledger.Table) -> Rows:
    return read_ledger(table)[0]


def assert_table_reads(table: ledger.Table, rows: Rows | None) -> Rows:
    """The table shows exactly ``rows`` (if given), every row with sign sum 1, nothing else
    with a non-zero sum, and its log is whole. Returns the rows it shows."""
    visible, sums = read_ledger(table)
    if rows is not None:
        assert visible == rows
    assert sums == {k: 1 for k in visible}, "sign sums disagree with the visible rows"
    assert table.count() == len(visible)
    history = table.history()
    assert [r.version for r in history] == list(range(table.version + 1)), "the log has a gap"
    trx_ids = [r.trx_id for r in history if r.trx_id is not None]
    assert len(set(trx_ids)) == len(trx_ids), f"a trx_id was committed twice: {trx_ids}"
    return visible


def create_base(
    warehouse: ledger.Warehouse, name: str, layout: str, checkpoint_interval: int = 50
) -> ledger.Table:
    table = warehouse.create_table(
        name,
        SCHEMA,
        primary_key=["k"],
        partition_by=LAYOUTS[layout],
        checkpoint_interval=checkpoint_interval,
    )
    table.insert([{"k": k, "v": v} for k, v in BASE.items()])
    return table


def attempt(store: Store, name: str, operation: Operation) -> BaseException | None:
    """Open the table through ``store`` and run the operation; return what it raised."""
    try:
        operation.run(ledger.Warehouse(store).table(name))
    except Exception as e:
        return e
    return None


def check_after_fault(
    warehouse: ledger.Warehouse,
    name: str,
    operation: Operation,
    failing: FailingStore,
    error: BaseException | None,
    *,
    ambiguous: bool,
) -> None:
    """The table reads before or after; a reported success is after; the next write works.

    ``ambiguous``: the failed call may have taken effect (a lost response), so a failure report
    may come with a committed operation. Otherwise a reported failure means nothing committed:
    a caller who retries it must not apply it twice.
    """
    fail_at = failing.counter.fail_at or 0
    where = f"fault at storage call {fail_at} ({failing.counter.log[fail_at - 1]})"
    if error is not None:
        assert caused_by_fault(error), f"{where}: unrelated error {error!r}"
    before, after = BASE, operation.expected(BASE)
    table = warehouse.table(name)
    rows = assert_table_reads(table, None)
    assert rows in (before, after), f"{where}: the table reads neither before nor after: {rows}"
    if error is None:
        assert rows == after, f"{where}: the operation reported success but did not commit"
    elif not ambiguous:
        assert rows == before, f"{where}: the operation raised {error!r} but committed"
    max_trx = max((r.trx_id or 0) for r in table.history())
    info = table.upsert([{"k": k, "v": v} for k, v in NEXT_WRITE.items()])
    assert info.version == table.version and info.trx_id is not None and info.trx_id > max_trx
    assert_table_reads(warehouse.table(name), {**rows, **NEXT_WRITE})


def sweep(
    location: Location,
    layout: str,
    operation: Operation,
    checkpoint_interval: int = 50,
    pick: Callable[[list[str]], list[int]] | None = None,
) -> list[str]:
    """Fail call 1, 2, ... of the operation until it completes; return the calls it made.

    With ``pick``, a clean run first lists the calls and only those ``pick`` chooses fail."""
    if pick is not None:
        return sampled_sweep(location, layout, operation, checkpoint_interval, pick)
    warehouse = location.connect()
    for n in itertools.count(1):
        name = f"t{n}"
        create_base(warehouse, name, layout, checkpoint_interval)
        failing = FailingStore(warehouse.store, fail_at=n)
        error = attempt(failing, name, operation)
        if not failing.counter.failed:
            assert error is None, f"failed without a fault: {error!r}"
            assert failing.counter.calls == n - 1, "the call count changed between runs"
            assert_table_reads(warehouse.table(name), operation.expected(BASE))
            return failing.counter.log
        check_after_fault(warehouse, name, operation, failing, error, ambiguous=False)
    raise AssertionError("unreachable")


def sampled_sweep(
    location: Location,
    layout: str,
    operation: Operation,
    checkpoint_interval: int,
    pick: Callable[[list[str]], list[int]],
) -> list[str]:
    """Fail only the calls ``pick`` chooses among those a clean run made; return those calls."""
    warehouse = location.connect()
    create_base(warehouse, "clean", layout, checkpoint_interval)
    probe = FailingStore(warehouse.store, fail_at=None)
    assert attempt(probe, "clean", operation) is None
    calls = probe.counter.log
    assert_table_reads(warehouse.table("clean"), operation.expected(BASE))
    for n in pick(calls):
        name = f"t{n}"
        create_base(warehouse, name, layout, checkpoint_interval)
        failing = FailingStore(warehouse.store, fail_at=n)
        error = attempt(failing, name, operation)
        assert failing.counter.failed, f"call {n} not reached: the call count changed"
        assert failing.counter.log[n - 1].split()[0] == calls[n - 1].split()[0]
        check_after_fault(warehouse, name, operation, failing, error, ambiguous=False)
    return calls


def _is_commit(call: str) -> bool:
    return call.startswith("put_if_absent ") and "/_log/" in call and ".checkpoint." not in call


def first_call_and_from_the_commit_on(calls: list[str]) -> list[int]:
    """The first call, then the commit and every call after it (the checkpoint and its hint)."""
    commit = next(n for n, call in enumerate(calls, 1) if _is_commit(call))
    return [1, *range(commit, len(calls) + 1)]


# Every operation and layout sweeps every call on local disk. On S3 the calls differ only by the
# data files read through pyarrow ("fs path"), and the fault strikes in the wrapper before the
# store: one sweep of the operation that makes every kind of call (a transaction that updates,
# inserts and deletes, on a partitioned table) covers S3.
SWEEP_CASES = [
    *(("local", layout, op) for layout in sorted(LAYOUTS) for op in sorted(OPERATIONS)),
    ("s3", "partitioned", "transaction"),
]


@pytest.mark.parametrize(("location", "layout", "operation"), SWEEP_CASES, indirect=["location"])
def test_a_fault_at_any_storage_call_leaves_before_or_after(
    location: Location, layout: str, operation: str
) -> None:
    calls = sweep(location, layout, OPERATIONS[operation])
    # The sweep reached the calls that matter: opening, the data files and the commit.
    assert len(calls) >= 6, calls
    assert any(_writes_data_file(c) for c in calls), calls
    assert any(c.startswith("put_if_absent ") and "/_log/" in c for c in calls), calls
    if layout == "partitioned":
        assert sum(_writes_data_file(c) for c in calls) >= 2, calls


def _writes_data_file(call: str) -> bool:
    """A data file streamed through the filesystem, or (small, on S3) put in one request."""
    return call.startswith("fs write ") or (call.startswith("put ") and "/_data" in call)


def test_a_fault_in_a_commit_that_writes_a_checkpoint(location: Location) -> None:
    # checkpoint_interval=2: the base insert is version 1, the update commits version 2 and then
    # writes the checkpoint and the hint; a fault there must not undo the committed update.
    # Every call on local disk; on S3 the first call, the commit and every call after it.
    pick = first_call_and_from_the_commit_on if location.backend == "s3" else None
    calls = sweep(location, "plain", OPERATIONS["update"], checkpoint_interval=2, pick=pick)
    assert any(".checkpoint.jsonl" in c for c in calls), calls
    assert any(c.endswith("_log/_last_checkpoint") and c.startswith("put ") for c in calls)


@pytest.mark.parametrize("operation", ["update", "transaction"])
def test_a_fault_reading_data_files_is_an_os_error(s3_endpoint: S3Endpoint, operation: str) -> None:
    """Callers catch storage failures as OSError (StorageError is one), whatever engine read
    the file. On S3 data files are read through pyarrow (on local disk DuckDB reads them
    natively, past the failing store), so this is where a read fault can reach the caller."""
    location = Location("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", s3_endpoint.options())
    warehouse = location.connect()
    probe = FailingStore(warehouse.store, fail_at=None)
    create_base(warehouse, "clean", "partitioned")
    assert attempt(probe, "clean", OPERATIONS[operation]) is None
    written = {c[len("fs write ") :] for c in probe.counter.log if c.startswith("fs write ")}
    reads = [
        n
        for n, call in enumerate(probe.counter.log, 1)
        if call.startswith("fs path ")
        and warehouse.store.fs_path(call[len("fs path ") :]) not in written
    ]
    assert reads, probe.counter.log
    for n in reads:
        create_base(warehouse, f"t{n}", "partitioned")
        failing = FailingStore(warehouse.store, fail_at=n)
        error = attempt(failing, f"t{n}", OPERATIONS[operation])
        assert failing.counter.failed
        assert isinstance(error, OSError | ledger.LedgerError), (
            f"a fault reading {probe.counter.log[n - 1]} surfaced as {type(error)}: {error}"
        )
        assert_table_reads(warehouse.table(f"t{n}"), BASE)


# Every operation on local disk; on S3 the transaction (its writes are the trx_id reservation
# and the commit, as every operation's are).
LOCAL_EVERY_OPERATION_S3_TRANSACTION = [
    *(("local", operation) for operation in sorted(OPERATIONS)),
    ("s3", "transaction"),
]


@pytest.mark.parametrize(
    ("location", "operation"), LOCAL_EVERY_OPERATION_S3_TRANSACTION, indirect=["location"]
)
def test_a_write_that_lands_but_reports_failure_leaves_before_or_after(
    location: Location, operation: str
) -> None:
    """Every write and delete of the operation in turn takes effect and then raises."""
    warehouse = location.connect()
    probe = FailingStore(warehouse.store, fail_at=None)
    create_base(warehouse, "clean", "partitioned")
    assert attempt(probe, "clean", OPERATIONS[operation]) is None
    writes = [n for n, call in enumerate(probe.counter.log, 1) if call.startswith(MUTATING)]
    assert len(writes) >= 2, probe.counter.log  # at least the trx_id reservation and the commit
    for n in writes:
        name = f"late{n}"
        create_base(warehouse, name, "partitioned")
        failing = LateFailingStore(warehouse.store, fail_at=n)
        error = attempt(failing, name, OPERATIONS[operation])
        assert failing.counter.failed, f"call {n} was not reached: {failing.counter.log}"
        check_after_fault(warehouse, name, OPERATIONS[operation], failing, error, ambiguous=True)


@pytest.mark.parametrize(
    ("location", "operation"), LOCAL_EVERY_OPERATION_S3_TRANSACTION, indirect=["location"]
)
def test_a_commit_whose_success_response_was_lost(location: Location, operation: str) -> None:
    """The commit lands, but a retried conditional PUT reports the key as taken: the writer
    must notice the winning commit is its own, neither committing it twice nor undoing it."""
    warehouse = location.connect()
    create_base(warehouse, "t", "plain")
    store = LostCommitResponseStore(warehouse.store)
    error = attempt(store, "t", OPERATIONS[operation])
    assert store.lost is not None, "the operation made no commit"
    expected = OPERATIONS[operation].expected(BASE)
    table = warehouse.table("t")
    if error is not None:
        assert isinstance(error, ledger.LedgerError | OSError), f"unexpected error {error!r}"
    assert_table_reads(table, expected)  # the commit landed: it must stay, once
    table.upsert([{"k": k, "v": v} for k, v in NEXT_WRITE.items()])
    assert_table_reads(warehouse.table("t"), {**expected, **NEXT_WRITE})


# --- corrupt log files and checkpoint hints -------------------------------------------------
# Each test below breaks one file of a table shared by the module (per backend) and puts it back
# afterwards: building the tables once keeps these many small cases cheap on S3. Parsing does not
# depend on the backend: every case runs locally, and a few representative ones on S3 as well.


def local_all_s3_some(cases: list[str], on_s3: list[str]) -> list[tuple[str, str]]:
    assert set(on_s3) <= set(cases)
    return [*(("local", case) for case in cases), *(("s3", case) for case in on_s3)]


@pytest.fixture(scope="module", params=["local", "s3"])
def shared_location(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Location:
    if request.param == "local":
        return Location("local", str(tmp_path_factory.mktemp("faults") / "warehouse"))
    endpoint: S3Endpoint = request.getfixturevalue("s3_endpoint")
    return Location("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint.options())


CORRUPT_TABLE_ROWS: Rows = {**BASE, 500: "x"}
FIRST_COMMIT = "corrupt/_log/00000000000000000001.jsonl"


@pytest.fixture(scope="module")
def corrupt_table(shared_location: Location) -> Location:
    """Table ``corrupt`` at version 2; version 1 holds several file markers."""
    warehouse = shared_location.connect()
    table = create_base(warehouse, "corrupt", "partitioned")
    table.insert([{"k": 500, "v": "x"}])
    assert warehouse.store.get(FIRST_COMMIT).count(b"\n") >= 4  # meta, schema, 2+ files
    return shared_location


def _cut_at_last_line(data: bytes) -> bytes:
    lines = data.split(b"\n")[:-1]
    return b"\n".join(lines[:-1]) + b"\n"


CORRUPTIONS: dict[str, Callable[[bytes, Store], bytes]] = {
    "garbage": lambda data, store: b"this is not a log file\n",
    "empty": lambda data, store: b"",
    "cut mid-line": lambda data, store: data[: len(data) // 2],
    "cut mid-line, newline added": lambda data, store: data[: len(data) // 2] + b"\n",
    "cut after a whole line": lambda data, store: _cut_at_last_line(data),
    "only the first line": lambda data, store: data.split(b"\n")[0] + b"\n",
    "not utf-8": lambda data, store: b"\xff\xfe\x00garbage\n",
    "not objects": lambda data, store: b"[1, 2]\n[3]\n",
    "objects without fields": lambda data, store: b"{}\n{}\n",
    "a bad file marker": lambda data, store: data.replace(b'"rows":', b'"rowz":', 1),
    "another version's commit": lambda data, store: store.get(
        "corrupt/_log/00000000000000000002.jsonl"
    ),
}


@pytest.mark.parametrize(
    ("shared_location", "corruption"),
    local_all_s3_some(list(CORRUPTIONS), ["garbage", "cut mid-line", "another version's commit"]),
    indirect=["shared_location"],
)
def test_a_corrupt_log_file_is_an_error_naming_it(corrupt_table: Location, corruption: str) -> None:
    store = corrupt_table.connect().store
    original = store.get(FIRST_COMMIT)
    store.put(FIRST_COMMIT, CORRUPTIONS[corruption](original, store))
    try:
        with pytest.raises(ledger.CorruptLogError) as excinfo:
            corrupt_table.connect().table("corrupt")
        assert FIRST_COMMIT in str(excinfo.value)
    finally:
        store.put(FIRST_COMMIT, original)
    # The error was about that file alone: with it restored the table reads as before.
    assert read_rows(corrupt_table.connect().table("corrupt")) == CORRUPT_TABLE_ROWS


HINTED_ROWS: Rows = {**{k: v for k, v in BASE.items() if k != 4}, 1: "two", 300: "three"}
HINT = "hinted/_log/_last_checkpoint"
VALID_HINT = b'{"version": 3}'


@pytest.fixture(scope="module")
def hinted_table(shared_location: Location) -> Location:
    """Table ``hinted`` at version 4, with a checkpoint at version 3 and the hint naming it."""
    warehouse = shared_location.connect()
    table = create_base(warehouse, "hinted", "plain", checkpoint_interval=3)  # versions 0, 1
    table.update([{"k": 1, "v": "two"}])  # 2
    table.insert([{"k": 300, "v": "three"}])  # 3, checkpointed
    table.delete([4])  # 4
    keys = [info.key for info in warehouse.store.list("hinted/_log/")]
    assert "hinted/_log/00000000000000000003.checkpoint.jsonl" in keys
    assert warehouse.store.get(HINT) == VALID_HINT
    return shared_location


def test_a_table_opens_from_its_checkpoint_hint(location: Location) -> None:
    warehouse = location.connect()
    table = create_base(warehouse, "t", "plain", checkpoint_interval=2)
    table.update([{"k": 1, "v": "two"}])  # version 2: checkpoint and hint
    table.insert([{"k": 300, "v": "three"}])  # 3
    assert warehouse.store.get("t/_log/_last_checkpoint") == b'{"version": 2}'
    rows = {**BASE, 1: "two", 300: "three"}
    table = location.connect().table("t")
    assert table.version == 3
    assert_table_reads(table, rows)
    table.insert([{"k": 301, "v": "four"}])  # 4: the next checkpoint and hint
    assert warehouse.store.get("t/_log/_last_checkpoint") == b'{"version": 4}'
    assert_table_reads(location.connect().table("t"), {**rows, 301: "four"})


BROKEN_HINTS = {
    "missing": None,
    "empty": b"",
    "garbage": b"garbage",
    "cut": b'{"version": 3',
    "not utf-8": b"\xff\xfe",
    "no version": b"{}",
    "a list": b"[3]",
    "a text version": b'{"version": "three"}',
    "a null version": b'{"version": null}',
    "a negative version": b'{"version": -1}',
    "an infinite version": b'{"version": 1e400}',
    "a negative infinite version": b'{"version": -Infinity}',
    "a future version": b'{"version": 999}',
    "an older version without checkpoint": b'{"version": 2}',
    "the latest version, which has no checkpoint": b'{"version": 4}',
}


@pytest.mark.parametrize(
    ("shared_location", "hint"),
    local_all_s3_some(list(BROKEN_HINTS), ["missing", "garbage", "a future version"]),
    indirect=["shared_location"],
)
def test_a_broken_checkpoint_hint_is_ignored(hinted_table: Location, hint: str) -> None:
    store = hinted_table.connect().store
    broken = BROKEN_HINTS[hint]
    try:
        if broken is None:
            store.delete(HINT)
        else:
            store.put(HINT, broken)
        table = hinted_table.connect().table("hinted")
        assert table.version == 4
        assert_table_reads(table, HINTED_ROWS)
    finally:
        store.put(HINT, VALID_HINT)


@pytest.mark.parametrize("operation", ["update", "transaction"])
def test_a_data_file_that_cannot_be_read_is_a_storage_error(
    location: Location, operation: str
) -> None:
    """A real fault, no harness: a committed data file vanished from the store. DuckDB (local) or
    pyarrow (S3) fails to read it, and the caller sees StorageError, an OSError."""
    warehouse = location.connect()
    create_base(warehouse, "t", "partitioned")
    table = warehouse.table("t")
    version = table.version
    for marker in table.snapshot().markers():
        warehouse.store.delete(table.prefix + marker.path)
    error = attempt(warehouse.store, "t", OPERATIONS[operation])
    assert isinstance(error, ledger.StorageError) and isinstance(error, OSError), repr(error)
    assert "could not be read" in str(error)
    assert warehouse.table("t").version == version


def test_a_lost_response_on_the_last_attempt_still_counts_as_committed(tmp_path, monkeypatch):
    store = LosesLogResponses(str(tmp_path))
    table = ledger.Warehouse(store).create_table("t", {"id": "BIGINT"}, primary_key="id")
    # The last attempt is the one that lands.
    monkeypatch.setattr(ledger.log.commit, "MAX_ATTEMPTS", 1)
    store.armed = True
    info = table.insert([{"id": 1}])
    store.armed = False
    assert info.version == 1
    reopened = ledger.Warehouse(store).table("t")
    assert visible_rows(reopened) == [(1,)]  # its data files were kept


def test_a_lost_response_on_create_returns_the_created_table(tmp_path):
    store = LosesLogResponses(str(tmp_path))
    store.armed = True
    table = ledger.Warehouse(store).create_table("t", {"id": "BIGINT"}, primary_key="id")
    assert table.version == 0
