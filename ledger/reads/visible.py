"""Visible rows of a snapshot: the tree of :mod:`ledger.sql.visible` over the snapshot's files,
with files whose rows are visible as they are read apart (:mod:`ledger.reads.files`)."""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ledger.engines.duckdb.errors import predicate_failures, storage_errors
from ledger.engines.duckdb.kept_results import answer_relation
from ledger.engines.duckdb.query import check_condition
from ledger.engines.duckdb.scan import (
    ParquetSource,
    file_sources,
    scan_files,
    with_parquet_sources,
)
from ledger.engines.duckdb.session import bind_relations, lazy_sql, read_sessions
from ledger.errors import InvalidArgumentError, UnknownColumnError
from ledger.log.entries import FileMarker
from ledger.reads.files import FileRoles, file_roles, split_by_age
from ledger.reads.kept_statements import KeptStatements
from ledger.reads.partitions import PartitionRead
from ledger.schema import DML_TYPE
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql import ident, idents
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import ENTRIES, ENTRY_COUNT
from ledger.sql.predicates import parse_predicate
from ledger.sql.spec import TableSpec
from ledger.sql.trees import Sources, cols, relation, render
from ledger.sql.visible import shown_columns
from ledger.sql.visible import visible as visible_tree
from ledger.writer import file_schema
from merge_policies.base import SIGNED

if TYPE_CHECKING:
    import duckdb

DUCKDB = DIALECTS["duckdb"]
ISOLATED = "isolated"  # the relation of files whose rows are visible as they are
LONELY = "lonely"  # files of unique keys and no mark whose key ranges meet other files'
REPEATED = "repeated"  # keys found in more than one lonely file
SHAPES_KEPT = 512  # SQL texts kept (one per table shape and set of relation names)
STATEMENTS_KEPT = 256  # statements kept with their files (one per table state and request)
REPEATS_KEPT = 256  # sets of files whose shared keys (or other answers) are kept
REPEATS_ROWS_KEPT = 65_536  # more shared keys than this are found again at each read
# Entries (in files whose rows are not visible as they are) below which every such file is
# read with the marks, once, kept in memory: the plans reading lonely files apart cost more to
# plan than they save below that size (docs/views.md section 9).
SMALL_TABLE_ENTRIES = 20_000
# Entries (as above) below which signed tables group every entry by its values at once, single
# keys too, instead of finding the crowded keys first: the joins that spare the single keys
# cost more than grouping them at that size, not from about 10,000 entries on (section 9).
GROUPED_TABLE_ENTRIES = 8_000


def visible(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    *,
    partitions: PartitionFilter = None,
    system_columns: bool = False,
) -> duckdb.DuckDBPyRelation:
    """The latest visible row of every key of ``snap``, as a lazy relation on ``con`` (only
    the key columns of lonely files whose key ranges meet are read at once, see
    :func:`repeated_keys`)."""
    markers = None
    if partitions is not None:  # unrestricted reads reuse their statement (no file listed)
        read = snap.partition_read(partitions)
        if not read.exact:
            with storage_errors(f"reading {snap.name!r}"):
                kept = restricted_rows(snap, con, read, system_columns=system_columns)
                return con.from_arrow(kept)
        markers = read.markers
    text, params, reusable = _statement_of(
        snap, con, markers=markers, system_columns=system_columns
    )
    return answer_relation(con, text, params) if reusable else lazy_sql(con, text, params)


def restricted_rows(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    read: PartitionRead,
    *,
    system_columns: bool = False,
    columns: tuple[str, ...] | None = None,
    condition: exp.Expr | None = None,
) -> pa.Table:
    """The visible rows of the files ``read`` opens, kept by partition (see
    :mod:`ledger.reads.partitions`), as an Arrow table: read at once, since the partition of
    a row is computed as the writer computes it, in Arrow."""
    needed = None if columns is None else (*columns, *(c for c in read.sources if c not in columns))
    text, params, _ = _make_statement(snap, con, read.markers, system_columns, needed, condition)
    kept = read.keep(lazy_sql(con, text, params).to_arrow_table())
    return kept if columns is None else kept.select(list(columns))


