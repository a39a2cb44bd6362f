"""Maintenance under concurrency: merges, vacuums and drops racing appends and each other.

Two kinds of test, on local disk and on S3 (moto over HTTP):

- Deterministic interleavings: a store hook runs another operation at the exact moment a merge
  (or a vacuum) is about to commit (or has just listed the data files), so each race of the
  optimistic protocol is reached every time: a merge whose inputs another merge, a drop or a
  rewrite took first gives those partitions up and deletes its new files; a merge racing only
  appends commits; merges of disjoint files both commit; vacuum never takes a running merge's
  files for orphans; a writer whose snapshot a vacuum overtook (its trx_id reservations or log
  files deleted) neither reuses a trx_id nor reports a commit the table does not have.
- Free-running races: threads (and spawned processes) append, merge with different options,
  vacuum and drop at once, for every merge policy. Afterwards every alive file exists, no entry
  is in the ledger twice, nothing unreferenced is left behind, every operation was told its own
  version (and appends their own trx_id), and the table answers exactly as a serial replay of
  the committed appends and drops, in commit-version order, on a fresh table (merges and
  vacuums change no answer, so they are left out of the replay).

The clock-skew margin (a minute) is shortened to 0.3 s and race tables get a transaction timeout
of 1.5-2 s, so orphans and settled delete marks come within reach of a short race; the grace of
racing vacuums is longer than any transaction plus that margin, as docs/merges.md asks.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import ledger
from ledger.maintenance import merge as merging
from ledger.storage import Store
from tests.conftest import Location
from tests.support.failing import FailingStore
from tests.support.ledger_reads import policy_answer, visible_rows
from tests.support.maintenance import (
    LOCAL_ONLY,
    POLICIES,
    add_rows,
    assert_files_consistent,
    other_handle,
    region_table,
    run_once_before,
    set_clock_skew,
    vacuum_now,
)
from tests.support.workers import (
    APPEND,
    DROP,
    MERGE,
    VACUUM,
    RaceOutcome,
    RaceRole,
    init_race_process,
    run_race_role,
    run_race_role_in_process,
)

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "n": "BIGINT"}
PARTITION_BY = ["bucket(3, k)"]
SKEW_MS = 300
# Per backend: the tables' transaction timeout, the racing vacuums' grace (longer than any
# transaction plus the skew margin) and how long mergers and vacuums keep going. Planted orphans
# are older than max(grace, timeout) + skew well before the race ends.
RACE_TIMING = {"local": (1.5, 2.5, 3.5), "s3": (2.0, 3.0, 4.5)}
RESULT_TIMEOUT_S = 300


@pytest.fixture
def short_skew(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The clock-skew margin of merges and vacuum, shortened for this test (threads only)."""
    set_clock_skew(monkeypatch, SKEW_MS)
    yield


# --- tables and reading them ---------------------------------------------------------------------


def create(warehouse: ledger.Warehouse, name: str, policy: str, **options: Any) -> ledger.Table:
    return warehouse.create_table(
        name,
        SCHEMA,
        primary_key=["k"],
        partition_by=PARTITION_BY,
        policy=POLICIES[policy],
        **options,
    )


def seed(table: ledger.Table, batches: int = 4) -> None:
    """``batches`` inserts over every partition, then an update and a delete (so merges have
    marks to collapse): several small files per partition."""
    for b in range(batches):
        table.insert([{"k": k, "v": k * 10 + b, "n": 1} for k in range(b * 6, b * 6 + 6)])
    table.update([{"k": 1, "v": 111, "n": 1}, {"k": 8, "v": 888, "n": 1}])
    table.delete([2, 9])


def data_files(store: Store, table: ledger.Table) -> set[str]:
    prefix = table.prefix + "_data/"
    return {i.key[len(table.prefix) :] for i in store.list(prefix) if i.key.endswith(".parquet")}


