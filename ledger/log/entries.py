"""Log entries as frozen dataclasses with explicit JSON (de)serialisation.

One log file is newline-delimited JSON, in the lineage of IceDB's log:

    line 0   meta        {"v": 1, "t": ms, "sch": 1, "f": n, "tmb"?: n, "version": N, "op": ...}
    line 1   schema      {"column": "SQL TYPE", ...}
    lines    tombstones  {"p": "_log/...", "t": ms}           (superseded log files)
    lines    files       {"p": "_data/...", "b": bytes, "t": ms, "tmb"?: ms, "rows": ..., ...}

``sch``, ``tmb`` and ``f`` are the 0-based line numbers where each section starts. See
docs/format.md for every field.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ledger.errors import CorruptLogError
from ledger.schema import TableSchema
from merge_policies import DEFAULT_POLICY

FORMAT_VERSION = 1
JsonValue = Any


def json_value(value: Any) -> JsonValue:
    """A key value as JSON: ISO text for dates and times, text for decimals, hex for bytes."""
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return "base64:" + base64.b64encode(value).decode("ascii")
    return value


DATA_FOLDER = "_data"


def life_data_folder(config: TableConfig) -> str:
    """The data folder of a table created again after a drop: ``_data-<table uuid as hex>``."""
    return f"{DATA_FOLDER}-{config.table_uuid.replace('-', '')}"


@dataclass(frozen=True)
class TableConfig:
    """Everything about a table that is not its schema; stored in the first commit and every
    checkpoint (and in any commit that changes it)."""

    table_uuid: str
    primary_key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    partition_by_key_only: bool = False
    sort_by: tuple[str, ...] = ()
    policy: Mapping[str, Any] = field(default_factory=lambda: {"name": DEFAULT_POLICY})
    checkpoint_interval: int = 50
    generated_row_id: bool = False
    # A transaction (or merge) open longer than this cannot commit, so vacuum may delete files no
    # commit references once they are older than this, and a replacing merge may drop a delete
    # mark once every transaction that began before it has timed out.
    transaction_timeout_ms: int = 3_600_000
    # On a rollup table: what it rolls up (see ledger.rollup.RollupDefinition).
    rollup: Mapping[str, Any] | None = None
    # On a base table: rollups refreshed in the same call as each write.
    auto_refresh: tuple[str, ...] = ()
    # Where this life of the table writes data files: "_data" for the first life, a folder of
    # its own for a table created again after a drop (vacuum then never takes the files of the
    # dropped life, which its snapshots still read, for orphans of the new one).
    data_folder: str = DATA_FOLDER
    # A SELECT over the relation ``rows`` run on the rows of every insert, upsert and update
    # before they are checked against the schema (see ledger.insert_transform).
    insert_transform: str | None = None

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns that identify an entry's row: the primary key, or the generated row id."""
        return ("_row_id",) if self.generated_row_id else self.primary_key

    def to_json(self) -> dict[str, Any]:
        return {
            "table_uuid": self.table_uuid,
            "primary_key": list(self.primary_key),
            "partition_by": list(self.partition_by),
            "partition_by_key_only": self.partition_by_key_only,
            "sort_by": list(self.sort_by),
            "policy": dict(self.policy),
            "checkpoint_interval": self.checkpoint_interval,
            "generated_row_id": self.generated_row_id,
            "transaction_timeout_ms": self.transaction_timeout_ms,
            **({"rollup": dict(self.rollup)} if self.rollup is not None else {}),
            **({"auto_refresh": list(self.auto_refresh)} if self.auto_refresh else {}),
            **({"data_folder": self.data_folder} if self.data_folder != DATA_FOLDER else {}),
            **(
                {"insert_transform": self.insert_transform}
                if self.insert_transform is not None
                else {}
            ),
        }

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> TableConfig:
        return TableConfig(
            table_uuid=str(data["table_uuid"]),
            primary_key=tuple(data["primary_key"]),
            partition_by=tuple(data.get("partition_by", ())),
            partition_by_key_only=bool(data.get("partition_by_key_only", False)),
            sort_by=tuple(data.get("sort_by", ())),
            policy=dict(data.get("policy", {"name": DEFAULT_POLICY})),
            checkpoint_interval=int(data.get("checkpoint_interval", 50)),
            generated_row_id=bool(data.get("generated_row_id", False)),
            transaction_timeout_ms=int(data.get("transaction_timeout_ms", 3_600_000)),
            rollup=None if data.get("rollup") is None else dict(data["rollup"]),
            auto_refresh=tuple(data.get("auto_refresh", ())),
            data_folder=str(data.get("data_folder", DATA_FOLDER)),
            insert_transform=(
                None if data.get("insert_transform") is None else str(data["insert_transform"])
            ),
        )


