"""Concurrent writers: threads and spawned processes appending, upserting and updating one table.

Every test runs on local disk, and all but two on S3 (moto over HTTP) as well: the threads-only
race and the counter-only race run locally only, since the race of processes and threads on S3
already has writers appending, upserting, updating and incrementing at once through S3's
conditional writes (and checkpointing mid-race). After the writers finish, the ledger is checked
against what each writer says it committed:

- the log's versions are 0..N without a gap, one per committed operation, with strictly
  increasing timestamps, and each version holds the ``trx_id`` its writer was told;
- ``trx_id`` is unique, and greater than every ``trx_id`` committed before its operation began;
- every committed row is in the ledger exactly once, under its commit's ``trx_id``; rows of
  operations that gave up are not there at all;
- every delete mark carries the row written by the previous commit (in log order) to the same key,
  so no update overwrote a row it never saw: the visible row of each hot key is the last commit's,
  and a counter incremented by read-modify-write transactions equals the number of increments.

Two races run on tables with odd column names (unicode, spaces, quotes, dots): hand-written
delete marks of one entry (it is cancelled once; a late mark raises UnmatchedDeleteMarkError), and
upserts of one key of a replacing table with shuffled versions (a stale one raises
StaleVersionError; the committed versions never go down in log order).
"""

from __future__ import annotations

import itertools
import multiprocessing
import threading
import time
import types
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import ledger
import ledger.log.commit
import ledger.transaction
import ledger.writer
from ledger.errors import StaleVersionError
from tests.conftest import Location
from tests.support.arrow_data import rows
from tests.support.engines import Engine
from tests.support.engines import sorted_rows as norm
from tests.support.ledger_reads import policy_answer, visible_rows
from tests.support.twins import footprint, raw, twins, visible
from tests.support.workers import (
    BARRIER_TIMEOUT_S,
    COUNTER_KEY,
    INCREMENT,
    INSERT,
    KINDS,
    SHARED_KEYS,
    Outcome,
    Plan,
    init_process,
    make_plan,
    run_plan,
    run_plan_in_process,
)

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "who": "VARCHAR"}
SEED_WHO = "seed"
RESULT_TIMEOUT_S = 300


# --- running writers --------------------------------------------------------------------------


def _seeded_table(location: Location, name: str, **options: Any) -> tuple[ledger.Table, int]:
    """A table whose shared keys and counter start at 0; returns it and the seed's trx_id."""
    table = location.connect().create_table(name, SCHEMA, primary_key=["k"], **options)
    seed = table.insert([{"k": k, "v": 0, "who": SEED_WHO} for k in (*SHARED_KEYS, COUNTER_KEY)])
    assert (seed.version, seed.inserted) == (1, len(SHARED_KEYS) + 1)
    assert seed.trx_id is not None
    return table, seed.trx_id


def _plans(
    location: Location, name: str, writers: Sequence[int], n_steps: int, kinds: Any = KINDS
) -> list[Plan]:
    return [make_plan(location.uri, location.options, name, w, n_steps, kinds) for w in writers]


def _run_in_threads(plans: Sequence[Any], barrier: Any) -> list[Outcome]:
    with ThreadPoolExecutor(max_workers=len(plans)) as pool:
        futures = [pool.submit(run_plan, plan, barrier) for plan in plans]
        return [o for f in futures for o in f.result(timeout=RESULT_TIMEOUT_S)]


def _run_with_barrier(count: int, work: Callable[[int], Any]) -> list[Any]:
    barrier = threading.Barrier(count)

    def start(i: int) -> Any:
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
        return work(i)

    with ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(start, range(count)))


# --- checking the ledger against the outcomes ------------------------------------------------


def _check_ledger(table: ledger.Table, seed_trx_id: int, outcomes: Sequence[Outcome]) -> None:
    table.refresh()
    committed = [o for o in outcomes if o.version is not None]
    _check_log(table, seed_trx_id, committed)
    _check_trx_order(table, seed_trx_id, committed)
    _check_entries(table, seed_trx_id, committed)