def check_files(warehouse: ledger.Warehouse, name: str) -> ledger.Table:
    """A fresh handle; every alive file exists, and no file is left that the log does not know
    and no entry is in the ledger twice."""
    table = warehouse.table(name)
    state = table.snapshot().state
    present = data_files(warehouse.store, table)
    alive = {m.path for m in state.alive_files}
    assert alive <= present, f"alive files are missing: {sorted(alive - present)}"
    stray = present - set(state.files)
    assert not stray, f"files no commit references were left behind: {sorted(stray)}"
    entries = table.scan().project("k, trx_id, trx_seq, dml_type").fetchall()
    repeated = [e for e, count in Counter(entries).items() if count > 1]
    assert not repeated, f"entries in the ledger twice: {repeated[:5]}"
    return table


def partition_files(table: ledger.Table, partition: str) -> list[str]:
    return [m.path for m in table.refresh().snapshot().markers({"k_bucket": partition})]


# --- deterministic interleavings ---------------------------------------------------------------


class HookStore(FailingStore):
    """The real store, but ``hook`` runs once, just before the first call ``when`` accepts
    (or, with ``after=True``, just after it)."""

    def __init__(
        self, inner: Store, when: Callable[[str], bool], hook: Callable[[], Any], after: bool
    ) -> None:
        super().__init__(inner, fail_at=None)
        self.when, self.hook, self.after = when, hook, after
        self.hook_result: Any = None
        self.fired = False

    def _maybe_fire(self, call: str, after: bool) -> None:
        if not self.fired and after == self.after and self.when(call):
            self.fired = True
            self.hook_result = self.hook()

    def put_if_absent(self, key: str, data: bytes) -> bool:
        self._maybe_fire(f"put_if_absent {key}", after=False)
        return super().put_if_absent(key, data)

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[Any]:
        self._maybe_fire(f"list {prefix}", after=False)
        listed = list(super().list(prefix, start_after))
        self._maybe_fire(f"list {prefix}", after=True)
        return iter(listed)


def is_commit(call: str) -> bool:
    return call.startswith("put_if_absent ") and "/_log/" in call and ".checkpoint." not in call


def hooked(
    warehouse: ledger.Warehouse,
    name: str,
    hook: Callable[[], Any],
    when: Callable[[str], bool] = is_commit,
    after: bool = False,
) -> tuple[ledger.Table, HookStore]:
    store = HookStore(warehouse.store, when, hook, after)
    return ledger.Warehouse(store).table(name), store


def _seeded(location: Location) -> tuple[ledger.Warehouse, Any]:
    warehouse = location.connect()
    table = create(warehouse, "t", "collapsing")
    seed(table)
    assert all(len(partition_files(table, p)) >= 3 for p in "012")
    return warehouse, policy_answer(table)


@pytest.fixture
def seeded(location: Location) -> tuple[ledger.Warehouse, Any]:
    """Table ``t`` with several files per partition, on each backend; and its answer."""
    return _seeded(location)


@pytest.fixture
def seeded_local(local_location: Location) -> tuple[ledger.Warehouse, Any]:
    """The same on local disk only: most interleavings are the same on every backend, so
    only a few also run on S3 (where each costs seconds)."""
    return _seeded(local_location)


def test_a_merge_whose_inputs_another_merge_took_first_gives_them_up(
    seeded: tuple[ledger.Warehouse, Any],
) -> None:
    warehouse, answer = seeded
    other = warehouse.table("t")
    merging, hook = hooked(warehouse, "t", lambda: other.merge({"k_bucket": "0"}))
    result = merging.merge()

    assert hook.fired and hook.hook_result.version is not None
    assert result.version == hook.hook_result.version + 1
    assert [c["k_bucket"] for c in result.conflicts] == ["0"]
    assert sorted(p.partition["k_bucket"] for p in result.merged) == ["1", "2"]
    table = check_files(warehouse, "t")  # the losing partition's new file was deleted
    assert [len(partition_files(table, p)) for p in "012"] == [1, 1, 1]
    assert policy_answer(table) == answer


