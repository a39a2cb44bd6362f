"""The commit loop: optimistic concurrency on put-if-absent, no lock service.

A writer builds the log file for ``latest + 1`` and writes it with put-if-absent. Losing the
version means someone else committed first: the writer reads the new commits, asks the caller's
conflict check whether they touch what it read, rebuilds its entry on the new state and tries
the next version. Blind appends have no conflict check, so they never fail this way.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Sequence

from ledger.errors import ConflictError, TableDroppedError
from ledger.log.entries import LogFile
from ledger.log.state import CREATE, DROP, TableState
from ledger.log.table_log import HINT, TableLog, VacuumedLogError

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 200

BuildEntry = Callable[[TableState], LogFile | None]
ConflictCheck = Callable[[TableState, Sequence[LogFile]], None]


def no_conflicts(state: TableState, intervening: Sequence[LogFile]) -> None:
    """The check for blind appends: nothing another writer commits can invalidate them."""


def commit_entry(
    table_log: TableLog,
    base: TableState,
    build: BuildEntry,
    check: ConflictCheck = no_conflicts,
) -> tuple[TableState, LogFile | None]:
    """Commit what ``build`` makes on top of the latest state; return the new state and entry.

    ``build`` returns None when there is nothing to commit (an idempotent replay). ``check``
    raises :class:`ConflictError` when commits made since ``base`` invalidate the transaction.
    """
    state = base
    intervening: list[LogFile] = []
    attempted: LogFile | None = None
    for attempt in range(MAX_ATTEMPTS):
        if attempt:
            try:
                new = table_log.commits_after(state.version)
            except VacuumedLogError:
                # The commits since this writer's snapshot are gone (vacuum with a grace period
                # shorter than the transaction): what they changed can no longer be checked.
                state = _reload_alive(table_log, base)
                if check is not no_conflicts:
                    raise ConflictError(
                        f"table {table_log.name!r}: the commits since this transaction's "
                        "snapshot were vacuumed, so conflicts cannot be checked; nothing was "
                        "committed. Retry, and keep vacuum's grace longer than transactions"
                    ) from None
                new = []
            state = state.apply(new)
            landed = _own_commit(attempted, new)
            if landed is not None:
                # put_if_absent reported failure, but our entry is in the log: the store wrote it
                # and the response was lost (e.g. a retried request answered 412). It committed.
                return state, landed
            intervening.extend(new)
            _check_table_alive(table_log, intervening)
        elif base.dropped:
            raise TableDroppedError(f"table {table_log.name!r} was dropped")
        entry = build(state)
        if entry is None:  # nothing to commit (an idempotent replay): no conflict to report
            return state, None
        if attempt:
            check(state, intervening)
        if entry.version != state.version + 1:
            raise AssertionError("a commit must be built for the version after its state")
        attempted = entry
        if table_log.store.put_if_absent(table_log.commit_key(entry.version), entry.to_jsonl()):
            committed = state.apply([entry])
            _maybe_checkpoint(table_log, committed)
            return committed, entry
        log.debug("table %s: lost version %d, retrying", table_log.name, entry.version)
        time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
    landed = _own_commit(attempted, table_log.commits_after(state.version))
    if landed is not None:  # the last attempt's response was lost, but it committed
        return table_log.load(landed.version), landed
    raise ConflictError(
        f"table {table_log.name!r}: gave up after {MAX_ATTEMPTS} attempts to commit; the table "
        "is under heavy write contention. Retry later"
    )


def _reload_alive(table_log: TableLog, base: TableState) -> TableState:
    state = table_log.load()
    if state.dropped or state.config.table_uuid != base.config.table_uuid:
        raise TableDroppedError(
            f"table {table_log.name!r} was dropped while this transaction ran; nothing was "
            "committed. Open the table again"
        )
    return state


def _own_commit(attempted: LogFile | None, new: Sequence[LogFile]) -> LogFile | None:
    """The commit in ``new`` that is ``attempted`` itself, recognised by its unique trx_id and
    its data files (named at random: a commit that reused the id by mistake is not taken for
    this one)."""
    if attempted is None or attempted.trx_id is None:
        return None
    paths = [m.path for m in attempted.files]
    return next(
        (e for e in new if e.trx_id == attempted.trx_id and [m.path for m in e.files] == paths),
        None,
    )


def _check_table_alive(table_log: TableLog, intervening: Sequence[LogFile]) -> None:
    for entry in intervening:
        if entry.operation in (DROP, CREATE):
            raise TableDroppedError(
                f"table {table_log.name!r} was dropped (version {entry.version}) while this "
                "transaction ran; nothing was committed. Open the table again"
            )


def next_timestamp(state: TableState) -> int:
    """Commit time in ms, strictly increasing along the log even if clocks disagree."""
    return max(int(time.time() * 1000), state.timestamp_ms + 1)


def _maybe_checkpoint(table_log: TableLog, state: TableState) -> None:
    interval = state.config.checkpoint_interval
    if state.version == 0 or state.version % interval or state.dropped:
        return
    previous = state.version - interval
    # Paths in the log are relative to the table folder, for log tombstones as for file markers.
    superseded = [table_log.commit_key(v) for v in range(max(previous, 0) + 1, state.version + 1)]
    superseded.append(
        table_log.checkpoint_key(previous) if previous > 0 else table_log.commit_key(0)
    )
    superseded = [key[len(table_log.prefix) :] for key in superseded]
    write_checkpoint(table_log, state, superseded)


def write_checkpoint(
    table_log: TableLog, state: TableState, superseded: Sequence[str] = ()
) -> None:
    """Write the checkpoint of ``state`` and point the hint at it; failures only slow reads."""
    checkpoint = state.checkpoint(next_timestamp(state), superseded)
    try:
        table_log.store.put_if_absent(
            table_log.checkpoint_key(state.version), checkpoint.to_jsonl()
        )
        table_log.store.put(
            table_log.log_prefix + HINT, json.dumps({"version": state.version}).encode()
        )
    except Exception as e:  # the commit already landed; a missing checkpoint only slows reads
        log.warning("table %s: could not write checkpoint %d: %s", table_log.name, state.version, e)
