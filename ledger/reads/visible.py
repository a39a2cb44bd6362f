"""Visible rows of a snapshot: the tree of :mod:`ledger.sql.visible` over the snapshot's files,
with files whose rows are visible as they are read apart (:mod:`ledger.reads.files`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.query import check_condition
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations, read_sessions
from ledger.errors import InvalidArgumentError, UnknownColumnError
from ledger.log.entries import FileMarker
from ledger.reads.files import split_isolated
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql import idents
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import ENTRIES
from ledger.sql.predicates import parse_predicate
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, render
from ledger.sql.visible import visible as visible_tree
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb

DUCKDB = DIALECTS["duckdb"]
ISOLATED = "isolated"  # the relation of files whose rows are visible as they are


def visible(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    *,
    partitions: PartitionFilter = None,
    system_columns: bool = False,
) -> duckdb.DuckDBPyRelation:
    """The latest visible row of every key of ``snap``, as a lazy relation on ``con``."""
    spec = TableSpec.of(snap.state)
    markers = snap.markers(partitions)
    isolated: list[FileMarker] = []
    schema = file_schema(snap.state.schema, snap.state.config)
    if spec.policy.files_isolatable:
        key_types = [schema.field(k).type for k in spec.key_columns]
        isolated, markers = split_isolated(markers, key_types)
    relations = {ENTRIES: scan_files(con, snap.store, snap.prefix, markers, schema)}
    if isolated:
        relations[ISOLATED] = scan_files(con, snap.store, snap.prefix, isolated, schema)
    names = bind_relations(con, relations)
    query = visible_tree(
        spec,
        DUCKDB,
        Sources(entries=names[ENTRIES], isolated=names.get(ISOLATED)),
        system_columns=system_columns,
    )
    return con.sql(render(query, DUCKDB))


def rows(
    snap: Snapshot,
    *,
    where: str | None = None,
    columns: Sequence[str] | str | None = None,
    partitions: PartitionFilter = None,
) -> pa.Table:
    """The visible rows of ``snap`` as an Arrow table, filtered by ``where`` (a SQL predicate
    over the table's columns) and cut to ``columns`` (default: every column, in schema order).
    """
    spec = TableSpec.of(snap.state)
    chosen = chosen_columns(spec, columns)
    condition = parse_predicate(spec, where)
    if condition is not None:
        check_condition(snap.state.schema.arrow(), render(condition, DUCKDB), shown=where)
    connection = read_sessions(snap.store).cursor()
    try:
        relation = visible(snap, connection, partitions=partitions)
        if condition is not None:
            relation = relation.filter(render(condition, DUCKDB))
        relation = relation.project(idents(chosen))
        with storage_errors(f"reading {snap.name!r}"):
            return relation.to_arrow_table()
    finally:
        connection.close()


def chosen_columns(spec: TableSpec, columns: Sequence[str] | str | None) -> list[str]:
    """The columns a caller asked for, checked: every column when ``columns`` is None."""
    if columns is None:
        return list(spec.columns)
    chosen = [columns] if isinstance(columns, str) else columns
    if not isinstance(chosen, Sequence) or not all(isinstance(c, str) for c in chosen):
        raise InvalidArgumentError(f"columns must be a list of column names, not {columns!r}")
    if not chosen:
        raise InvalidArgumentError("columns names no column; pass None for every column")
    unknown = [c for c in chosen if c not in spec.columns]
    if unknown:
        raise UnknownColumnError(
            f"columns {unknown} are not columns of the table (columns: {list(spec.columns)})"
        )
    if len(set(chosen)) != len(chosen):
        raise InvalidArgumentError(f"columns repeats a column: {list(chosen)}")
    return list(chosen)