def test_a_merge_all_of_whose_inputs_were_taken_commits_nothing(
    seeded_local: tuple[ledger.Warehouse, Any],
) -> None:
    warehouse, answer = seeded_local
    other = warehouse.table("t")
    merging, hook = hooked(warehouse, "t", lambda: other.merge())
    version_before = other.version
    result = merging.merge()

    assert hook.hook_result.version == version_before + 1
    assert result.version is None and result.merged == ()
    assert sorted(c["k_bucket"] for c in result.conflicts) == ["0", "1", "2"]
    table = check_files(warehouse, "t")
    assert table.version == version_before + 1
    assert policy_answer(table) == answer


@pytest.mark.parametrize("change", ["drop", "rewrite"])
def test_a_merge_gives_way_to_a_drop_or_rewrite_of_its_partition(
    seeded_local: tuple[ledger.Warehouse, Any], change: str
) -> None:
    warehouse, _ = seeded_local
    other = warehouse.table("t")
    if change == "drop":
        run = lambda: other.drop_partitions({"k_bucket": "1"})  # noqa: E731
    else:
        run = lambda: other.rewrite_partitions(  # noqa: E731
            {"k_bucket": "1"}, "SELECT * FROM entries WHERE k % 2 = 0"
        )
    merging, hook = hooked(warehouse, "t", run)
    result = merging.merge()

    assert hook.hook_result.version is not None
    changed = policy_answer(warehouse.table("t"), hook.hook_result.version)
    assert [c["k_bucket"] for c in result.conflicts] == ["1"]
    assert sorted(p.partition["k_bucket"] for p in result.merged) == ["0", "2"]
    table = check_files(warehouse, "t")
    assert policy_answer(table) == changed  # the drop or rewrite stands, merged or not
    if change == "drop":
        assert partition_files(table, "1") == []
    else:
        assert len(partition_files(table, "1")) >= 1


def test_a_merge_racing_only_appends_commits_and_keeps_them(
    seeded_local: tuple[ledger.Warehouse, Any],
) -> None:
    warehouse, _ = seeded_local
    other = warehouse.table("t")
    new_rows = [{"k": k, "v": k, "n": 1} for k in range(100, 120)]  # every partition
    merging, hook = hooked(warehouse, "t", lambda: other.insert(new_rows))
    result = merging.merge()

    appended = hook.hook_result
    assert appended.version is not None and result.version == appended.version + 1
    assert result.conflicts == ()
    assert sorted(p.partition["k_bucket"] for p in result.merged) == ["0", "1", "2"]
    table = check_files(warehouse, "t")
    appended_files = set(table.snapshot(version=appended.version).state.files) - set(
        table.snapshot(version=appended.version - 1).state.files
    )
    assert len(appended_files) == 3
    assert appended_files <= {m.path for m in table.snapshot().state.alive_files}
    # The merged answer is the appended one: nothing the append wrote was merged away or lost.
    assert policy_answer(table) == policy_answer(table, appended.version)
    assert [len(partition_files(table, p)) for p in "012"] == [2, 2, 2]


def test_two_merges_of_disjoint_files_both_commit(
    seeded_local: tuple[ledger.Warehouse, Any],
) -> None:
    warehouse, answer = seeded_local
    files = partition_files(warehouse.table("t"), "0")
    first, second = files[:2], files[2:4]
    assert len(second) == 2
    other = warehouse.table("t")
    merging, hook = hooked(warehouse, "t", lambda: other.merge(files=second))
    result = merging.merge(files=first)

    assert hook.hook_result.version is not None and hook.hook_result.conflicts == ()
    assert result.version == hook.hook_result.version + 1 and result.conflicts == ()
    assert (result.files_in, hook.hook_result.files_in) == (2, 2)
    table = check_files(warehouse, "t")
    remaining = set(partition_files(table, "0"))
    assert not remaining & set(files[:4])
    assert len(remaining) == len(files) - 4 + 2
    assert policy_answer(table) == answer