def _check_log(table: ledger.Table, seed_trx_id: int, committed: Sequence[Outcome]) -> None:
    history = table.history()
    versions = [r.version for r in history]
    assert versions == list(range(2 + len(committed))), "versions: create, seed, one per commit"
    assert history[1].trx_id == seed_trx_id
    timestamps = [r.timestamp for r in history]
    assert all(a < b for a, b in itertools.pairwise(timestamps)), timestamps

    claimed = [o.version for o in committed]
    assert len(set(claimed)) == len(claimed), f"two writers were told the same version: {claimed}"
    by_version = {r.version: r for r in history}
    for o in committed:
        record = by_version[o.version]
        assert record.trx_id == o.trx_id, (o, record)
        expected_operation = "update" if o.step.kind == INCREMENT else o.step.kind
        assert record.operation == expected_operation, (o, record)
        assert (record.inserted, record.deleted) == ((1, 0) if o.step.kind == INSERT else (1, 1))

    trx_ids = [r.trx_id for r in history[1:]]
    assert None not in trx_ids
    assert len(set(trx_ids)) == len(trx_ids), f"duplicate trx_ids in the log: {sorted(trx_ids)}"
    assert sorted(trx_ids) == sorted([seed_trx_id, *(o.trx_id for o in committed)])


def _check_trx_order(table: ledger.Table, seed_trx_id: int, committed: Sequence[Outcome]) -> None:
    """trx_id exceeds every trx_id committed before the operation began: both every commit the
    writer had already seen, and every commit another writer finished before it started."""
    history = table.history()
    for o in committed:
        assert o.trx_id is not None
        seen = [r.trx_id for r in history[1 : o.seen_version + 1] if r.trx_id is not None]
        assert o.trx_id > max(seen, default=seed_trx_id), (o, seen)
        earlier = [p for p in committed if p.finished < o.started]
        for p in earlier:
            assert p.trx_id is not None
            assert o.trx_id > p.trx_id, f"{o.step.who} began after {p.step.who} committed: {o}, {p}"


def _check_entries(table: ledger.Table, seed_trx_id: int, committed: Sequence[Outcome]) -> None:
    entries = table.scan().project("k, v, who, trx_id, dml_type").fetchall()
    insertions = Counter(e[:4] for e in entries if e[4] == 1)
    marks = Counter(e[:4] for e in entries if e[4] == -1)
    assert {e[4] for e in entries} <= {1, -1}

    seed_rows = [(k, 0, SEED_WHO) for k in (*SHARED_KEYS, COUNTER_KEY)]
    expected_insertions = Counter((*row, seed_trx_id) for row in seed_rows)
    expected_insertions.update((o.step.key, o.written, o.step.who, o.trx_id) for o in committed)
    assert insertions == expected_insertions, "committed rows must be in the ledger exactly once"

    # Per hot key, the commits in log order form a chain: each one's delete mark carries the row
    # the previous one wrote. A lost update shows up as two marks of one row (or a missing mark).
    expected_marks: Counter[tuple[Any, ...]] = Counter()
    visible = {}
    for key in (*SHARED_KEYS, COUNTER_KEY):
        chain = _in_log_order(o for o in committed if o.step.key == key)
        previous = (key, 0, SEED_WHO)
        for o in chain:
            expected_marks[(*previous, o.trx_id)] += 1
            previous = (key, o.written, o.step.who)
        visible[key] = previous
    assert marks == expected_marks, "each update must cancel exactly the row committed before it"

    for o in committed:
        if o.step.kind == INSERT:
            visible[o.step.key] = (o.step.key, o.written, o.step.who)
    assert visible_rows(table) == sorted(visible.values(), key=repr)
    assert table.count() == len(visible)

    increments = _in_log_order(o for o in committed if o.step.kind == INCREMENT)
    assert [o.read for o in increments] == list(range(len(increments))), (
        "increments in log order must each read the value the previous one wrote"
    )
    assert visible[COUNTER_KEY][1] == len(increments)


def _in_log_order(outcomes: Iterable[Outcome]) -> list[Outcome]:
    return sorted(outcomes, key=lambda o: o.version if o.version is not None else -1)


# --- tests ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("location", ["local"], indirect=True)
def test_threads_append_upsert_update_and_increment_at_once(location: Location) -> None:
    table, seed_trx_id = _seeded_table(location, "threads")
    plans = _plans(location, "threads", writers=range(4), n_steps=8)
    outcomes = _run_in_threads(plans, threading.Barrier(len(plans)))

    assert len(outcomes) == 32
    # Blind appends never conflict; with 30 retries the hot keys must get through as well.
    assert all(o.version is not None for o in outcomes), [o for o in outcomes if o.version is None]
    _check_ledger(table, seed_trx_id, outcomes)


