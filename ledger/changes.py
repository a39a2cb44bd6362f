"""What changed in a table between two versions, from its log: the entries to read, with signs.

A transaction's commit adds files holding exactly its entries (``trx_id`` tells them apart). A
merge rewrites entries without changing any answer, and vacuum only deletes what no version
needs, so neither changes anything. Dropping or rewriting partitions removes whole files (their
entries count with the opposite sign) and adds the rewritten ones. Summing each entry's
``dml_type`` times its values over a change set gives exactly the difference between the two
versions' totals, which is what the change feed and rollup refreshes rely on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa

from ledger.errors import InvalidArgumentError, SnapshotNotFoundError
from ledger.log.entries import FileMarker, LogFile
from ledger.log.state import CREATE, DROP
from ledger.schema import COMMIT_TIMESTAMP, COMMIT_VERSION, TRX_ID

if TYPE_CHECKING:
    from ledger.table import Table

# Operations that never change an answer.
_NEUTRAL = frozenset({"merge", "vacuum", "checkpoint", "set_auto_refresh", "set_insert_transform"})
# Operations that remove files (and may add their replacements); a rewrite carries a trx_id
# only to recognise its own commit, its entries keep theirs.
_REPLACING = frozenset({"drop_partitions", "rewrite_partitions"})


@dataclass(frozen=True)
class CommitFiles:
    """Files one maintenance commit removed (entries negated) and added (entries as written)."""

    version: int
    timestamp_ms: int
    removed: tuple[FileMarker, ...]
    added: tuple[FileMarker, ...]


@dataclass(frozen=True)
class ChangeSet:
    """The changes of versions ``since`` (exclusive) to ``until`` (inclusive)."""

    since: int
    until: int
    # Files transactions added; their entries' trx_id finds the commit in ``commits``.
    written: tuple[FileMarker, ...] = ()
    commits: dict[int, tuple[int, int]] = field(default_factory=dict)  # trx_id -> (version, ms)
    replaced: tuple[CommitFiles, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.written and not any(c.removed or c.added for c in self.replaced)

    def commit_stamps(self) -> pa.Table:
        """The commits of the written files: ``trx_id``, ``_commit_version`` and
        ``_commit_timestamp``, the relation the change entries query joins them to."""
        return pa.table(
            {
                TRX_ID: pa.array(list(self.commits), pa.int64()),
                COMMIT_VERSION: pa.array([v for v, _ in self.commits.values()], pa.int64()),
                COMMIT_TIMESTAMP: pa.array(
                    [ms for _, ms in self.commits.values()], pa.timestamp("ms", "UTC")
                ),
            }
        )


def change_set(table: Table, since: int, until: int | None = None) -> ChangeSet:
    """The changes committed after version ``since`` up to ``until`` (default: the latest).

    Raises :class:`SnapshotNotFoundError` when the log no longer holds those commits or vacuum
    has deleted files they added (older than vacuum's grace period)."""
    latest = table.handle.latest_state()
    end = latest.version if until is None else until
    if not isinstance(since, int) or isinstance(since, bool) or since < 0:
        raise InvalidArgumentError(
            f"since_version must be a version (an integer >= 0), got {since!r}"
        )
    if since > latest.version:
        raise InvalidArgumentError(
            f"since_version {since} is past the latest version of {table.name!r} "
            f"({latest.version}): there are no changes after it yet"
        )
    if not isinstance(end, int) or isinstance(end, bool) or end < since:
        raise InvalidArgumentError(
            f"until_version must be a version >= since_version ({since}), got {until!r}"
        )
    if end > latest.version:
        raise SnapshotNotFoundError(
            f"table {table.name!r} has no version {end} yet (latest: {latest.version})"
        )
    if end == since:
        return ChangeSet(since, end)
    listing = table.handle.log.listing()
    wanted = range(since + 1, end + 1)
    missing = [v for v in wanted if v not in listing.commits]
    if missing:
        raise SnapshotNotFoundError(
            f"the changes of {table.name!r} after version {since} are no longer in its log "
            f"(vacuum trimmed it up to version {missing[-1]}); read a later version, or rebuild "
            "what follows the table from a snapshot"
        )
    entries = table.handle.log.read_many([listing.commits[v] for v in wanted])
    written: list[FileMarker] = []
    commits: dict[int, tuple[int, int]] = {}
    replaced: list[CommitFiles] = []
    for entry in entries:
        _refuse_recreation(table, entry)
        if entry.operation in _NEUTRAL:
            continue
        if entry.trx_id is not None and entry.operation not in _REPLACING:
            written += [m for m in entry.files if m.alive]
            commits[entry.trx_id] = (entry.version, entry.timestamp_ms)
        elif entry.files:
            replaced.append(
                CommitFiles(
                    entry.version,
                    entry.timestamp_ms,
                    tuple(latest.files.get(m.path, m) for m in entry.files if not m.alive),
                    tuple(m for m in entry.files if m.alive),
                )
            )
    needed = [*written, *(m for c in replaced for m in (*c.removed, *c.added))]
    gone = [m.path for m in needed if m.path not in latest.files]
    if gone:
        raise SnapshotNotFoundError(
            f"the changes of {table.name!r} after version {since} need {len(gone)} data file(s) "
            f"vacuum has deleted (e.g. {gone[0]}); read from a version within vacuum's grace "
            "period, or rebuild what follows the table from a snapshot"
        )
    return ChangeSet(since, end, tuple(written), commits, tuple(replaced))


def _refuse_recreation(table: Table, entry: LogFile) -> None:
    if entry.operation in (CREATE, DROP):
        raise SnapshotNotFoundError(
            f"table {table.name!r} was dropped or created again at version {entry.version}: "
            "its changes cannot span that version"
        )