def test_vacuum_never_takes_a_running_merges_files_for_orphans(
    location: Location, short_skew: None
) -> None:
    """The merge's outputs are written but not committed when vacuum runs with no grace: with a
    short timeout and skew margin they are still younger than both, so they stay (vacuum must
    not go by the grace alone) and the merge commits."""
    warehouse = location.connect()
    table = create(warehouse, "t", "collapsing", transaction_timeout=5)
    seed(table)
    answer = policy_answer(table)
    other = warehouse.table("t")
    merging, hook = hooked(warehouse, "t", lambda: other.vacuum(0))
    result = merging.merge()

    assert hook.fired and hook.hook_result.orphans_deleted == 0
    assert result.version is not None and len(result.merged) == 3
    table = check_files(warehouse, "t")
    assert policy_answer(table) == answer


def test_a_merge_committing_between_vacuums_listing_and_state_loses_nothing(
    seeded_local: tuple[ledger.Warehouse, Any],
) -> None:
    """Vacuum lists the data files, then a merge commits (new files unlisted, inputs just
    tombstoned), then vacuum reads the state: nothing alive may be deleted."""
    warehouse, answer = seeded_local
    other = warehouse.table("t")
    vacuuming, hook = hooked(
        warehouse, "t", lambda: other.merge(), when=lambda c: c.endswith("/_data/"), after=True
    )
    result = vacuuming.vacuum(0)

    assert hook.fired and hook.hook_result.version is not None
    assert (result.data_files_deleted, result.orphans_deleted) == (0, 0)
    table = check_files(warehouse, "t")
    assert policy_answer(table) == answer
    # The inputs are tombstoned now; the next vacuum expunges and deletes them.
    inputs = hook.hook_result.files_in
    assert warehouse.table("t").vacuum(0).data_files_deleted == inputs
    assert policy_answer(check_files(warehouse, "t")) == answer


def test_merges_starting_together_never_duplicate_entries(local_location: Location) -> None:
    location = local_location
    warehouse = location.connect()
    table = create(warehouse, "t", "aggregating")
    seed(table, batches=5)
    answer = policy_answer(table)
    entries_before = table.scan().aggregate("count(*)").fetchall()[0][0]
    handles = [location.connect().table("t") for _ in range(4)]
    barrier = threading.Barrier(len(handles))

    def merge(handle: ledger.Table) -> Any:
        barrier.wait(timeout=60)
        return handle.merge()

    with ThreadPoolExecutor(len(handles)) as pool:
        results = list(pool.map(merge, handles))

    committed = [r for r in results if r.version is not None]
    assert committed, results
    # Each partition's files were merged by exactly one merge; the others gave it up.
    merged = Counter(p.partition["k_bucket"] for r in results for p in r.merged)
    assert merged == Counter("012"), results
    for r in results:
        assert not {p.partition["k_bucket"] for p in r.merged} & {
            c["k_bucket"] for c in r.conflicts
        }
    table = check_files(warehouse, "t")
    assert [len(partition_files(table, p)) for p in "012"] == [1, 1, 1]
    entries_after = table.scan().aggregate("count(*)").fetchall()[0][0]
    assert entries_after == sum(r.entries_out for r in results) < entries_before
    assert policy_answer(table) == answer


# --- vacuum and writers whose snapshot it overtook -----------------------------------------------


def test_a_transaction_open_across_a_vacuum_gets_a_fresh_trx_id_and_commits(
    location: Location,
) -> None:
    """Vacuum deletes trx_id reservations at or below the largest committed trx_id. A
    transaction whose snapshot predates the latest commit reserves its id above the max *it*
    saw, so it must still not get the committed id whose reservation vacuum just deleted; and
    a commit carrying that id must not be mistaken for its own."""
    warehouse = location.connect()
    table = create(warehouse, "t", "collapsing")
    table.insert([{"k": 1, "v": 1, "n": 1}])
    tx = warehouse.table("t").transaction()  # snapshot: version 1
    other = warehouse.table("t")
    committed = other.insert([{"k": 2, "v": 2, "n": 1}])  # version 2
    other.vacuum(7 * 24 * 3600)  # a week's grace: routine (it may delete reservations)
    tx.insert([{"k": 3, "v": 3, "n": 1}])
    assert tx.trx_id != committed.trx_id, f"trx_id {tx.trx_id} was handed out twice"
    info = tx.commit()
    assert info.version == committed.version + 1, (info, committed)
    fresh = warehouse.table("t")
    assert sorted(r[0] for r in fresh.scan().project("k").fetchall()) == [1, 2, 3]
    trx_ids = [r.trx_id for r in fresh.history() if r.trx_id is not None]
    assert len(set(trx_ids)) == len(trx_ids), trx_ids