@dataclass(frozen=True)
class FileMarker:
    """One data file: IceDB's ``{"p", "b", "t", "tmb"?}`` plus ledger statistics."""

    path: str  # relative to the table root: _data/<partition path>/<uuid>.parquet
    size: int
    created_ms: int
    rows: int
    dml_sum: int  # sum of dml_type: the file's contribution to the logical row count
    trx_min: int
    trx_max: int
    partition: Mapping[str, str | None] = field(default_factory=dict)
    key_min: tuple[JsonValue, ...] | None = None  # per key column
    key_max: tuple[JsonValue, ...] | None = None
    tombstoned_ms: int | None = None
    # No key occurs twice in the file: with no delete mark in it (dml_sum == rows) and no other
    # file's key range overlapping its own, its rows are visible as they are (see views).
    unique_keys: bool = False

    @property
    def alive(self) -> bool:
        return self.tombstoned_ms is None

    def tombstone(self, at_ms: int) -> FileMarker:
        return replace(self, tombstoned_ms=at_ms)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"p": self.path, "b": self.size, "t": self.created_ms}
        if self.tombstoned_ms is not None:
            out["tmb"] = self.tombstoned_ms
        out.update(
            rows=self.rows,
            dml_sum=self.dml_sum,
            trx_min=self.trx_min,
            trx_max=self.trx_max,
            part=dict(self.partition),
        )
        if self.key_min is not None:
            out["key_min"] = list(self.key_min)
            out["key_max"] = list(self.key_max or ())
        if self.unique_keys:
            out["uniq"] = True
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> FileMarker:
        key_min = data.get("key_min")
        key_max = data.get("key_max")
        return FileMarker(
            path=str(data["p"]),
            size=int(data["b"]),
            created_ms=int(data["t"]),
            tombstoned_ms=None if data.get("tmb") is None else int(data["tmb"]),
            rows=int(data["rows"]),
            dml_sum=int(data["dml_sum"]),
            trx_min=int(data["trx_min"]),
            trx_max=int(data["trx_max"]),
            partition=dict(data.get("part", {})),
            key_min=None if key_min is None else tuple(key_min),
            key_max=None if key_max is None else tuple(key_max),
            unique_keys=bool(data.get("uniq", False)),
        )


@dataclass(frozen=True)
class LogTombstone:
    """A log file superseded by a checkpoint, deletable after the grace period."""

    path: str
    tombstoned_ms: int

    def to_json(self) -> dict[str, Any]:
        return {"p": self.path, "t": self.tombstoned_ms}

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> LogTombstone:
        return LogTombstone(str(data["p"]), int(data["t"]))


@dataclass(frozen=True)
class AppBatch:
    """An idempotency token: committing the same (app_id, batch) twice is a no-op.

    ``token``, when the writer gives one, names the rows it sent for the batch: a writer whose
    commit of the batch may have landed (the answer was lost) tells its own commit from another
    writer's by it (ledger.buffered_writer)."""

    app_id: str
    batch: int
    token: str | None = None