def test_processes_and_threads_write_the_same_table_at_once(location: Location) -> None:
    # A small checkpoint interval makes writers checkpoint (and read checkpoints) mid-race.
    table, seed_trx_id = _seeded_table(location, "processes", checkpoint_interval=7)
    process_plans = _plans(location, "processes", writers=range(3), n_steps=5)
    thread_plans = _plans(location, "processes", writers=range(3, 5), n_steps=5)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(process_plans) + len(thread_plans))

    with context.Pool(len(process_plans), initializer=init_process, initargs=(barrier,)) as pool:
        in_processes = pool.map_async(run_plan_in_process, process_plans, chunksize=1)
        in_threads = _run_in_threads(thread_plans, barrier)
        from_processes = [o for result in in_processes.get(RESULT_TIMEOUT_S) for o in result]

    outcomes = from_processes + in_threads
    assert len(outcomes) == 25
    assert all(o.version is not None for o in outcomes), [o for o in outcomes if o.version is None]
    _check_ledger(table, seed_trx_id, outcomes)
    assert table.version == 1 + len(outcomes)
    # A reader opening the table now starts from a checkpoint written during the race.
    fresh = ledger.connect(location.uri, **location.options).table("processes")
    appended = sum(1 for o in outcomes if o.step.kind == INSERT)
    assert appended == 7
    assert fresh.count() == len(SHARED_KEYS) + 1 + appended


@pytest.mark.parametrize("location", ["local"], indirect=True)
def test_counter_increments_by_read_modify_write_are_never_lost(location: Location) -> None:
    table, seed_trx_id = _seeded_table(location, "counter")
    writers, increments = 3, 4
    plans = _plans(location, "counter", range(writers), increments, kinds=(INCREMENT,))
    assert all(len(p.steps) == increments for p in plans)
    outcomes = _run_in_threads(plans, threading.Barrier(writers))

    assert all(o.version is not None for o in outcomes), [o for o in outcomes if o.version is None]
    _check_ledger(table, seed_trx_id, outcomes)
    counter = [row for row in visible_rows(table) if row[0] == COUNTER_KEY]
    assert counter[0][1] == writers * increments
    assert sorted(o.read for o in outcomes) == list(range(writers * increments))


def _frozen_clock(at_s: float) -> types.SimpleNamespace:
    return types.SimpleNamespace(time=lambda: at_s, sleep=time.sleep)