def test_a_merge_overtaken_by_a_commit_and_a_vacuum_reports_only_what_it_committed(
    local_location: Location,
) -> None:
    """The same hazard for a merge: just before it reserves its trx_id another writer commits
    and a vacuum deletes that commit's reservation. The merge must not take the commit that
    carries "its" trx_id for its own: if it says it committed, its outputs are in the table."""
    warehouse, answer = _seeded(local_location)
    other = warehouse.table("t")

    def commit_and_vacuum() -> Any:
        info = other.insert([{"k": 500, "v": 5, "n": 1}])
        other.vacuum(7 * 24 * 3600)
        return info

    merging, hook = hooked(
        warehouse, "t", commit_and_vacuum, when=lambda c: c.startswith("list ") and "_trx" in c
    )
    result = merging.merge()
    appended = hook.hook_result
    table = check_files(warehouse, "t") if result.version is None else warehouse.table("t")
    if result.version is not None:
        assert result.version != appended.version, (
            f"the merge reports version {result.version}, which is the insert's commit"
        )
        for merged in result.merged:  # its output, and at most the insert's file
            assert len(partition_files(table, merged.partition["k_bucket"])) <= 2
        check_files(warehouse, "t")
    assert policy_answer(table) == policy_answer(table, appended.version)
    assert len(policy_answer(table)["visible"]) == len(answer["visible"]) + 1
    trx_ids = [r.trx_id for r in table.history() if r.trx_id is not None]
    assert len(set(trx_ids)) == len(trx_ids), trx_ids


def _vacuumed_log_hazard(warehouse: ledger.Warehouse, writer: str) -> None:
    """docs/merges.md 4.4: with vacuum's grace shorter than a transaction, "a transaction whose
    snapshot's commits were vacuumed cannot check its conflicts and fails with ConflictError (a
    blind append still commits)". Either way, what a writer is told committed must be in the
    table. Here the writer's snapshot is version 2; meanwhile version 3 commits (and checkpoints)
    and a vacuum runs with a grace shorter than the writer's age."""
    table = create(warehouse, "t", "collapsing", checkpoint_interval=3)
    table.insert([{"k": k, "v": k, "n": 1} for k in range(6)])  # 1
    table.insert([{"k": k, "v": k, "n": 1} for k in range(6, 12)])  # 2
    other = warehouse.table("t")

    def commit_and_vacuum() -> Any:
        other.insert([{"k": 50, "v": 50, "n": 1}])  # 3, checkpointed
        time.sleep(0.3)
        return other.vacuum(0.2)

    if writer == "blind append":
        tx = warehouse.table("t").transaction()
        tx.insert([{"k": 99, "v": 99, "n": 1}])
        vacuumed = commit_and_vacuum()
        try:
            reported = tx.commit().version
        except ledger.ConflictError:
            reported = None
    else:
        merging, hook = hooked(warehouse, "t", commit_and_vacuum)
        reported = merging.merge().version
        vacuumed = hook.hook_result
    # A vacuum going by the grace alone deletes commit files 0..3 here; one that also waits
    # for every running transaction (the table's timeout) deletes none.
    assert vacuumed.log_files_deleted in (0, 4, 5), vacuumed

    if reported is None:
        assert writer == "merge", "a blind append must still commit (docs/merges.md 4.4)"
        check_files(warehouse, "t")
        return
    # The writer was told it committed version `reported`: the table must show it.
    fresh = warehouse.table("t")
    assert fresh.version >= reported
    if writer == "blind append":
        keys = {row[0] for row in fresh.scan().project("k").fetchall()}
        assert 99 in keys, f"the append committed as version {reported} is not in the table"
    else:
        merged = [m for m in fresh.snapshot().state.alive_files if m.trx_min < m.trx_max]
        assert merged, f"the merge committed as version {reported} is not in the table"
    check_files(warehouse, "t")


