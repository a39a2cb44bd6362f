"""A warehouse: a store holding tables, one folder per table.

>>> import ledger
>>> wh = ledger.connect("./warehouse")                                   # doctest: +SKIP
>>> wh.create_table("accounts", {"account": "VARCHAR", "amount": "DECIMAL(18,2)"},
...                 primary_key=["account"])                             # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from ledger import insert_transform
from ledger.arguments import column_names, flag, positive_seconds, whole_number
from ledger.errors import (
    InvalidArgumentError,
    SchemaError,
    TableExistsError,
    TableNotFoundError,
)
from ledger.log.commit import commit_entry, next_timestamp
from ledger.log.entries import LogFile, TableConfig, life_data_folder
from ledger.log.state import CREATE, DROP, TableState
from ledger.log.table_log import TableLog
from ledger.maintenance.merge import check_query
from ledger.partitioning import PartitionSpec
from ledger.rollup import Rollup, open_rollup
from ledger.schema import TableSchema
from ledger.storage import Store, open_store
from ledger.table import Table
from ledger.writer import file_schema
from merge_policies import load_policy, normalise_policy

log = logging.getLogger(__name__)

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,127}$")
DEFAULT_CHECKPOINT_INTERVAL = 50
DEFAULT_TRANSACTION_TIMEOUT_S = 3600.0


def connect(uri: str = "./warehouse", **options: Any) -> Warehouse:
    """Open (or start) a warehouse at a local path, ``file://`` URI or ``s3://bucket/prefix``.

    S3 options: ``endpoint_url``, ``region``, ``access_key_id``, ``secret_access_key``,
    ``session_token`` (else the standard AWS credential chain).

    >>> wh = connect("./warehouse")                                        # doctest: +SKIP
    """
    if not isinstance(uri, str):
        raise InvalidArgumentError(
            f"connect takes the warehouse's location as text (a path, file:// or s3:// URI), "
            f"not {type(uri).__name__} {uri!r}"
        )
    return Warehouse(open_store(uri, **options))


class Warehouse:
    """The tables stored under one URI."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"Warehouse({self.store.uri!r})"

    def _log(self, name: str) -> TableLog:
        _check_name(name)
        return TableLog(self.store, f"{name}/", name)

    def create_table(
        self,
        name: str,
        schema: Mapping[str, str] | pa.Schema | Sequence[tuple[str, str]],
        primary_key: Sequence[str] | str | None = None,
        partition_by: Sequence[str] | str | None = None,
        sort_by: Sequence[str] | str | None = None,
        policy: str | Mapping[str, Any] | None = None,
        *,
        checkpoint_interval: int = DEFAULT_CHECKPOINT_INTERVAL,
        transaction_timeout: float = DEFAULT_TRANSACTION_TIMEOUT_S,
        rollup_of: Mapping[str, Any] | None = None,
        insert_transform: str | None = None,
    ) -> Table:
        """Create a table and return it; raise :class:`TableExistsError` if the name is taken.

        ``schema`` maps column names to SQL types (``BIGINT``, ``VARCHAR``, ``DECIMAL(18,2)``,
        ``TIMESTAMP``, ...) or is a pyarrow schema. Without a primary key the table gets a
        generated ``_row_id`` so every entry can still be cancelled.

        ``policy`` is the merge policy (``"collapsing"``, the default; ``"replacing"``,
        ``"aggregating"``, ``"dedup"`` or ``"custom"``, with options as a mapping, see
        docs/merges.md). ``transaction_timeout`` (seconds) is how long a transaction may stay
        open: vacuum treats uncommitted files older than that as orphans. ``rollup_of`` is set
        by :meth:`Table.create_rollup` (the definition of a rollup table).

        ``insert_transform`` is a SELECT over the relation ``rows`` (the columns each write
        passes) run on the rows of every insert, upsert and update before they are checked
        against the schema, e.g. ``"select *, 1::BIGINT as cnt from rows"``; see
        docs/concepts.md. Change it later with :meth:`Table.set_insert_transform`.
        """
        table_log = self._log(name)
        table_schema = TableSchema.parse(schema)
        key = _columns(primary_key, "primary_key", table_schema)
        for column in key:
            data_type = table_schema.type_of(column)
            if pa.types.is_floating(data_type):
                raise SchemaError(
                    f"primary-key column {column!r} is {dict(table_schema.columns)[column]}; "
                    "floating-point keys do not compare reliably, use an integer, text or decimal"
                )
        spec = PartitionSpec.parse(column_names(partition_by, "partition_by"), table_schema)
        spec.check_fits()
        sort = _columns(sort_by, "sort_by", table_schema)
        checkpoint_interval = whole_number(checkpoint_interval, "checkpoint_interval", minimum=1)
        transaction_timeout = positive_seconds(transaction_timeout, "transaction_timeout")
        config = TableConfig(
            table_uuid=str(uuid.uuid4()),
            primary_key=tuple(key),
            partition_by=tuple(spec.to_json()),
            partition_by_key_only=bool(spec.fields) and bool(key) and spec.sources <= set(key),
            sort_by=tuple(sort),
            policy=normalise_policy(policy),
            checkpoint_interval=checkpoint_interval,
            generated_row_id=not key,
            transaction_timeout_ms=max(1, int(transaction_timeout * 1000)),
            rollup=None if rollup_of is None else dict(rollup_of),
            insert_transform=_checked_transform(insert_transform, table_schema, key, rollup_of),
        )
        load_policy(config.policy, table_schema, config)  # bad options fail before any write
        if config.policy["name"] == "custom":
            check_query(
                config.policy["sql"], file_schema(table_schema, config), "custom merge query"
            )
        now = int(time.time() * 1000)
        first = LogFile(0, now, CREATE, table_schema, config=config)
        if self.store.put_if_absent(table_log.commit_key(0), first.to_jsonl()):
            state = TableState.start(first, table_log.commit_key(0))
            return Table(self.store, name, state)
        return self._create_again(table_log, table_schema, config)

    def _create_again(self, table_log: TableLog, schema: TableSchema, config: TableConfig) -> Table:
        """The name has a log: create the table anew only if its last life ended in a drop."""
        state = table_log.load()
        while True:
            if state.config.table_uuid == config.table_uuid:
                # Our create landed although the store reported the key as taken (a retried
                # request answered 412): the table is ours.
                return Table(self.store, table_log.name, state)
            if not state.dropped:
                raise TableExistsError(
                    f"table {table_log.name!r} already exists in {self.store.uri}; open it with "
                    "warehouse.table(name) or drop it first"
                )
            # A data folder of this life's own: vacuum of the new life then never deletes the
            # dropped life's files, which snapshots from before the drop still read.
            config = dataclasses.replace(config, data_folder=life_data_folder(config))
            entry = LogFile(state.version + 1, next_timestamp(state), CREATE, schema, config=config)
            if self.store.put_if_absent(table_log.commit_key(entry.version), entry.to_jsonl()):
                return Table(self.store, table_log.name, state.apply([entry]))
            state = table_log.refresh(state)

    def table(self, name: str) -> Table:
        """Open a table; raise :class:`TableNotFoundError` if it does not exist."""
        state = self._log(name).load()
        if state.dropped:
            raise TableNotFoundError(f"table {name!r} was dropped")
        return Table(self.store, name, state)

    def rollup(self, name: str) -> Rollup:
        """Open the rollup table ``name`` with the base table it follows.

        >>> wh.rollup("daily_views").refresh()                           # doctest: +SKIP
        """
        return open_rollup(self.table(name))

    def tables(self) -> list[str]:
        """Names of the tables in the warehouse (dropped ones excluded)."""
        names = []
        for name in self.store.list_dirs(""):
            if not _TABLE_NAME.match(name):
                continue
            try:
                if not self._log(name).load().dropped:
                    names.append(name)
            except TableNotFoundError:
                continue
        return names

    def drop_table(self, name: str, *, purge: bool = False) -> None:
        """Drop a table: one commit makes it disappear for every reader and writer. The log
        stays, so a writer that raced the drop fails cleanly instead of resurrecting the table.

        Data files stay too, so snapshots taken before the drop remain readable until vacuum
        removes tombstoned files; ``purge=True`` deletes them at once instead (those snapshots
        then fail to read).
        """
        table_log = self._log(name)
        flag(purge, "purge")
        state = table_log.load()
        if state.dropped:
            raise TableNotFoundError(f"table {name!r} was already dropped")

        def build(latest: TableState) -> LogFile:
            now = next_timestamp(latest)
            return LogFile(
                latest.version + 1,
                now,
                DROP,
                latest.schema,
                files=tuple(m.tombstone(now) for m in latest.alive_files),
            )

        final, _ = commit_entry(table_log, state, build)
        if not purge:
            return
        for marker in final.files.values():
            try:
                self.store.delete(table_log.prefix + marker.path)
            except OSError as e:
                log.warning("drop_table %s: could not delete %s: %s", name, marker.path, e)


def _checked_transform(
    sql: str | None,
    schema: TableSchema,
    key: Sequence[str],
    rollup_of: Mapping[str, Any] | None,
) -> str | None:
    if sql is None:
        return None
    if rollup_of is not None:
        raise InvalidArgumentError(
            "a rollup table's rows are computed; it takes no insert_transform"
        )
    return insert_transform.check_against_schema(sql, schema, key, generated_row_id=not key)


def _check_name(name: str) -> None:
    if not isinstance(name, str) or not _TABLE_NAME.match(name):
        raise InvalidArgumentError(
            f"invalid table name {name!r}: use letters, digits, '_' and '-', starting with a "
            "letter or '_', at most 128 characters"
        )


def _columns(value: Sequence[str] | str | None, what: str, schema: TableSchema) -> list[str]:
    columns = column_names(value, what)
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        raise SchemaError(
            f"{what} names unknown column(s) {unknown}; the schema has {schema.names}"
        )
    if len(set(columns)) != len(columns):
        raise InvalidArgumentError(f"{what} repeats a column: {columns}")
    return columns