@dataclass(frozen=True)
class LogFile:
    """One log file: a commit (changes since the previous version) or a checkpoint (the state)."""

    version: int
    timestamp_ms: int
    operation: str
    schema: TableSchema
    files: tuple[FileMarker, ...] = ()
    log_tombstones: tuple[LogTombstone, ...] = ()
    trx_id: int | None = None
    config: TableConfig | None = None
    app: AppBatch | None = None
    checkpoint: bool = False
    # State carried by checkpoints only.
    max_trx_id: int | None = None
    # A checkpoint's: the highest batch of every app of the state. A commit's: the app batches
    # it carries when it carries more than one (``app`` holds a single one), e.g. one per file
    # of a ``ledger load``.
    apps: Mapping[str, int] | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    # Paths of tombstoned files whose markers vacuum removed from the state (files deleted).
    expunged: tuple[str, ...] = ()

    def to_jsonl(self) -> bytes:
        tombstones_at = 2
        files_at = tombstones_at + len(self.log_tombstones)
        meta: dict[str, Any] = {
            "v": FORMAT_VERSION,
            "t": self.timestamp_ms,
            "sch": 1,
            "f": files_at,
        }
        if self.log_tombstones:
            meta["tmb"] = tombstones_at
        # Not in IceDB's meta line: the number of lines, so a file cut at a line boundary is
        # detected instead of silently losing its last file markers.
        meta["lines"] = files_at + len(self.files)
        meta["version"] = self.version
        meta["op"] = self.operation
        if self.trx_id is not None:
            meta["trx_id"] = self.trx_id
        if self.app is not None:
            meta["app"] = {"id": self.app.app_id, "batch": self.app.batch}
            if self.app.token is not None:
                meta["app"]["token"] = self.app.token
        if self.checkpoint:
            meta["checkpoint"] = True
            meta["max_trx_id"] = self.max_trx_id
            meta["apps"] = dict(self.apps or {})
        elif self.apps:
            meta["apps"] = dict(self.apps)
        if self.config is not None:
            meta["config"] = self.config.to_json()
        if self.info:
            meta["info"] = dict(self.info)
        if self.expunged:
            meta["expunged"] = list(self.expunged)
        lines = [meta, self.schema.to_json()]
        lines += [t.to_json() for t in self.log_tombstones]
        lines += [f.to_json() for f in self.files]
        return (
            "\n".join(json.dumps(line, separators=(",", ":")) for line in lines) + "\n"
        ).encode()

    @staticmethod
    def parse(data: bytes, source: str) -> LogFile:
        """Parse a log file; any malformed line raises :class:`CorruptLogError` naming it."""
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CorruptLogError(f"log file {source} is not UTF-8: {e}") from e
        if not text.endswith("\n"):
            raise CorruptLogError(
                f"log file {source} is truncated (no final newline); it was not written by a "
                "complete commit. Restore it from a backup; the table will not guess its state"
            )
        raw_lines = text.split("\n")[:-1]
        parsed = _parse_lines(raw_lines, source)
        expected = parsed[0].get("lines") if parsed else None
        if expected is not None and expected != len(parsed):
            raise CorruptLogError(
                f"log file {source} is truncated or padded: its meta line announces {expected} "
                f"lines but it holds {len(parsed)}. Restore it from a backup; the table will not "
                "guess its state"
            )
        try:
            meta = parsed[0]
            schema = TableSchema.from_json(parsed[int(meta["sch"])])
            files_at = int(meta["f"])
            tombstones_at = int(meta.get("tmb", files_at))
            tombstones = tuple(LogTombstone.from_json(x) for x in parsed[tombstones_at:files_at])
            files = tuple(FileMarker.from_json(x) for x in parsed[files_at:])
            app = meta.get("app")
            return LogFile(
                version=int(meta["version"]),
                timestamp_ms=int(meta["t"]),
                operation=str(meta["op"]),
                schema=schema,
                files=files,
                log_tombstones=tombstones,
                trx_id=None if meta.get("trx_id") is None else int(meta["trx_id"]),
                config=None if "config" not in meta else TableConfig.from_json(meta["config"]),
                app=None
                if app is None
                else AppBatch(
                    str(app["id"]),
                    int(app["batch"]),
                    None if app.get("token") is None else str(app["token"]),
                ),
                checkpoint=bool(meta.get("checkpoint", False)),
                max_trx_id=None if meta.get("max_trx_id") is None else int(meta["max_trx_id"]),
                apps=None
                if meta.get("apps") is None
                else {str(k): int(b) for k, b in meta["apps"].items()},
                info=dict(meta.get("info", {})),
                expunged=tuple(str(p) for p in meta.get("expunged", ())),
            )
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise CorruptLogError(
                f"log file {source}: missing or malformed field ({type(e).__name__}: {e})"
            ) from e


def _parse_lines(raw_lines: list[str], source: str) -> list[dict[str, Any]]:
    """Parse JSON lines; one ``json.loads`` of the whole file when it is well formed (fast for
    checkpoints of many files), line by line to name the bad line when it is not."""
    try:
        values = json.loads("[" + ",".join(raw_lines) + "]")
        if len(values) == len(raw_lines) and all(isinstance(v, dict) for v in values):
            return values  # type: ignore[no-any-return]
    except json.JSONDecodeError:
        pass
    parsed: list[dict[str, Any]] = []
    for number, line in enumerate(raw_lines):
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorruptLogError(f"log file {source} line {number}: not valid JSON ({e})") from e
        if not isinstance(value, dict):
            raise CorruptLogError(f"log file {source} line {number}: expected a JSON object")
        parsed.append(value)
    return parsed


def sum_markers(markers: Sequence[FileMarker]) -> int:
    """The logical row count of a set of files: the sum of their ``dml_sum``."""
    return sum(m.dml_sum for m in markers)
