"""The state of a table at a version: what replaying its log up to that version gives."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ledger.errors import CorruptLogError
from ledger.log.entries import FileMarker, LogFile, LogTombstone, TableConfig
from ledger.schema import TableSchema

CREATE = "create_table"
DROP = "drop_table"


@dataclass(frozen=True)
class TableState:
    """Files (alive and tombstoned), schema and config of a table at one version."""

    version: int
    timestamp_ms: int
    config: TableConfig
    schema: TableSchema
    files: Mapping[str, FileMarker]
    max_trx_id: int
    apps: Mapping[str, int]
    dropped: bool = False

    @property
    def alive_files(self) -> list[FileMarker]:
        return [m for m in self.files.values() if m.alive]

    @staticmethod
    def start(first: LogFile, source: str) -> TableState:
        """The state a checkpoint or a table's first commit describes."""
        if first.config is None:
            raise CorruptLogError(
                f"log file {source} should hold the table config (it is a checkpoint or the "
                "first commit) but has none"
            )
        if not first.checkpoint and first.operation != CREATE:
            raise CorruptLogError(
                f"log file {source} should create the table but is {first.operation!r}"
            )
        return TableState(
            version=first.version,
            timestamp_ms=first.timestamp_ms,
            config=first.config,
            schema=first.schema,
            files={m.path: m for m in first.files},
            max_trx_id=(first.max_trx_id if first.checkpoint else first.trx_id) or 0,
            apps=dict(first.apps or {}),
        )

    def apply(self, commits: Sequence[LogFile]) -> TableState:
        """The state after ``commits`` (consecutive versions following this one)."""
        if not commits:
            return self
        files = dict(self.files)
        apps = dict(self.apps)
        config, schema, dropped = self.config, self.schema, self.dropped
        max_trx_id, version, timestamp_ms = self.max_trx_id, self.version, self.timestamp_ms
        for commit in commits:
            if commit.version != version + 1:
                raise CorruptLogError(
                    f"log version {commit.version} follows version {version}: the log has a gap"
                )
            version, timestamp_ms = commit.version, commit.timestamp_ms
            if commit.operation == CREATE:  # the table was dropped and created again
                files, apps, dropped = {}, {}, False
            if commit.operation == DROP:
                dropped = True
            if commit.config is not None:
                config = commit.config
            schema = commit.schema
            for marker in commit.files:
                files[marker.path] = marker
            for path in commit.expunged:
                if path in files and not files[path].alive:
                    del files[path]
            if commit.trx_id is not None:
                max_trx_id = max(max_trx_id, commit.trx_id)
            if commit.app is not None:
                apps[commit.app.app_id] = max(apps.get(commit.app.app_id, -1), commit.app.batch)
            for app_id, batch in (commit.apps or {}).items():
                apps[app_id] = max(apps.get(app_id, -1), batch)
        return TableState(version, timestamp_ms, config, schema, files, max_trx_id, apps, dropped)

    def checkpoint(self, timestamp_ms: int, superseded: Sequence[str]) -> LogFile:
        """A log file holding this whole state."""
        return LogFile(
            version=self.version,
            timestamp_ms=self.timestamp_ms,
            operation="checkpoint",
            schema=self.schema,
            files=tuple(self.files.values()),
            log_tombstones=tuple(LogTombstone(p, timestamp_ms) for p in superseded),
            config=self.config,
            checkpoint=True,
            max_trx_id=self.max_trx_id,
            apps=dict(self.apps),
        )