def test_two_appends_at_the_same_instant_both_survive(
    location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = location.connect().create_table("instant", SCHEMA, primary_key=["k"])
    # Every commit and data file gets the same wall-clock time: nothing may be named by it.
    frozen = _frozen_clock(time.time())
    monkeypatch.setattr(ledger.log.commit, "time", frozen)
    monkeypatch.setattr(ledger.writer, "time", frozen)
    handles = [location.connect().table("instant") for _ in range(2)]
    rounds = 4

    infos: list[tuple[int, ledger.CommitInfo]] = []
    for r in range(rounds):
        keys = [r * 2, r * 2 + 1]
        rows = [{"k": k, "v": 0, "who": f"k{k}"} for k in keys]
        results = _run_with_barrier(2, lambda i, rows=rows: handles[i].insert([rows[i]]))
        infos += zip(keys, results, strict=True)

    assert sorted(info.version for _, info in infos) == list(range(1, 2 * rounds + 1))
    trx_ids = [info.trx_id for _, info in infos]
    assert len(set(trx_ids)) == len(trx_ids)
    table.refresh()
    entries = sorted(table.scan().project("k, who, trx_id, dml_type").fetchall())
    assert entries == sorted((k, f"k{k}", info.trx_id, 1) for k, info in infos)
    history = table.history()
    assert [r.version for r in history] == list(range(2 * rounds + 1))
    stamps = [r.timestamp for r in history]
    assert all(a < b for a, b in itertools.pairwise(stamps)), stamps
    assert table.count() == 2 * rounds


def test_trx_id_exceeds_every_trx_id_committed_before_the_transaction_began(
    location: Location,
) -> None:
    """A transaction that reserved its trx_id early but commits late must not let a later
    transaction take a smaller or equal id."""
    table = location.connect().create_table("order", SCHEMA, primary_key=["k"])
    open_handle = location.connect().table("order")
    other = location.connect().table("order")

    slow = open_handle.transaction()
    slow.insert([{"k": 1, "v": 1, "who": "slow"}])  # reserves its trx_id now
    fast = [other.insert([{"k": 10 + i, "v": i, "who": "fast"}]) for i in range(3)]
    slow_info = slow.commit()
    assert slow_info.version == 4
    committed_before = [slow_info.trx_id, *(f.trx_id for f in fast)]
    assert len(set(committed_before)) == 4

    for n, handle in enumerate((open_handle, other, table)):  # stale or fresh handles alike
        tx = handle.transaction()
        tx.upsert([{"k": 1, "v": 2 + n, "who": f"later-{n}"}])
        assert tx.trx_id > max(committed_before)
        info = tx.commit()
        assert (info.version, info.trx_id) == (5 + n, tx.trx_id)
        committed_before.append(info.trx_id)

    by_version = [r.trx_id for r in table.history()]
    assert by_version == [None, *(f.trx_id for f in fast), slow_info.trx_id, *committed_before[4:]]


def test_a_key_read_by_lookup_and_written_meanwhile_fails_the_commit(location: Location) -> None:
    """Read one key, write another: the read alone must make a concurrent write a conflict."""
    table = location.connect().create_table("lookup", SCHEMA, primary_key=["k"])
    table.insert([{"k": k, "v": 0, "who": SEED_WHO} for k in (1, 2)])
    other = location.connect().table("lookup")

    reader = table.transaction()
    assert reader.lookup([1]).to_pylist() == [{"k": 1, "v": 0, "who": SEED_WHO}]
    other.insert([{"k": 3, "v": 0, "who": "unrelated"}])  # another key: no conflict
    reader.update([{"k": 2, "v": 1, "who": "reader"}])
    assert reader.commit().version == 3

    reader = table.transaction()
    reader.lookup([1])
    written = other.update([{"k": 1, "v": 5, "who": "other"}])
    reader.update([{"k": 2, "v": 2, "who": "reader"}])
    with pytest.raises(ledger.ConflictError):
        reader.commit()

    assert table.refresh().version == written.version == 4
    assert visible_rows(table) == [(1, 5, "other"), (2, 1, "reader"), (3, 0, "unrelated")]


def test_a_read_modify_write_checks_each_commit_once_while_appends_keep_landing(
    location: Location, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steady stream of appends to other keys must not starve a read-modify-write: its
    conflict check reads the files of every commit since its snapshot once, in one read per
    commit attempt, however often it loses the race for the next version."""
    table = location.connect().create_table("stream", SCHEMA, primary_key=["k"])
    table.insert([{"k": k, "v": 0, "who": SEED_WHO} for k in (1, 2)])
    other = location.connect().table("stream")
    reader = table.transaction()
    reader.lookup([1])
    reader.update([{"k": 2, "v": 1, "who": "reader"}])
    for k in range(10, 30):  # landed after the snapshot, before the first attempt
        other.insert([{"k": k, "v": 0, "who": "appender"}])

    checked: list[int] = []
    real_touch = ledger.transaction.rmw.entries_touch

    def counting_touch(*args: Any, **kwargs: Any) -> Any:
        checked.append(len(kwargs["predicate_files"]))
        return real_touch(*args, **kwargs)

    monkeypatch.setattr(ledger.transaction.rmw, "entries_touch", counting_touch)
    store = table.store
    real_put = store.put_if_absent
    losses = iter(range(3))  # the first three commit attempts lose to one more append each

    def losing_put(key: str, data: bytes) -> bool:
        if "/_log/" in key and next(losses, None) is not None:
            other.insert([{"k": 100 + len(checked), "v": 0, "who": "appender"}])
        return bool(real_put(key, data))

    monkeypatch.setattr(store, "put_if_absent", losing_put)
    committed = reader.commit()
    assert committed.version == 1 + 20 + 3 + 1  # seed, appends, lost races, this commit
    # Every intervening commit's file read once, one read per attempt that found new commits
    # (the first attempt's put already lost to one append, so it saw 21).
    assert sum(checked) == 20 + 3 and checked == [21, 1, 1]
    rows = visible_rows(table)
    assert (1, 0, SEED_WHO) in rows and (2, 1, "reader") in rows and len(rows) == 2 + 23


def test_retrying_reruns_a_transaction_on_conflict_and_checks_its_retries(tmp_path):
    """``Table.retrying`` (the loop behind upsert/update/delete on every engine): a rival
    commit between the read and the commit makes it rerun on the newer state."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "n": "BIGINT"}, primary_key="k"
    )
    table.insert([{"k": 1, "n": 0}])
    rival = ledger.connect(str(tmp_path)).table("t")
    runs = []

    def increment(tx):
        [(n,)] = [(r["n"],) for r in tx.lookup([1]).to_pylist()]
        if not runs:
            rival.update([{"k": 1, "n": 10}])  # lands while this run is between read and commit
        runs.append(n)
        tx.update([{"k": 1, "n": n + 1}])

    table.retrying(increment)
    assert runs == [0, 10]
    assert visible_rows(table) == [(1, 11)]
    with pytest.raises(ledger.ConflictError):
        runs.clear()
        table.retrying(increment, retries=0)
    for bad in (-1, True, 1.5):
        with pytest.raises(ledger.InvalidArgumentError):
            table.upsert([{"k": 1, "n": 0}], retries=bad)


# --- odd names, hand-written marks and versions under contention -------------------------------

# Odd but legal names: mixed case, unicode, spaces, quotes and dots.
ODD_KEY, ODD_AMOUNT, ODD_WHO, ODD_VERSION = "Kéy", "Amount €", 'who "x".y', "trx_id_x"


def test_writers_racing_to_cancel_one_entry_by_hand_cancel_it_once(location: Location) -> None:
    """Four writers each mark the same live entry and insert their own row: exactly one commits;
    the others conflict or, arriving after it, find nothing left to cancel."""
    schema = {ODD_KEY: "BIGINT", ODD_AMOUNT: "BIGINT", ODD_WHO: "VARCHAR"}
    table = location.connect().create_table("marks", schema, primary_key=[ODD_KEY])
    seed = {ODD_KEY: 1, ODD_AMOUNT: 10, ODD_WHO: SEED_WHO}
    table.insert([seed])

    def cancel_and_replace(writer: int) -> int | None:
        mine = {ODD_KEY: 1, ODD_AMOUNT: 11 + writer, ODD_WHO: f"writer {writer}"}
        entries = [{**seed, "dml_type": -1}, {**mine, "dml_type": 1}]
        try:
            return location.connect().table("marks").append_entries(entries).version
        except (ledger.ConflictError, ledger.UnmatchedDeleteMarkError):
            return None

    versions = _run_with_barrier(4, cancel_and_replace)
    winners = [w for w, v in enumerate(versions) if v is not None]
    assert len(winners) == 1, f"{versions}: one entry was cancelled more than once"
    table.refresh()
    assert table.version == 2
    assert visible_rows(table) == [(1, 11 + winners[0], f"writer {winners[0]}")]
    assert table.count() == 1
    with pytest.raises(ledger.UnmatchedDeleteMarkError):  # a late writer: nothing to cancel
        location.connect().table("marks").append_entries([{**seed, "dml_type": -1}])
    assert table.refresh().version == 2


def test_racing_versioned_upserts_never_commit_a_stale_version(location: Location) -> None:
    """Writers upsert one key of a replacing table with versions in shuffled orders: in log
    order the committed versions never go down (each refused one raised StaleVersionError), and
    the highest version written is the visible one."""
    schema = {ODD_KEY: "BIGINT", ODD_VERSION: "INTEGER", ODD_WHO: "VARCHAR"}
    table = location.connect().create_table(
        "versions",
        schema,
        primary_key=[ODD_KEY],
        policy={"name": "replacing", "version_column": ODD_VERSION},
    )
    table.insert([{ODD_KEY: 1, ODD_VERSION: 0, ODD_WHO: SEED_WHO}])
    attempts = {w: [(w * 7 + step * 3) % 10 for step in range(3)] for w in range(3)}

    def upsert_versions(writer: int) -> list[tuple[int, int, str]]:
        handle = location.connect().table("versions")
        committed = []
        for version in attempts[writer]:
            row = {ODD_KEY: 1, ODD_VERSION: version, ODD_WHO: f"{writer}/{version}"}
            try:
                committed.append((handle.upsert([row]).version, version, row[ODD_WHO]))
            except StaleVersionError:
                continue
        return committed

    committed = sorted(
        c for per_writer in _run_with_barrier(3, upsert_versions) for c in per_writer
    )
    in_log_order = [version for _, version, _ in committed]
    who = [writer for _, _, writer in committed]
    assert in_log_order == sorted(in_log_order), f"a stale version committed: {committed}"
    highest = max(v for versions in attempts.values() for v in versions)
    assert in_log_order[-1] == highest
    assert policy_answer(table.refresh())["visible"] == [(1, highest, who[-1])]


# --- two appends at the same instant whose first attempts collide both survive (IceDB named
# commits by timestamp and host: two appends in one millisecond overwrote each other) -----------


class _FrozenTime:
    """The ``time`` module with its clock stopped."""

    def __init__(self, at: float) -> None:
        self.at = at

    def time(self) -> float:
        return self.at

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def test_two_appends_at_the_same_instant_whose_first_attempts_collide_both_survive(
    location, monkeypatch
):
    table = location.connect().create_table(
        "events", {"id": "BIGINT", "src": "VARCHAR"}, primary_key="id"
    )
    table.insert([{"id": 0, "src": "seed"}])
    frozen = _FrozenTime(time.time())
    for module in (ledger.log.commit, ledger.writer, ledger.transaction):
        monkeypatch.setattr(module, "time", frozen)

    barrier = threading.Barrier(2, timeout=30)
    lost: list[str] = []
    handles = [location.connect().table("events") for _ in range(2)]
    for handle in handles:
        store = handle.store
        real = store.put_if_absent
        waited: set[str] = set()

        def racing_put(key: str, data: bytes, real: Any = real, waited: set[str] = waited) -> bool:
            # Both writers reserve a trx_id, then write a commit, at the same moment, having
            # read the same state: each pair of first attempts collides.
            kind = "_trx/" if "/_trx/" in key else "_log/" if "/_log/" in key else None
            if kind is not None and kind not in waited:
                waited.add(kind)
                barrier.wait()
            created = bool(real(key, data))
            if not created and kind is not None:
                lost.append(kind)
            return created

        monkeypatch.setattr(store, "put_if_absent", racing_put)
        # A trx_id reservation is a put-if-absent that may skip durability (Store.reserve):
        # it races the same way.
        monkeypatch.setattr(store, "reserve", racing_put)

    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def append(writer: int) -> None:
        try:
            results[writer] = handles[writer - 1].insert([{"id": writer, "src": f"w{writer}"}])
        except BaseException as e:
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=append, args=(w,)) for w in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(lost) == ["_log/", "_trx/"]  # the race really happened, once each

    assert sorted(r.version for r in results.values()) == [2, 3]
    assert len({r.trx_id for r in results.values()}) == 2
    fresh = location.connect().table("events")
    assert visible_rows(fresh) == [(0, "seed"), (1, "w1"), (2, "w2")]
    history = fresh.history()
    assert [h.operation for h in history] == ["create_table", "insert", "insert", "insert"]
    stamps = [h.timestamp for h in history]
    assert stamps == sorted(set(stamps))  # strictly increasing although the clock stood still
    assert {h.trx_id for h in history[2:]} == {r.trx_id for r in results.values()}