def visible_statement(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    *,
    markers: Sequence[FileMarker] | None = None,
    system_columns: bool = False,
    columns: tuple[str, ...] | None = None,
    condition: exp.Expr | None = None,
) -> tuple[str, dict[str, list[str]]]:
    """The DuckDB text of the visible rows of ``snap`` and the parameters it runs with (the
    files it reads: ``markers``, default every alive file), cut to ``columns`` and filtered
    by ``condition`` when given: one statement, so a read binds it once.

    The statement depends only on the snapshot's state (its files never change), the request
    and the plan thresholds, so it is made once per state and request and kept
    (:mod:`ledger.reads.kept_statements`), unless it names a relation bound on ``con`` itself
    (files off the local disk, keys lonely files share), which only that connection can
    read."""
    text, params, _ = _statement_of(
        snap,
        con,
        markers=markers,
        system_columns=system_columns,
        columns=columns,
        condition=condition,
    )
    return text, params


def _statement_of(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    *,
    markers: Sequence[FileMarker] | None = None,
    system_columns: bool = False,
    columns: tuple[str, ...] | None = None,
    condition: exp.Expr | None = None,
) -> tuple[str, dict[str, list[str]], bool]:
    """:func:`visible_statement`, and whether it reads only the files its parameters name (so
    its answer depends on nothing else: :mod:`ledger.engines.duckdb.kept_results`)."""
    reuse_key: _StatementKey | None = None
    if markers is None:
        reuse_key = (
            id(snap.state),
            id(snap.store),
            snap.prefix,
            system_columns,
            columns,
            condition,
            (SMALL_TABLE_ENTRIES, GROUPED_TABLE_ENTRIES),
        )
        kept = _STATEMENTS.get(reuse_key, snap)
        if kept is not None:
            return (*kept, True)
    chosen = snap.markers() if markers is None else markers
    text, params, bound = _make_statement(snap, con, chosen, system_columns, columns, condition)
    if reuse_key is not None and not bound:
        _STATEMENTS.keep(reuse_key, snap, text, params)
    return text, params, not bound


def _make_statement(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    markers: Sequence[FileMarker],
    system_columns: bool,
    columns: tuple[str, ...] | None,
    condition: exp.Expr | None,
) -> tuple[str, dict[str, list[str]], bool]:
    """:func:`visible_statement` made anew, and whether it reads a relation bound on ``con``."""
    spec = TableSpec.of(snap.state)
    schema = file_schema(snap.state.schema, snap.state.config)
    roles = FileRoles(isolated=[], lonely=[], others=list(markers), lonely_overlap=False)
    if spec.policy.files_isolatable:
        roles = file_roles(markers, [schema.field(k).type for k in spec.key_columns])
    entries = sum(m.rows for m in (*roles.lonely, *roles.others))
    small = entries < SMALL_TABLE_ENTRIES
    # Lonely files are read apart for signed rows only (the other kinds take every entry of a
    # key, whatever file holds it), and not on small tables (see SMALL_TABLE_ENTRIES).
    apart = spec.policy.visible_rows == SIGNED and bool(roles.lonely) and not small
    lonely_older = False
    if apart and spec.policy.repeat_columns(spec.key_columns) is None:
        older, newer = split_by_age(roles.lonely, roles.others)
        if older:  # lonely files written after a file of marks are read with the marks
            roles = replace(roles, lonely=older, others=[*roles.others, *newer])
            lonely_older = True
    inserted_once = lonely_older and keys_inserted_once(con, snap, roles.others, spec, schema)
    others = roles.others if apart else [*roles.lonely, *roles.others]

    files: dict[str, Sequence[FileMarker]] = {ENTRIES: others}
    if roles.isolated:
        files[ISOLATED] = roles.isolated
    if apart:
        files[LONELY] = roles.lonely
    if roles.isolated and not roles.lonely and not roles.others:
        # After a full merge: a plain scan of the files, cut to the shown columns.
        files = {ISOLATED: roles.isolated}
    found = file_sources(con, snap.store, snap.prefix, files, schema)
    repeated: str | None = None
    if apart and roles.lonely_overlap:
        keys = lonely_repeats(con, snap, roles.lonely, spec, schema)
        if keys.num_rows:  # no key repeats across lonely files: nothing to add
            repeated = bind_relations(con, {REPEATED: con.from_arrow(keys)})[REPEATED]
    sources = Sources(
        entries=found.names[ENTRIES if ENTRIES in files else ISOLATED],
        isolated=found.names.get(ISOLATED) if ENTRIES in files else None,
        lonely=found.names.get(LONELY),
        repeated_keys=repeated,
        lonely_older=lonely_older,
        inserted_once=inserted_once,
        every_entry_grouped=(
            small and entries < GROUPED_TABLE_ENTRIES and spec.policy.visible_rows == SIGNED
        ),
    )
    parquet = found.parquet
    if small and ENTRIES in files and _reads_entries_thrice(spec, sources):
        parquet = tuple(
            replace(source, materialized=True) if source.name == sources.entries else source
            for source in parquet
        )
    as_they_are = ENTRIES not in files
    text = visible_text(spec, sources, system_columns, parquet, as_they_are, columns, condition)
    named_in_text = {source.name for source in found.parquet}
    bound = repeated is not None or not set(found.names.values()) <= named_in_text
    return text, found.params, bound


