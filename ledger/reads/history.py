"""Key histories: every entry of some keys, with its commit's version and time."""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations
from ledger.errors import InvalidArgumentError, MissingKeyError, UnknownColumnError
from ledger.log.entries import FileMarker
from ledger.log.table_log import TableLog
from ledger.pruning import prune_by_keys
from ledger.snapshot import Snapshot
from ledger.sql.dialects import DIALECTS, dialect_named
from ledger.sql.history import history as history_tree
from ledger.sql.names import COMMIT_TIMESTAMP, COMMIT_VERSION, ENTRIES, TRX_ID
from ledger.sql.spec import TableSpec
from ledger.sql.trees import render
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb

KEYS = "keys"
COMMITS = "commits"


@dataclass(frozen=True)
class HistoryRequest:
    """What a key history reads, for any engine: the files that may hold the keys (pruned by
    their key ranges), the keys as a table, and each transaction's commit version and time."""

    snapshot: Snapshot
    files: list[FileMarker]
    keys: pa.Table
    commits: pa.Table

    @property
    def file_schema(self) -> pa.Schema:
        return file_schema(self.snapshot.state.schema, self.snapshot.state.config)

    def sql(self, dialect: str, *, entries: str, keys: str, commits: str) -> str:
        """The history query in ``dialect`` over relations of the files' entries, the keys
        and the commits, named ``entries``, ``keys`` and ``commits``."""
        return _history_text(TableSpec.of(self.snapshot.state), dialect, entries, keys, commits)


@functools.lru_cache(maxsize=256)
def _history_text(spec: TableSpec, dialect: str, entries: str, keys: str, commits: str) -> str:
    """Rendered once per table shape, dialect and relation names (rendering costs more than
    reading a key's few entries)."""
    return render(history_tree(spec, entries, keys, commits), dialect_named(dialect))


def history_request(snap: Snapshot, key: Any) -> HistoryRequest:
    """The inputs of a history of ``key`` (a value, a tuple or a dict of the key columns, or
    a list of those) at ``snap``, for any engine to run."""
    spec = TableSpec.of(snap.state)
    keys = _key_rows(snap, spec, key)
    files = prune_by_keys(snap.markers(), keys, spec.key_columns)
    return HistoryRequest(snap, list(files), keys, _commit_times(snap))


def history(request: HistoryRequest, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    """The history ``request`` asks for, as a lazy relation on ``con``."""
    snap = request.snapshot
    names = bind_relations(
        con,
        {
            ENTRIES: scan_files(con, snap.store, snap.prefix, request.files, request.file_schema),
            KEYS: con.from_arrow(request.keys),
            COMMITS: con.from_arrow(request.commits),
        },
    )
    text = request.sql(
        DIALECTS["duckdb"].name, entries=names[ENTRIES], keys=names[KEYS], commits=names[COMMITS]
    )
    return con.sql(text)


def _key_rows(snap: Snapshot, spec: TableSpec, key: Any) -> pa.Table:
    columns = list(spec.key_columns)
    keys = key if isinstance(key, list) else [key]
    if not keys:
        raise InvalidArgumentError("history needs a key (or a non-empty list of keys)")
    rows = []
    for one in keys:
        values = one.values() if isinstance(one, dict) else one if isinstance(one, tuple) else [one]
        if any(v is None for v in values):
            raise MissingKeyError(f"key {one!r} holds NULL; keys are never NULL")
        if isinstance(one, dict):
            unknown = sorted(set(one) - set(columns))
            if unknown:
                raise UnknownColumnError(f"{unknown} are not key columns (the key is {columns})")
            if set(one) != set(columns):
                raise MissingKeyError(f"a key gives every key column {columns}; got {sorted(one)}")
            rows.append(one)
        elif isinstance(one, tuple):
            if len(one) != len(columns):
                raise MissingKeyError(f"a key tuple has {len(columns)} values {columns}; got {one}")
            rows.append(dict(zip(columns, one, strict=True)))
        elif len(columns) == 1:
            rows.append({columns[0]: one})
        else:
            raise InvalidArgumentError(
                f"the key has {len(columns)} columns {columns}: pass a tuple or a dict"
            )
    schema = file_schema(snap.state.schema, snap.state.config)
    key_schema = pa.schema([schema.field(c) for c in columns])
    try:
        rows = [{c: _key_value(v, key_schema.field(c).type) for c, v in r.items()} for r in rows]
        table = pa.Table.from_pylist(rows, schema=key_schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
        raise InvalidArgumentError(
            f"key {key!r} does not fit the key columns {key_schema}: {e}"
        ) from e
    return table


def _key_value(value: Any, kind: pa.DataType) -> Any:
    """A key value as given, or ISO text for a DATE or TIMESTAMP key column read as one
    (``views.history(probes, (17, "2026-11-02 10:00:00"))``)."""
    if not isinstance(value, str):
        return value
    if pa.types.is_timestamp(kind):
        return dt.datetime.fromisoformat(value)
    if pa.types.is_date(kind):
        return dt.date.fromisoformat(value)
    return value


def _commit_times(snap: Snapshot) -> pa.Table:
    """``trx_id`` -> commit version and time of every transaction commit of the snapshot's
    table still in the log, up to the snapshot's version (a Snapshot reads its table's log as
    a Table does)."""
    log = TableLog(snap.store, snap.prefix, snap.name)
    listing = log.listing()
    entries = log.read_many([k for v, k in sorted(listing.commits.items()) if v <= snap.version])
    records = [e for e in entries if e.trx_id is not None]
    return pa.table(
        {
            TRX_ID: pa.array([e.trx_id for e in records], pa.int64()),
            COMMIT_VERSION: pa.array([e.version for e in records], pa.int64()),
            COMMIT_TIMESTAMP: pa.array([e.timestamp_ms for e in records], pa.int64()).cast(
                pa.timestamp("ms", "UTC")
            ),
        }
    )