def test_a_blind_append_whose_snapshots_log_was_vacuumed_still_commits(
    location: Location,
) -> None:
    _vacuumed_log_hazard(location.connect(), "blind append")


def test_a_merge_whose_snapshots_log_was_vacuumed_commits_or_reports_nothing(
    local_location: Location,
) -> None:
    _vacuumed_log_hazard(local_location.connect(), "merge")


# --- free-running races ------------------------------------------------------------------------


def race_roles(
    location: Location,
    name: str,
    *,
    appenders: int,
    steps: int,
    duration_s: float,
    merge_options: Sequence[dict[str, Any]],
    vacuums: int,
    drops: tuple[str, ...],
    grace_s: float,
) -> list[RaceRole]:
    common = {"uri": location.uri, "options": location.options, "table": name}
    roles = [RaceRole(**common, role=APPEND, index=i, steps=steps) for i in range(appenders)]
    roles += [
        RaceRole(**common, role=MERGE, index=i, duration_s=duration_s, merge_options=dict(o))
        for i, o in enumerate(merge_options)
    ]
    roles += [
        RaceRole(**common, role=VACUUM, index=i, duration_s=duration_s, grace_s=grace_s)
        for i in range(vacuums)
    ]
    gaps = tuple(duration_s * (i + 1) / (len(drops) + 1) for i in range(len(drops)))
    roles.append(RaceRole(**common, role=DROP, index=0, drops=drops, drop_after_s=gaps))
    return roles


def run_in_threads(roles: Sequence[RaceRole], barrier: Any) -> list[RaceOutcome]:
    with ThreadPoolExecutor(max_workers=len(roles)) as pool:
        futures = [pool.submit(run_race_role, role, barrier) for role in roles]
        return [o for f in futures for o in f.result(timeout=RESULT_TIMEOUT_S)]


def plant_orphans(warehouse: ledger.Warehouse, table: ledger.Table, count: int) -> set[str]:
    """Data files no commit references (as a crashed writer leaves them)."""
    planted = set()
    for i in range(count):
        path = f"_data/k_bucket={i % 3}/{uuid.uuid4().hex}.parquet"
        warehouse.store.put(table.prefix + path, b"PAR1 left by a crashed writer PAR1")
        planted.add(path)
    return planted


def replay(
    warehouse: ledger.Warehouse, name: str, policy: str, outcomes: Sequence[RaceOutcome]
) -> ledger.Table:
    """A fresh table given the committed appends and drops, one at a time in version order."""
    table = create(warehouse, name, policy)
    seed(table)
    logical = sorted(
        (o for o in outcomes if o.version is not None and o.role in (APPEND, DROP)),
        key=lambda o: o.version or 0,
    )
    for o in logical:
        if o.kind == DROP:
            table.drop_partitions({"k_bucket": o.payload[0]})
            continue
        rows = [{"k": k, "v": v, "n": n} for k, v, n in o.payload] if o.kind != "delete" else []
        if o.kind == "insert":
            info = table.insert(rows)
        elif o.kind == "upsert":
            info = table.upsert(rows)
        else:
            info = table.delete(list(o.payload))
        assert (info.inserted, info.deleted) == (o.inserted, o.deleted), (o, info)
    return table