# A statement made for one state and request: (id of the state, id of the store, the table's
# prefix, system_columns, columns, condition, the small-table thresholds it was planned with).
_StatementKey = tuple[int, int, str, bool, tuple[str, ...] | None, exp.Expr | None, tuple[int, int]]
_STATEMENTS = KeptStatements(STATEMENTS_KEPT)


def _reads_entries_thrice(spec: TableSpec, sources: Sources) -> bool:
    """Whether the plain signed plan (:func:`ledger.sql.visible._live_rows`) reads the entries:
    it names them three times (crowded keys, single keys, the crowded keys' entries); the
    other kinds, and the plan grouping every entry, read them once (dedup tables into their
    deduplicated entries)."""
    return (
        spec.policy.visible_rows == SIGNED
        and spec.policy.repeat_columns(spec.key_columns) is None
        and not sources.every_entry_grouped
    )


@functools.lru_cache(maxsize=SHAPES_KEPT)
def visible_text(
    spec: TableSpec,
    sources: Sources,
    system_columns: bool,
    parquet: tuple[ParquetSource, ...],
    as_they_are: bool,
    columns: tuple[str, ...] | None = None,
    condition: exp.Expr | None = None,
) -> str:
    """The visible query's DuckDB text, rendered once per shape: building and rendering the
    tree costs more than running the query on a small table. With ``as_they_are``, every row
    of ``sources.entries`` is visible (every file isolated): the text is a plain scan. With
    ``columns`` or ``condition``, the rows are cut to those columns and filtered."""
    shown = shown_columns(spec, system_columns)
    if as_they_are:
        query: exp.Query = exp.select(*cols(shown)).from_(relation(sources.entries))
    else:
        query = visible_tree(spec, DUCKDB, sources, system_columns=system_columns)
    if columns is not None or condition is not None:
        picked = list(columns) if columns is not None else shown
        cut = exp.select(*cols(picked)).from_(exp.paren(query, copy=False))
        query = cut.where(condition.copy()) if condition is not None else cut
    return render(with_parquet_sources(query, parquet), DUCKDB)


_Kept = TypeVar("_Kept")
_FileSetKey = tuple[str, tuple[str, ...], tuple[str, ...]]
_KEPT_PER_FILE_SET: OrderedDict[_FileSetKey, Any] = OrderedDict()
_KEPT_LOCK = threading.Lock()


def _kept_per_file_set(
    kind: str,
    files: Sequence[FileMarker],
    spec: TableSpec,
    find: Callable[[], _Kept],
    keep: Callable[[_Kept], bool] = lambda _: True,
) -> _Kept:
    """``find()``'s answer about the set ``files``, kept per ``kind`` and set (data files never
    change, so neither does the answer) when ``keep`` takes it; at most REPEATS_KEPT sets."""
    cache_key = (kind, tuple(sorted(m.path for m in files)), tuple(spec.key_columns))
    with _KEPT_LOCK:
        if cache_key in _KEPT_PER_FILE_SET:
            _KEPT_PER_FILE_SET.move_to_end(cache_key)
            kept: _Kept = _KEPT_PER_FILE_SET[cache_key]
            return kept
    found = find()
    if keep(found):
        with _KEPT_LOCK:
            _KEPT_PER_FILE_SET[cache_key] = found
            while len(_KEPT_PER_FILE_SET) > REPEATS_KEPT:
                _KEPT_PER_FILE_SET.popitem(last=False)
    return found