# --- read-modify-write on each engine against commits made meanwhile ----------------------------


@pytest.mark.engines
def test_a_read_modify_write_on_each_engine_conflicts_with_a_commit_since(
    engine: Engine, tmp_path: Any
) -> None:
    """An update through the engine inside a transaction loses to an embedded commit of its key
    and leaves no file behind; an embedded transaction that read a key loses to the engine's
    commit of it. Nothing is cancelled twice."""
    (table, _) = twins(tmp_path, primary_key="k")
    table.insert(rows("k g x", (1, "a", 1), (2, "a", 2)))
    tx = table.transaction()
    engine.write(tx, "update", rows("k x", (1, 100)))
    table.update([{"k": 1, "x": 200}])  # commits first
    with pytest.raises(ledger.ConflictError):
        tx.commit()
    version, files = footprint(table)
    assert version == 2, "the losing transaction committed"
    alive = {table.prefix + m.path for m in table.snapshot().markers()}
    assert files == alive, "the losing transaction left its data files behind"
    assert visible(table) == norm([(1, "a", 200, None), (2, "a", 2, None)])

    rival = table.transaction()
    assert rival.lookup([2]).num_rows == 1
    engine.write(table, "update", rows("k x", (2, 20)))
    rival.update([{"k": 2, "x": 21}])
    with pytest.raises(ledger.ConflictError):
        rival.commit()
    assert visible(table) == norm([(1, "a", 200, None), (2, "a", 20, None)])
    assert sum(r["dml_type"] for r in raw(table)) == 2


@pytest.mark.engines
def test_blind_inserts_on_each_engine_never_conflict(engine: Engine, tmp_path: Any) -> None:
    (table, _) = twins(tmp_path, primary_key="k")
    table.insert(rows("k x", (1, 1)))
    tx = table.transaction()
    engine.write(tx, "insert", rows("k x", (1, 10), (2, 20)))
    table.update([{"k": 1, "x": 2}])
    table.delete([1])
    info = tx.commit()
    assert info.version == table.refresh().version and info.inserted == 2
    assert visible(table) == norm([(1, None, 10, None), (2, None, 20, None)])