def check_race(
    warehouse: ledger.Warehouse,
    name: str,
    policy: str,
    outcomes: Sequence[RaceOutcome],
    seed_version: int,
    planted: set[str],
) -> None:
    committed = [o for o in outcomes if o.version is not None]
    trx_ids = Counter(o.trx_id for o in committed if o.trx_id is not None)
    twice = [o for o in committed if o.trx_id is not None and trx_ids[o.trx_id] > 1]
    assert not twice, f"appends were told the same trx_id: {twice}"
    versions = Counter(o.version for o in committed)
    shared = [o for o in committed if versions[o.version] > 1]
    assert not shared, f"operations were told the same version: {shared}"
    table = warehouse.table(name)
    assert table.version == seed_version + len(committed), "a commit nobody reported, or lost"
    appends = [o for o in outcomes if o.role == APPEND]
    assert sum(o.version is not None for o in appends) >= len(appends) // 2, appends
    merges = [o for o in outcomes if o.role == MERGE]
    assert any(o.version is not None for o in merges), merges
    assert sum(o.version is not None for o in outcomes if o.role == DROP) >= 1
    for o in merges:
        assert not set(o.merged) & set(o.conflicts), o

    check_files(warehouse, name)
    expected = replay(warehouse, f"{name}_replay", policy, outcomes)
    assert policy_answer(table) == policy_answer(expected), "the race differs from its replay"

    # Vacuums ran past the orphan age of the planted files (grace, the timeout, the margin).
    assert not planted & data_files(warehouse.store, table), "planted orphans survived"


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("backend", "policy"),
    [
        ("local", "collapsing"),
        ("local", "replacing"),
        ("local", "aggregating"),
        ("local", "dedup"),
        ("s3", "replacing"),
    ],
)
def test_threads_append_merge_vacuum_and_drop_like_a_serial_replay(
    request: pytest.FixtureRequest, tmp_path: Any, short_skew: None, backend: str, policy: str
) -> None:
    location = _location(request, tmp_path, backend)
    timeout_s, grace_s, duration_s = RACE_TIMING[backend]
    warehouse = location.connect()
    table = create(warehouse, "race", policy, transaction_timeout=timeout_s)
    planted = plant_orphans(warehouse, table, 2)
    seed(table)
    roles = race_roles(
        location,
        "race",
        appenders=2,
        steps=12 if backend == "local" else 9,
        duration_s=duration_s,
        merge_options=[{}, {"order": "descending", "max_partitions": 1, "max_files": 3}],
        vacuums=2,
        drops=("2", "0"),
        grace_s=grace_s,
    )
    outcomes = run_in_threads(roles, threading.Barrier(len(roles)))
    check_race(warehouse, "race", policy, outcomes, table.version, planted)


@pytest.mark.timeout(240)
def test_processes_and_threads_append_merge_vacuum_and_drop_like_a_serial_replay(
    local_location: Location, short_skew: None
) -> None:
    """Two spawned processes append and one merges (with its clock-skew margin set there too),
    while threads here merge other files, vacuum and drop."""
    timeout_s, grace_s, duration_s = RACE_TIMING["local"]
    warehouse = local_location.connect()
    table = create(warehouse, "race", "collapsing", transaction_timeout=timeout_s)
    planted = plant_orphans(warehouse, table, 2)
    seed(table)
    roles = race_roles(
        local_location,
        "race",
        appenders=2,
        steps=12,
        duration_s=duration_s,
        merge_options=[{"files": 3}, {"order": "descending"}],
        vacuums=1,
        drops=("1",),
        grace_s=grace_s,
    )
    in_processes = [r for r in roles if r.role == APPEND] + [roles[2]]
    in_threads = [r for r in roles if r not in in_processes]
    assert in_processes[-1].role == MERGE and len(in_threads) == 3
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(len(roles))
    with context.Pool(
        len(in_processes), initializer=init_race_process, initargs=(barrier, SKEW_MS)
    ) as pool:
        pending = pool.map_async(run_race_role_in_process, in_processes, chunksize=1)
        threaded = run_in_threads(in_threads, barrier)
        outcomes = [o for result in pending.get(RESULT_TIMEOUT_S) for o in result] + threaded
    assert {o.role for o in outcomes} == {APPEND, MERGE, VACUUM, DROP}
    check_race(warehouse, "race", "collapsing", outcomes, table.version, planted)


