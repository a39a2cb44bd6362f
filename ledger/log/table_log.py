"""Reading a table's log: listing versions, checkpoints, replay, incremental refresh.

Keys under ``<table>/_log/``::

    00000000000000000042.jsonl              the commit of version 42
    00000000000000000050.checkpoint.jsonl   the whole state at version 50
    _last_checkpoint                        a hint {"version": 50}; a lower bound, never trusted

Opening a table reads the hint, lists the log after the hinted checkpoint, and reads the newest
checkpoint plus the commits after it, in parallel.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ledger.errors import CorruptLogError, SnapshotNotFoundError, TableNotFoundError
from ledger.log.entries import LogFile
from ledger.log.state import TableState
from ledger.storage import Store

log = logging.getLogger(__name__)

VERSION_DIGITS = 20
_LOG_NAME = re.compile(r"^([0-9]{20})(\.checkpoint)?\.jsonl$", re.ASCII)
MAX_VERSION = 2**63 - 1  # the log's integers are signed 64-bit
HINT = "_last_checkpoint"
_READ_THREADS = 16


_reported: set[str] = set()


def _report_foreign(key: str, why: str) -> None:
    """Log a foreign name under ``_log/`` once: it is ignored, never let stop the table."""
    if key not in _reported:
        _reported.add(key)
        log.warning("ignoring %s: %s", key, why)


def _version_of(key: str | None, log_prefix: str) -> int | None:
    """The version a log key names (None for no key or another name)."""
    match = None if key is None else _LOG_NAME.match(key[len(log_prefix) :])
    return None if match is None else int(match.group(1))


class VacuumedLogError(SnapshotNotFoundError):
    """The commits after a version are gone: vacuum replaced them with a newer checkpoint."""


@dataclass(frozen=True)
class LogListing:
    """Versions found by one listing of the log."""

    commits: dict[int, str]
    checkpoints: dict[int, str]


class TableLog:
    """The log of the table stored under ``prefix`` (``"<name>/"``) in ``store``."""

    def __init__(self, store: Store, prefix: str, name: str) -> None:
        self.store = store
        self.prefix = prefix
        self.name = name
        self.log_prefix = prefix + "_log/"

    # --- keys ----------------------------------------------------------------------------------

    def commit_key(self, version: int) -> str:
        return f"{self.log_prefix}{version:0{VERSION_DIGITS}d}.jsonl"

    def checkpoint_key(self, version: int) -> str:
        return f"{self.log_prefix}{version:0{VERSION_DIGITS}d}.checkpoint.jsonl"

    # --- listing and reading -------------------------------------------------------------------

    def listing(self, start_after: str | None = None) -> LogListing:
        commits: dict[int, str] = {}
        checkpoints: dict[int, str] = {}
        for info in self.store.list(self.log_prefix, start_after=start_after):
            match = _LOG_NAME.match(info.key[len(self.log_prefix) :])
            if match is None:
                continue  # the hint, a write in progress, or a name no writer makes
            version = int(match.group(1))
            if version > MAX_VERSION:
                _report_foreign(info.key, "its version does not fit the log's 64-bit integers")
                continue
            target = checkpoints if match.group(2) else commits
            target[version] = info.key
        self._drop_foreign_tail(commits, checkpoints, _version_of(start_after, self.log_prefix))
        return LogListing(commits, checkpoints)

    def _drop_foreign_tail(
        self, commits: dict[int, str], checkpoints: dict[int, str], listed_after: int | None
    ) -> None:
        """Drop a run of names past the end of the log that hold no log file.

        A writer writes version v only after reading v - 1, so a log's versions run without a
        gap from its oldest listed one (vacuum removes only from the bottom). A run of versions at
        the top that follows neither a lower version nor the listing's start is read: if its
        first name is not a log file of its version the run is foreign and ignored (logged
        once); if it is, it stays, and the readers report the gap below it as corruption.
        """
        versions = sorted({*commits, *checkpoints})
        while versions:
            first = len(versions) - 1
            while first and versions[first - 1] == versions[first] - 1:
                first -= 1
            lowest = versions[first]
            if lowest == 0 or lowest - 1 == listed_after or (not first and listed_after is None):
                return
            keys = [found[lowest] for found in (commits, checkpoints) if lowest in found]
            if any(self._holds_log_file(k) for k in keys):
                return
            for version in versions[first:]:
                for found in (commits, checkpoints):
                    if version in found:
                        _report_foreign(found.pop(version), "it is not a log file of the log")
            versions = versions[:first]

    def _holds_log_file(self, key: str) -> bool:
        try:
            self.read(key)
        except CorruptLogError:
            return False
        except FileNotFoundError:
            return True  # removed since the listing (vacuum): not for this check to judge
        return True

    def read(self, key: str) -> LogFile:
        source = f"{self.store.uri}/{key}"
        entry = LogFile.parse(self.store.get(key), source)
        match = _LOG_NAME.match(key[len(self.log_prefix) :])
        if match is not None and int(match.group(1)) != entry.version:
            raise CorruptLogError(
                f"log file {source} holds version {entry.version}, not the version its name "
                "says; the file was copied or overwritten by something other than a commit"
            )
        return entry

    def read_many(self, keys: Sequence[str]) -> list[LogFile]:
        """Read log files in parallel, in the order given."""
        if len(keys) <= 1:
            return [self.read(k) for k in keys]
        with ThreadPoolExecutor(max_workers=min(_READ_THREADS, len(keys))) as pool:
            return list(pool.map(self.read, keys))

    def _hint(self) -> int | None:
        try:
            return int(json.loads(self.store.get(self.log_prefix + HINT))["version"])
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, OverflowError) as e:
            # The hint is only an optimisation: a broken one costs a full listing, nothing else.
            log.warning("ignoring unreadable checkpoint hint of table %s: %s", self.name, e)
            return None

    # --- states --------------------------------------------------------------------------------

    def load(self, version: int | None = None) -> TableState:
        """The state at ``version`` (the latest if None)."""
        if version is None:
            hint = self._hint()
            # Listing starts just before the hinted checkpoint's key, so it is listed too.
            listing = self.listing(start_after=None if not hint else self.commit_key(hint - 1))
            if hint and hint not in listing.checkpoints:
                listing = self.listing()  # the hinted checkpoint is gone; fall back to everything
        else:
            listing = self.listing()
        if not listing.commits and not listing.checkpoints:
            raise TableNotFoundError(f"table {self.name!r} does not exist in {self.store.uri}")
        latest = max([*listing.commits, *listing.checkpoints])
        target = latest if version is None else version
        if target > latest or target < 0:
            raise SnapshotNotFoundError(
                f"table {self.name!r} has no version {target}; its latest version is {latest}"
            )
        usable = [v for v in listing.checkpoints if v <= target]
        if usable:
            base_version = max(usable)
            base_key = listing.checkpoints[base_version]
        elif 0 in listing.commits:
            base_version, base_key = 0, listing.commits[0]
        else:
            raise SnapshotNotFoundError(
                f"version {target} of table {self.name!r} is older than every checkpoint left "
                "after vacuum; read a newer version"
            )
        needed = list(range(base_version + 1, target + 1))
        missing = [v for v in needed if v not in listing.commits]
        if missing:
            raise CorruptLogError(
                f"table {self.name!r}: log versions {missing[:5]} are missing between checkpoint "
                f"{base_version} and version {target}"
            )
        return self._replay(base_key, [listing.commits[v] for v in needed])

    def _replay(self, base_key: str, commit_keys: Sequence[str]) -> TableState:
        """The state a checkpoint (or first commit) plus the commits after it describe."""
        files = self.read_many([base_key, *commit_keys])
        return TableState.start(files[0], f"{self.store.uri}/{base_key}").apply(files[1:])

    def commits_after(self, version: int) -> list[LogFile]:
        """Every commit after ``version``, in order (no checkpoint shortcut)."""
        listing = self.listing(start_after=self.commit_key(version))
        return self._read_commits(listing, version)

    def _read_commits(self, listing: LogListing, after: int) -> list[LogFile]:
        versions = sorted(v for v in listing.commits if v > after)
        expected = list(range(after + 1, after + 1 + len(versions)))
        if versions != expected and any(v > after for v in listing.checkpoints):
            raise VacuumedLogError(
                f"table {self.name!r}: the commits after version {after} were removed by vacuum "
                "(a newer checkpoint replaces them); read the table again"
            )
        if versions != expected:
            raise CorruptLogError(
                f"table {self.name!r}: log versions after {after} are not consecutive: "
                f"{versions[:10]}"
            )
        return self.read_many([listing.commits[v] for v in versions])

    def refresh(self, state: TableState) -> TableState:
        """The latest state, reading only what was committed after ``state``."""
        if self._lists_whole_folder() and self._unchanged_since(state.version):
            return state
        listing = self.listing(start_after=self.commit_key(state.version))
        newer = [v for v in listing.checkpoints if v > state.version]
        vacuumed = state.version + 1 not in listing.commits  # removed by vacuum, or no commits
        if newer and (len(listing.commits) > 1 or vacuumed):
            base_version = max(newer)
            rest = [listing.commits[v] for v in sorted(listing.commits) if v > base_version]
            return self._replay(listing.checkpoints[base_version], rest)
        return state.apply(self._read_commits(listing, state.version))

    def _lists_whole_folder(self) -> bool:
        """Whether a listing reads every name of the log folder (a local disk) rather than
        only the names after the held version (an object store: one request, cheaper than the
        two existence checks of :meth:`_unchanged_since`)."""
        return self.store.local_path(self.log_prefix) is not None

    def _unchanged_since(self, version: int) -> bool:
        """Whether nothing was committed after ``version``, from two existence checks instead
        of a listing (which grows with the log on a local disk): the next version's commit is
        not there, and ``version``'s own commit still is. Vacuum deletes commits oldest first,
        so while ``version``'s commit stands no newer one was deleted."""
        return not self._exists(self.commit_key(version + 1)) and self._exists(
            self.commit_key(version)
        )

    def _exists(self, key: str) -> bool:
        try:
            self.store.size(key)
        except FileNotFoundError:
            return False
        return True
