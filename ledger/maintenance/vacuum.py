"""Vacuum: delete what no snapshot newer than the grace period can read.

1. Data files tombstoned longer ago than ``grace``: a ``vacuum`` commit removes their markers
   from the state (and a checkpoint is written at once), then the files are deleted. Files a
   transaction that can still commit may read or check for conflicts stay, however short the
   grace: see :func:`_needed_by_running_transactions`.
2. Orphan data files, written by an operation that failed or was aborted and referenced by no
   commit: deleted once older than both ``grace`` and the table's transaction timeout. The data
   folder is listed *before* the state is read, and a transaction cannot commit after its
   timeout, so a file that is still going to be committed is never taken for an orphan.
3. Log files older than the newest checkpoint that every snapshot within ``grace`` can start
   from, and ``trx_id`` reservations at or below the largest committed one.
4. Temporary files (``.tmp-<hex>`` on local disk) that writers killed in the middle of a write
   left in the table folder: deleted once as old as orphans must be. A live write holds its
   temporary file only for the length of one put, far less than that.

Vacuum takes no lock: merges, appends and other vacuums may run at the same time. Deleting a
file twice, or expunging a marker another vacuum already expunged, is harmless.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ledger.errors import InvalidArgumentError
from ledger.log.commit import next_timestamp, write_checkpoint
from ledger.log.entries import DATA_FOLDER, LogFile
from ledger.log.state import TableState
from ledger.log.table_log import LogListing, TableLog, VacuumedLogError
from ledger.maintenance import merge as merging
from ledger.transaction import check_timeout
from ledger.trx_ids import ID_DIGITS, reservation_id, reservation_prefix, reservation_snapshot

if TYPE_CHECKING:
    from ledger.table import Table

log = logging.getLogger(__name__)

VACUUM = "vacuum"
# As Delta Lake's VACUUM: a week covers the snapshots readers and running jobs commonly hold.
DEFAULT_GRACE = dt.timedelta(days=7)


@dataclass(frozen=True)
class VacuumResult:
    """What :meth:`Table.vacuum` deleted. ``version`` is the vacuum commit (None if none)."""

    version: int | None
    data_files_deleted: int
    orphans_deleted: int
    log_files_deleted: int
    reservations_deleted: int
    temporaries_deleted: int = 0
    grace: dt.timedelta = DEFAULT_GRACE  # the grace period this vacuum kept


def vacuum_table(table: Table, grace: dt.timedelta | float = DEFAULT_GRACE) -> VacuumResult:
    grace_ms = _grace_ms(grace)
    now = int(time.time() * 1000)
    # A life's data folder never changes, and this handle only ever sees its own life.
    data_prefix = f"{table.prefix}{table.handle.state.config.data_folder}/"
    listed = list(table.store.list(data_prefix))  # before the state: see the module docstring
    state = table.handle.latest_state()
    cutoff = now - grace_ms
    # Read after the state: see _needed_by_running_transactions.
    needed = _needed_by_running_transactions(table, state, now, grace_ms)
    if needed is None:  # unknown: keep everything a transaction that can still commit may need
        cutoff = min(cutoff, _settled_cutoff(state, now, grace_ms))
        needed = frozenset()
    expired = sorted(
        m.path
        for m in state.files.values()
        if not m.alive and (m.tombstoned_ms or 0) < cutoff and m.path not in needed
    )
    version = None
    if expired:
        version, state = _expunge(table, state, expired, now)
    deleted = _delete_keys(table, [table.prefix + p for p in expired])

    # Anything a running transaction could still commit, or still aim its commit at, is
    # younger than this.
    settled_cutoff = _settled_cutoff(state, now, grace_ms)
    known = set(state.files) | set(expired)
    orphans = [
        info.key
        for info in listed
        if info.key[len(table.prefix) :] not in known
        and info.key.endswith(".parquet")
        and info.modified_ms < settled_cutoff
    ]
    orphans_deleted = _delete_keys(table, orphans)
    log_deleted, settled_trx_id = _vacuum_log(
        table,
        state.config.transaction_timeout_ms,
        lambda timeout_ms: _settled_cutoff_for(timeout_ms, now, grace_ms),
    )
    orphans_deleted += _vacuum_earlier_lives(table, state, settled_cutoff)
    reservations_deleted = _vacuum_reservations(table, settled_trx_id)
    temporaries_deleted = _delete_keys(
        table,
        [
            info.key
            for info in table.store.list_temporaries(table.prefix)
            if info.modified_ms < settled_cutoff
        ],
    )
    log.info(
        "table %s: vacuum deleted %d data files, %d orphans, %d log files, %d reservations, "
        "%d temporary files",
        table.name,
        deleted,
        orphans_deleted,
        log_deleted,
        reservations_deleted,
        temporaries_deleted,
    )
    return VacuumResult(
        version,
        deleted,
        orphans_deleted,
        log_deleted,
        reservations_deleted,
        temporaries_deleted,
        dt.timedelta(milliseconds=grace_ms),
    )


def _grace_ms(grace: dt.timedelta | float) -> int:
    if isinstance(grace, dt.timedelta):
        seconds = grace.total_seconds()
    elif isinstance(grace, int | float) and not isinstance(grace, bool):
        seconds = float(grace)
    else:
        raise InvalidArgumentError(
            f"grace must be a timedelta or a number of seconds, got {type(grace).__name__}"
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise InvalidArgumentError(
            f"grace must be a finite, non-negative duration, got {seconds} s"
        )
    return int(seconds * 1000)


def _settled_cutoff(state: TableState, now: int, grace_ms: int) -> int:
    return _settled_cutoff_for(state.config.transaction_timeout_ms, now, grace_ms)


def _settled_cutoff_for(transaction_timeout_ms: int, now: int, grace_ms: int) -> int:
    return now - max(grace_ms, transaction_timeout_ms) - merging.CLOCK_SKEW_MS


def _needed_by_running_transactions(
    table: Table, state: TableState, now: int, grace_ms: int
) -> frozenset[str] | None:
    """Paths of data files a transaction that can still commit may read (the files alive at
    its snapshot) or check for conflicts (the files committed after it): every file added or
    tombstoned by a commit after the oldest snapshot of a running transaction. None when that
    cannot be told (then nothing tombstoned within the transaction timeout may go).

    A running transaction is a ``trx_id`` reservation younger than the transaction timeout
    (plus the clock-skew margin) whose id no commit carries; it names a version at or below
    the transaction's snapshot. A transaction reserves before it reads its snapshot, and this
    lists reservations after ``state`` was read, so one it misses reads a snapshot at or after
    ``state``, whose tombstoned files it can never need.
    """
    live_since = now - state.config.transaction_timeout_ms - merging.CLOCK_SKEW_MS
    if now - grace_ms <= live_since:
        return frozenset()  # the grace already outlasts every transaction that can commit
    prefix = reservation_prefix(table.prefix)
    snapshots: dict[int, int | None] = {}
    for info in table.store.list(prefix):
        trx_id = reservation_id(info.key[len(prefix) :])
        if trx_id is None or info.modified_ms < live_since:
            continue
        try:
            snapshots[trx_id] = reservation_snapshot(table.store.get(info.key))
        except FileNotFoundError:
            continue  # discarded by its transaction, which did not commit
    if not snapshots:
        return frozenset()
    bounds = [v for v in snapshots.values() if v is not None]
    try:
        commits = table.handle.log.commits_after(min([*bounds, state.version]))
    except VacuumedLogError:
        return None
    committed = {c.trx_id for c in commits if c.trx_id is not None}
    running = [v for n, v in snapshots.items() if n not in committed]
    if not running:
        return frozenset()
    if None in running:  # a reservation without a snapshot bound: its reader may be older
        return None
    oldest = min(v for v in running if v is not None)
    return frozenset(m.path for c in commits if c.version > oldest for m in c.files)


def _expunge(
    table: Table, base: TableState, expired: list[str], started_ms: int
) -> tuple[int | None, TableState]:
    def build(latest: TableState) -> LogFile | None:
        check_timeout(latest, started_ms, table.name)
        still = tuple(p for p in expired if p in latest.files and not latest.files[p].alive)
        if not still:
            return None  # another vacuum got there first
        return LogFile(
            version=latest.version + 1,
            timestamp_ms=next_timestamp(latest),
            operation=VACUUM,
            schema=latest.schema,
            expunged=still,
            info={"expunged": len(still)},
        )

    state, entry = table.handle.commit(build, base)
    if entry is not None:
        # Readers start from this checkpoint, so they never replay the expunged markers.
        write_checkpoint(table.handle.log, state)
    return (None if entry is None else entry.version), state


def _vacuum_log(table: Table, timeout_ms: int, cutoff_for: Callable[[int], int]) -> tuple[int, int]:
    """Delete the log files no snapshot committed after the cutoff (nor the one current at it)
    needs: everything before the newest checkpoint at or below that snapshot's version.

    ``cutoff_for(transaction timeout in ms)`` is older than any running transaction, so no
    writer can still aim a commit at a deleted version (its put-if-absent would succeed on the
    freed name and be lost), nor hold a recently confirmed state that a deleted version follows
    (docs/format.md 6.1). The timeout is the longest of every life of the table whose log files
    would go, since a writer of a dropped life counts by its own.
    Returns the number deleted and the largest ``trx_id`` committed by that checkpoint.
    """
    table_log = table.handle.log
    listing = table_log.listing()
    while True:
        trim = _log_trim(table_log, listing, cutoff_for(timeout_ms))
        if trim is None:
            return 0, 0
        doomed, checkpoint = trim
        longest = _longest_timeout_of_other_lives(table_log, doomed, checkpoint)
        if longest is None:
            return 0, 0  # another vacuum is trimming the log: leave it to that one
        if longest <= timeout_ms:
            break
        timeout_ms = longest  # a dropped life's writers wait longer: trim only what they allow
    return _delete_keys(table, doomed), checkpoint.max_trx_id or 0


def _longest_timeout_of_other_lives(
    table_log: TableLog, doomed: list[str], checkpoint: LogFile
) -> int | None:
    """The longest transaction timeout of the lives the ``doomed`` log files describe, when
    they may include lives before ``checkpoint``'s (0 for a table never dropped; None when a
    doomed file is already gone)."""
    if checkpoint.config is None or checkpoint.config.data_folder == DATA_FOLDER:
        return 0  # the table's first life: every doomed file is of this life
    try:
        entries = table_log.read_many(doomed)
    except FileNotFoundError:
        return None
    configs = [entry.config for entry in entries if entry.config is not None]
    return max((c.transaction_timeout_ms for c in configs), default=0)


def _log_trim(
    table_log: TableLog, listing: LogListing, cutoff_ms: int
) -> tuple[list[str], LogFile] | None:
    """The log files to delete for ``cutoff_ms`` (oldest first) and the checkpoint that then
    starts the log, or None when nothing may go."""
    versions = sorted(listing.commits)
    if not versions or not listing.checkpoints:
        return None
    # The version current at the cutoff: the last commit at or before it (binary search, since
    # commit times strictly increase along the log).
    low, high, current = 0, len(versions) - 1, None
    while low <= high:
        middle = (low + high) // 2
        entry = table_log.read(listing.commits[versions[middle]])
        if entry.timestamp_ms <= cutoff_ms:
            current, low = versions[middle], middle + 1
        else:
            high = middle - 1
    if current is None:
        return None
    usable = [v for v in listing.checkpoints if v <= current]
    if not usable:
        return None
    keep_from = max(usable)
    checkpoint = table_log.read(listing.checkpoints[keep_from])
    doomed = [listing.commits[v] for v in versions if v <= keep_from]
    doomed += [listing.checkpoints[v] for v in listing.checkpoints if v < keep_from]
    # Oldest first: a crash part-way leaves a log that still starts at a readable point.
    doomed.sort()
    return doomed, checkpoint


def _vacuum_earlier_lives(table: Table, state: TableState, cutoff_ms: int) -> int:
    """Delete the data files of earlier, dropped lives of the table once the log no longer
    names them (its oldest file belongs to this life, so no snapshot of theirs can be read).

    Each life writes into a data folder of its own (``_data`` for the first, ``_data-<uuid>``
    for later ones), so this is the only place one life's vacuum touches another's files.
    """
    current = state.config.data_folder
    others = [
        name
        for name in table.store.list_dirs(table.prefix)
        if (name == DATA_FOLDER or name.startswith(DATA_FOLDER + "-")) and name != current
    ]
    if not others or _log_names_an_earlier_life(table, state):
        return 0
    doomed = [
        info.key
        for name in others
        for info in table.store.list(f"{table.prefix}{name}/")
        if info.modified_ms < cutoff_ms
    ]
    return _delete_keys(table, doomed)


def _log_names_an_earlier_life(table: Table, state: TableState) -> bool:
    listing = table.handle.log.listing()
    oldest = min([*listing.commits, *listing.checkpoints], default=None)
    if oldest is None:
        return True  # cannot tell: keep
    first = table.handle.log.read(listing.checkpoints.get(oldest) or listing.commits[oldest])
    return first.config is None or first.config.table_uuid != state.config.table_uuid


def _vacuum_reservations(table: Table, settled_trx_id: int) -> int:
    """Delete reservations of ids committed before every running transaction began: such a
    transaction's snapshot already counts them, so it never reserves at or below them. (A
    reservation only above a *stale* snapshot's maximum must stay, or that id could be
    reserved twice.)"""
    if settled_trx_id <= 0:
        return 0
    prefix = reservation_prefix(table.prefix)
    limit = f"{prefix}{settled_trx_id:0{ID_DIGITS}d}"
    doomed = [info.key for info in table.store.list(prefix) if info.key <= limit]
    return _delete_keys(table, doomed)


def _delete_keys(table: Table, keys: list[str]) -> int:
    deleted = 0
    for key in keys:
        try:
            table.store.delete(key)
            deleted += 1
        except FileNotFoundError:
            pass
    return deleted
