"""Creating, opening, listing and dropping the tables of a store, as states of their logs.

These are the mechanics under :class:`~ledger.warehouse.Warehouse` (which wraps each state in a
:class:`~ledger.table.Table`) and under rollups (which create and drop their own tables). A
table lives in the folder ``<name>/``; its log's version 0 creates it and a drop is one commit,
so every reader and writer sees it disappear at once.

>>> state = create_table(store, "accounts", {"account": "VARCHAR"}, primary_key="account")
...                                                               # doctest: +SKIP
>>> load_table(store, "accounts").version                         # doctest: +SKIP
0
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
from ledger.partitioning import PartitionSpec
from ledger.schema import TableSchema
from ledger.storage import Store
from ledger.writer import file_schema
from merge_policies import load_policy, normalise_policy

log = logging.getLogger(__name__)

_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]{0,127}$")
DEFAULT_CHECKPOINT_INTERVAL = 50
DEFAULT_TRANSACTION_TIMEOUT_S = 3600.0


def table_log(store: Store, name: str) -> TableLog:
    """The log of table ``name`` (a valid table name) in ``store``."""
    _check_name(name)
    return TableLog(store, f"{name}/", name)


def create_table(
    store: Store,
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
) -> TableState:
    """Create table ``name`` and return its first state; the arguments are those of
    :meth:`ledger.warehouse.Warehouse.create_table`. Raises :class:`TableExistsError` if the
    name is taken."""
    log_of_table = table_log(store, name)
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
    # Bad options, or a merge query that does not fit the table, fail before any write.
    merge_policy = load_policy(config.policy, table_schema, config)
    merge_policy.check_against_files(file_schema(table_schema, config))
    now = int(time.time() * 1000)
    first = LogFile(0, now, CREATE, table_schema, config=config)
    if store.put_if_absent(log_of_table.commit_key(0), first.to_jsonl()):
        return TableState.start(first, log_of_table.commit_key(0))
    return _create_again(log_of_table, table_schema, config)


def _create_again(log_of_table: TableLog, schema: TableSchema, config: TableConfig) -> TableState:
    """The name has a log: create the table anew only if its last life ended in a drop."""
    store = log_of_table.store
    state = log_of_table.load()
    while True:
        if state.config.table_uuid == config.table_uuid:
            # Our create landed although the store reported the key as taken (a retried
            # request answered 412): the table is ours.
            return state
        if not state.dropped:
            raise TableExistsError(
                f"table {log_of_table.name!r} already exists in {store.uri}; open it with "
                "warehouse.table(name) or drop it first"
            )
        # A data folder of this life's own: vacuum of the new life then never deletes the
        # dropped life's files, which snapshots from before the drop still read.
        config = dataclasses.replace(config, data_folder=life_data_folder(config))
        entry = LogFile(state.version + 1, next_timestamp(state), CREATE, schema, config=config)
        if store.put_if_absent(log_of_table.commit_key(entry.version), entry.to_jsonl()):
            return state.apply([entry])
        state = log_of_table.refresh(state)


def load_table(store: Store, name: str) -> TableState:
    """The latest state of table ``name``; raise :class:`TableNotFoundError` if it does not
    exist or was dropped."""
    state = table_log(store, name).load()
    if state.dropped:
        raise TableNotFoundError(
            f"table {name!r} does not exist in {store.uri}: it was dropped (or its creation "
            "failed, as a rollup that cannot be filled is dropped), at version "
            f"{state.version}; create it again to use the name"
        )
    return state


def table_names(store: Store) -> list[str]:
    """Names of the tables in ``store`` (dropped ones excluded)."""
    names = []
    for name in store.list_dirs(""):
        if not _TABLE_NAME.match(name):
            continue
        try:
            if not table_log(store, name).load().dropped:
                names.append(name)
        except TableNotFoundError:
            continue
    return names


def drop_table(store: Store, name: str, *, purge: bool = False) -> None:
    """Drop table ``name`` in one commit (see :meth:`ledger.warehouse.Warehouse.drop_table`);
    ``purge`` also deletes its data files at once."""
    log_of_table = table_log(store, name)
    flag(purge, "purge")
    state = log_of_table.load()
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

    final, _ = commit_entry(log_of_table, state, build)
    if not purge:
        return
    for marker in final.files.values():
        try:
            store.delete(log_of_table.prefix + marker.path)
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
