"""Writers for the concurrency suite: a plan of operations run by a thread or a spawned process.

Each writer opens its own warehouse and table handle, waits at a barrier so that every writer
starts together, runs its plan and returns what each operation committed. Everything here is top
level and picklable so that processes started with ``spawn`` can import and run it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import ledger

BARRIER_TIMEOUT_S = 120
# Read-modify-write operations on a handful of hot keys conflict often; give them room to win.
RMW_RETRIES = 30
MAX_INCREMENT_ATTEMPTS = 60

INSERT = "insert"
UPSERT = "upsert"
UPDATE = "update"
INCREMENT = "increment"
KINDS = (INSERT, UPSERT, INCREMENT, UPDATE)

# The keys writers fight over (seeded with v = 0 before they start), and where fresh keys begin.
SHARED_KEYS = (1, 2, 3)
COUNTER_KEY = 100
FRESH_KEY_BASE = 10_000


@dataclass(frozen=True)
class Step:
    """One operation of a plan. ``who`` is unique across the whole test, so every row written
    can be traced back to the step that wrote it."""

    kind: str
    key: int
    value: int
    who: str


@dataclass(frozen=True)
class Outcome:
    """What a step did. ``version`` is None when it gave up on conflicts (nothing committed).

    ``written`` is the ``v`` the step wrote (for an increment: the value it read plus one);
    ``seen_version`` is the table version the writer saw just before starting the step;
    ``started``/``finished`` are ``time.monotonic()`` readings (system-wide on every OS we run).
    """

    step: Step
    version: int | None
    trx_id: int | None
    written: int
    read: int | None
    seen_version: int
    started: float
    finished: float


@dataclass(frozen=True)
class Plan:
    """The steps one writer runs against table ``table`` of the warehouse at ``uri``."""

    uri: str
    table: str
    steps: tuple[Step, ...]
    options: dict[str, Any] = field(default_factory=dict)


def make_plan(
    uri: str,
    options: dict[str, Any],
    table: str,
    writer: int,
    n_steps: int,
    kinds: tuple[str, ...] = KINDS,
) -> Plan:
    """A writer's steps, cycling through ``kinds``: insert writes a fresh key, upsert and update
    a shared key, increment the counter key."""
    steps = []
    for i in range(n_steps):
        kind = kinds[(writer + i) % len(kinds)]
        who = f"w{writer}-{i}"
        value = writer * 1000 + i
        if kind == INSERT:
            key = FRESH_KEY_BASE + writer * 1000 + i
        elif kind == INCREMENT:
            key = COUNTER_KEY
        else:
            key = SHARED_KEYS[(writer + i) % len(SHARED_KEYS)]
        steps.append(Step(kind, key, value, who))
    return Plan(uri, table, tuple(steps), dict(options))


def run_plan(plan: Plan, barrier: Any = None) -> list[Outcome]:
    """Run every step of ``plan`` on a handle of its own, after waiting at ``barrier``."""
    table = ledger.connect(plan.uri, **plan.options).table(plan.table)
    if barrier is not None:
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
    return [_run_step(table, step) for step in plan.steps]


def _run_step(table: ledger.Table, step: Step) -> Outcome:
    seen_version = table.refresh().version
    started = time.monotonic()
    row = {"k": step.key, "v": step.value, "who": step.who}
    read = None
    written = step.value
    info: ledger.CommitInfo | None
    try:
        if step.kind == INSERT:
            info = table.insert([row])
        elif step.kind == UPSERT:
            info = table.upsert([row], retries=RMW_RETRIES)
        elif step.kind == UPDATE:
            info = table.update([row], retries=RMW_RETRIES)
        elif step.kind == INCREMENT:
            info, read = _increment(table, step)
            written = read + 1
        else:
            raise ValueError(f"unknown step kind {step.kind!r}")
    except ledger.ConflictError:
        info = None
    finished = time.monotonic()
    return Outcome(
        step=step,
        version=None if info is None else info.version,
        trx_id=None if info is None else info.trx_id,
        written=written,
        read=read,
        seen_version=seen_version,
        started=started,
        finished=finished,
    )


def _increment(table: ledger.Table, step: Step) -> tuple[ledger.CommitInfo, int]:
    """Read the counter, write it plus one; retry from scratch whenever the commit conflicts."""
    for _ in range(MAX_INCREMENT_ATTEMPTS):
        try:
            with table.transaction() as tx:
                current = tx.lookup([step.key])
                read = int(current["v"][0].as_py())
                tx.update([{"k": step.key, "v": read + 1, "who": step.who}])
        except ledger.ConflictError:
            continue
        assert tx.commit_info is not None
        return tx.commit_info, read
    raise ledger.ConflictError(
        f"{step.who}: no increment committed in {MAX_INCREMENT_ATTEMPTS} attempts"
    )


# --- spawned processes ----------------------------------------------------------------------

_process_barrier: Any = None


def init_process(barrier: Any) -> None:
    """Pool initializer: a multiprocessing barrier can only reach a child when it starts."""
    global _process_barrier
    _process_barrier = barrier


def run_plan_in_process(plan: Plan) -> list[Outcome]:
    return run_plan(plan, _process_barrier)


# --- maintenance races: appends, merges, vacuums and drops against one table ---------------------
# Used by tests/test_maintenance_concurrency.py. The table has columns k, v, n (primary key k) and
# is partitioned by bucket(3, k), so its partitions are k_bucket "0", "1" and "2".

APPEND = "append"
MERGE = "merge"
VACUUM = "vacuum"
DROP = "drop"
# The merge-time safety margins vacuum and replacing merges add for clock skew; a race lasting
# seconds needs them shorter than the default minute (set in every process that takes part).


@dataclass(frozen=True)
class RaceRole:
    """One participant of a maintenance race.

    ``append``: ``steps`` operations on keys of its own (insert two fresh keys, upsert one of
    them, delete the other), so appenders never conflict with each other. ``merge``: merges with
    ``merge_options`` (``{"files": n}`` merges ``n`` alive files picked at random) until
    ``duration_s`` has passed. ``vacuum``: vacuums with ``grace_s`` until ``duration_s`` has
    passed. ``drop``: after each of ``drop_after_s`` seconds drops partition ``drops[i]``.
    Appenders and mergers pause ``pause_s`` between operations.
    """

    uri: str
    options: dict[str, Any]
    table: str
    role: str
    index: int
    steps: int = 0
    duration_s: float = 0.0
    merge_options: dict[str, Any] = field(default_factory=dict)
    grace_s: float = 0.0
    drops: tuple[str, ...] = ()
    drop_after_s: tuple[float, ...] = ()
    pause_s: float = 0.05


@dataclass(frozen=True)
class RaceOutcome:
    """One operation of a race participant. ``version`` is None when nothing was committed.

    ``kind`` is insert, upsert, delete, merge, vacuum or drop; ``payload`` the rows (k, v, n) of
    an insert or upsert, the keys of a delete, or the partition of a drop. ``error`` names the
    exception class when the operation raised one of the errors a race may cause.
    """

    role: str
    index: int
    kind: str
    payload: tuple[Any, ...]
    version: int | None
    inserted: int = 0
    deleted: int = 0
    merged: tuple[str, ...] = ()  # partitions a merge committed
    conflicts: tuple[str, ...] = ()  # partitions a merge gave up
    error: str | None = None
    trx_id: int | None = None  # an append's, as its commit reported it


def append_rows(index: int, step: int) -> tuple[str, tuple[Any, ...]]:
    """Step ``step`` of appender ``index``: (kind, payload), on keys only it writes."""
    base = (index + 1) * 100_000 + (step // 3) * 10
    phase = step % 3
    if phase == 0:
        return "insert", ((base, step, 1), (base + 1, step, 1))
    if phase == 1:
        return "upsert", ((base, 1000 + step, 1),)
    return "delete", (base + 1,)


def run_race_role(role: RaceRole, barrier: Any = None) -> list[RaceOutcome]:
    """Run one participant on a handle of its own, after waiting at ``barrier``."""
    import random

    table = ledger.connect(role.uri, **role.options).table(role.table)
    if barrier is not None:
        barrier.wait(timeout=BARRIER_TIMEOUT_S)
    started = time.monotonic()
    outcomes: list[RaceOutcome] = []
    if role.role == APPEND:
        for step in range(role.steps):
            outcomes.append(_append_step(table, role, *append_rows(role.index, step)))
            time.sleep(role.pause_s)
    elif role.role == MERGE:
        rng = random.Random(role.index)
        while time.monotonic() - started < role.duration_s:
            outcomes.append(_merge_once(table, role, rng))
            time.sleep(role.pause_s)
    elif role.role == VACUUM:
        while time.monotonic() - started < role.duration_s:
            result = table.vacuum(role.grace_s)
            outcomes.append(RaceOutcome(VACUUM, role.index, VACUUM, (), result.version))
            time.sleep(0.1)
    elif role.role == DROP:
        for partition, after_s in zip(role.drops, role.drop_after_s, strict=True):
            time.sleep(max(0.0, started + after_s - time.monotonic()))
            change = table.drop_partitions({"k_bucket": partition})
            outcomes.append(RaceOutcome(DROP, role.index, DROP, (partition,), change.version))
    else:
        raise ValueError(f"unknown race role {role.role!r}")
    return outcomes


def _append_step(
    table: ledger.Table, role: RaceRole, kind: str, payload: tuple[Any, ...]
) -> RaceOutcome:
    rows = [{"k": k, "v": v, "n": n} for k, v, n in payload] if kind != "delete" else []
    try:
        if kind == "insert":
            info = table.insert(rows)
        elif kind == "upsert":
            info = table.upsert(rows, retries=RMW_RETRIES)
        else:
            info = table.delete(list(payload), retries=RMW_RETRIES)
    except ledger.ConflictError as e:  # gave up (or timed out): nothing committed
        return RaceOutcome(APPEND, role.index, kind, payload, None, error=type(e).__name__)
    trx_id = info.trx_id if info.version is not None else None
    return RaceOutcome(
        APPEND, role.index, kind, payload, info.version, info.inserted, info.deleted, trx_id=trx_id
    )


def _merge_once(table: ledger.Table, role: RaceRole, rng: Any) -> RaceOutcome:
    options = dict(role.merge_options)
    if "files" in options:
        alive = [m.path for m in table.snapshot().markers()]
        options["files"] = rng.sample(alive, min(len(alive), int(options["files"])))
        if len(options["files"]) < 2:
            return RaceOutcome(MERGE, role.index, MERGE, (), None)
    try:
        result = table.merge(**options)
    except ledger.InvalidArgumentError as e:  # a picked file was merged or dropped meanwhile
        if "files" not in options:
            raise
        return RaceOutcome(MERGE, role.index, MERGE, (), None, error=type(e).__name__)
    except ledger.ConflictError as e:  # timed out or gave up: nothing committed
        return RaceOutcome(MERGE, role.index, MERGE, (), None, error=type(e).__name__)
    return RaceOutcome(
        MERGE,
        role.index,
        MERGE,
        (),
        result.version,
        merged=tuple(str(p.partition.get("k_bucket")) for p in result.merged),
        conflicts=tuple(str(c.get("k_bucket")) for c in result.conflicts),
    )


def set_clock_skew_ms(skew_ms: int) -> None:
    """Shorten the clock-skew margin of merges and vacuum (vacuum reads merge's) in this
    process."""
    import ledger.maintenance.merge as merging

    merging.CLOCK_SKEW_MS = skew_ms


def init_race_process(barrier: Any, skew_ms: int) -> None:
    """Pool initializer for race participants: the barrier, and the clock-skew margin."""
    global _process_barrier
    _process_barrier = barrier
    set_clock_skew_ms(skew_ms)


def run_race_role_in_process(role: RaceRole) -> list[RaceOutcome]:
    return run_race_role(role, _process_barrier)