def lonely_repeats(
    con: duckdb.DuckDBPyConnection,
    snap: Snapshot,
    lonely: Sequence[FileMarker],
    spec: TableSpec,
    schema: pa.Schema,
) -> pa.Table:
    """The keys occurring in more than one of the ``lonely`` files (see
    :func:`repeated_keys`), found once per set of files and kept when they are few: data
    files never change, so neither do the keys they share."""

    def find() -> pa.Table:
        with storage_errors(f"reading {snap.name!r}"):
            scanned = scan_files(con, snap.store, snap.prefix, lonely, schema)
            return repeated_keys(con, scanned, spec, schema).to_arrow_table()

    return _kept_per_file_set(
        "repeats", lonely, spec, find, lambda found: found.num_rows <= REPEATS_ROWS_KEPT
    )


def keys_inserted_once(
    con: duckdb.DuckDBPyConnection,
    snap: Snapshot,
    markers: Sequence[FileMarker],
    spec: TableSpec,
    schema: pa.Schema,
) -> bool:
    """Whether no key is inserted more than once in the files ``markers`` names (the files
    holding marks, read with them): each key's insertion there is then its latest, and the
    visible view takes it without grouping the insertions by key. Found once per set of files
    (files never change) and kept: an update writes each key's mark and insertion once, so
    this holds until a key is written twice between merges."""

    def find() -> bool:
        keys = idents(spec.key_columns)
        count = ident(ENTRY_COUNT)
        with storage_errors(f"reading {snap.name!r}"):
            scanned = scan_files(con, snap.store, snap.prefix, markers, schema)
            inserted = scanned.filter(f"{ident(DML_TYPE)} = 1")
            counted = inserted.aggregate(f"{keys}, count(*) AS {count}", keys)
            return not counted.filter(f"{count} > 1").limit(1).fetchall()

    return _kept_per_file_set("inserted once", markers, spec, find)


def repeated_keys(
    con: duckdb.DuckDBPyConnection,
    lonely: duckdb.DuckDBPyRelation,
    spec: TableSpec,
    schema: pa.Schema,
) -> duckdb.DuckDBPyRelation:
    """The keys occurring more than once in ``lonely`` (entries of files each holding a key at
    most once), as a relation on ``con``.

    A single integer-like key column (integers, dates, timestamps: equal exactly when their
    numbers are) is read out and sorted: each file is sorted by key, so the sort merges a few
    sorted runs, far cheaper than hashing every key in a grouping. Other keys are grouped by
    the engine."""
    keys = list(spec.key_columns)
    storage = _integer_storage(schema.field(keys[0]).type) if len(keys) == 1 else None
    if storage is None:
        count = ident(ENTRY_COUNT)
        counted = lonely.aggregate(f"{idents(keys)}, count(*) AS {count}", idents(keys))
        return counted.filter(f"{count} > 1").project(idents(keys))
    [key] = keys
    values = lonely.project(idents(keys)).to_arrow_table().column(0).drop_null()
    numbers = np.sort(values.cast(storage).to_numpy(), kind="stable")  # timsort: merges runs
    repeated = np.unique(numbers[1:][numbers[1:] == numbers[:-1]])
    column = pa.array(repeated, type=storage).cast(schema.field(key).type)
    return con.from_arrow(pa.table({key: column}))


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
    read = None if partitions is None else snap.partition_read(partitions)
    connection = read_sessions(snap.store).cursor()
    try:
        with predicate_failures(where, snap.name):
            return _rows(snap, connection, read, chosen, condition)
    finally:
        connection.close()


def _rows(
    snap: Snapshot,
    connection: duckdb.DuckDBPyConnection,
    read: PartitionRead | None,
    chosen: list[str],
    condition: exp.Expr | None,
) -> pa.Table:
    """:func:`rows` on an open connection."""
    if read is not None and not read.exact:
        with storage_errors(f"reading {snap.name!r}"):
            return restricted_rows(
                snap, connection, read, columns=tuple(chosen), condition=condition
            )
    text, params, reusable = _statement_of(
        snap,
        connection,
        markers=None if read is None else read.markers,
        columns=tuple(chosen),
        condition=condition,
    )
    if reusable:
        relation = answer_relation(connection, text, params)
    else:
        relation = lazy_sql(connection, text, params)
    with storage_errors(f"reading {snap.name!r}"):
        return relation.to_arrow_table()


def _integer_storage(key_type: pa.DataType) -> pa.DataType | None:
    """The integer type whose numbers stand for ``key_type``'s values one to one (equal
    exactly when the values are), or None."""
    if pa.types.is_integer(key_type):
        return key_type
    if pa.types.is_date32(key_type):
        return pa.int32()
    if pa.types.is_date64(key_type) or pa.types.is_timestamp(key_type):
        return pa.int64()
    return None


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
