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