def _location(request: pytest.FixtureRequest, tmp_path: Any, backend: str) -> Location:
    if backend == "local":
        return Location("local", str(tmp_path / "warehouse"))
    from tests.support.s3server import BUCKET

    endpoint = request.getfixturevalue("s3_endpoint")
    return Location("s3", f"s3://{BUCKET}/{uuid.uuid4().hex}", endpoint.options())


# --- drops staged against appends and merges (IceDB's hazards (a) and (b): its drop rewrote the
# alive list it had read, and a merge after a drop could resurrect dropped files) ----------------

# --- a drop of one partition, then vacuum, keeps every other partition


def test_dropping_one_partition_then_vacuum_keeps_every_other_partition(location, monkeypatch):
    table = region_table(location)
    for region, first in (("eu", 0), ("us", 10), ("ap", 20)):
        add_rows(table, region, [first, first + 1])
        add_rows(table, region, [first + 2])
    table.merge({"region": "us"})  # us: one alive file, two tombstoned ones for vacuum
    other = other_handle(location)
    # IceDB's drop rewrote the alive list it had read, losing files committed meanwhile: an
    # append to another partition lands between this drop's read and its commit.
    racing = run_once_before(
        monkeypatch,
        table.handle,
        "commit",
        lambda: other.insert([{"id": 30, "region": "ap", "v": 30}]),
    )

    dropped = table.drop_partitions({"region": "eu"})
    assert dropped.version == racing[0].version + 1  # the drop committed after the append
    assert (dropped.files_removed, dropped.entries_removed) == (2, 3)
    vacuumed = vacuum_now(table)
    assert vacuumed.data_files_deleted == 4  # eu's two files and us's merged inputs

    fresh = other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [10, 11, 12, 20, 21, 22, 30]
    assert {m.partition["region"] for m in fresh.snapshot().markers()} == {"us", "ap"}
    assert fresh.count() == 7
    assert_files_consistent(location, tombstones_allowed=False)


# --- a merge after a drop does not resurrect dropped files


@LOCAL_ONLY
def test_a_merge_after_a_drop_does_not_resurrect_dropped_files(location):
    table = region_table(location)
    for region, first in (("eu", 0), ("us", 10)):
        add_rows(table, region, [first])
        add_rows(table, region, [first + 1])
    table.drop_partitions({"region": "eu"})

    merged = table.merge()
    assert [p.partition for p in merged.merged] == [{"region": "us"}]
    vacuum_now(table)
    # Only us's merged file is left, and it has nothing to merge (docs/merges.md section 1).
    assert table.merge(min_files=1).files_in == 0
    fresh = other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [10, 11]
    assert fresh.count() == 2
    assert_files_consistent(location)


def test_a_merge_racing_a_drop_gives_the_dropped_partition_up(location, monkeypatch):
    table = region_table(location)
    for region, first in (("eu", 0), ("us", 10)):
        add_rows(table, region, [first])
        add_rows(table, region, [first + 1])
    other = other_handle(location)
    # The merge has read both partitions and written their new files when the drop commits.
    dropped = run_once_before(
        monkeypatch, merging, "_commit", lambda: other.drop_partitions({"region": "eu"})
    )

    result = table.merge()
    assert dropped[0].files_removed == 2
    assert result.version == dropped[0].version + 1
    assert [p.partition for p in result.merged] == [{"region": "us"}]
    assert result.conflicts == ({"region": "eu"},)
    fresh = other_handle(location)
    assert [r[0] for r in visible_rows(fresh)] == [10, 11]
    assert {m.partition["region"] for m in fresh.snapshot().markers()} == {"us"}
    assert_files_consistent(location)  # eu's merged output was deleted, not left behind
    vacuum_now(fresh)
    assert fresh.count() == 2
    assert_files_consistent(location, tombstones_allowed=False)
