"""Sign-weighted totals of a snapshot: the tree of :mod:`ledger.sql.totals` over the
snapshot's files, files of insertions only read apart where signs are consistent.

A dashboard asks the same question many times, so what does not change between calls is kept:
the SQL text of each query shape (keyed by everything that shapes it, the names of the
relations it reads included), per set of files holding delete marks, which measured
FLOAT/DOUBLE columns hold NaN or an infinity in a mark, and per file, whether a measured
column its statistics say nothing of holds NULL (data files never change).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
from sqlglot import exp

from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.kept_results import answer_relation
from ledger.engines.duckdb.scan import (
    ColumnFacts,
    FileSources,
    ParquetSource,
    column_facts,
    file_footer,
    file_sources,
    with_parquet_sources,
    with_parquet_sources_inlined,
)
from ledger.engines.duckdb.session import bind_relations, lazy_sql
from ledger.log.entries import FileMarker
from ledger.reads.files import insertions_only
from ledger.reads.kept_statements import KeptStatements
from ledger.reads.partitions import PartitionRead
from ledger.reads.visible import restricted_rows
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import DML_TYPE, ENTRIES
from ledger.sql.spec import TableSpec
from ledger.sql.totals import (
    TotalsRequest,
    measured_floats,
    non_finite_marks_probe,
)
from ledger.sql.totals import totals as totals_tree
from ledger.sql.trees import Sources, col, relation, render, with_ctes
from ledger.sql.visible import deduplicated
from ledger.writer import file_schema
from merge_policies.base import SIGNED

if TYPE_CHECKING:
    import duckdb

DUCKDB = DIALECTS["duckdb"]
INSERTIONS = "insertions"  # the relation of files holding no delete mark
RESTRICTED = "restricted"  # the rows of chosen partitions, kept in memory
# Entries in files of insertions only from which they are summed apart, unweighted (below it,
# one weighted aggregate over every file is faster: see files_by_role).
SPLIT_FROM_ENTRIES = 250_000
# Entries from which a grand total sums signed entries per sign, the signs weighed only on the
# partial sums (below it, one aggregate weighing every entry is bound and run faster: see
# signs_grouped).
SIGNS_GROUPED_FROM_ENTRIES = 250_000
# Entries from which a grouped total reads its files with ``union_by_name`` (the statistics it
# reads at bind let DuckDB group by a small integer column through its perfect hash grouping,
# which pays on large tables; below it, the bind without the option costs less: see
# parquet_read).
GROUPED_BY_NAME_FROM_ENTRIES = 50_000
SHAPES_KEPT = 512  # SQL texts kept (one per table shape, request and relation names)
PROBES_KEPT = 1024  # answers of the non-finite probe kept (one per set of marked files)


def totals(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    request: TotalsRequest,
    *,
    partitions: PartitionFilter = None,
) -> duckdb.DuckDBPyRelation:
    """The totals ``request`` asks for over ``snap``, as a lazy relation on ``con`` (the
    request is checked: :func:`ledger.sql.totals.check_totals_request`)."""
    spec = TableSpec.of(snap.state)
    reuse_key: _StatementKey | None = None
    if partitions is None:  # unrestricted reads reuse their statement (no file listed)
        reuse_key = (
            id(snap.state),
            id(snap.store),
            snap.prefix,
            request,
            (SPLIT_FROM_ENTRIES, SIGNS_GROUPED_FROM_ENTRIES, GROUPED_BY_NAME_FROM_ENTRIES),
        )
        kept = _STATEMENTS.get(reuse_key, snap)
        if kept is not None:
            return answer_relation(con, *kept)
    read = snap.partition_read(partitions, entries=True)
    if not read.exact:
        return restricted_totals(snap, con, spec, request, read)
    text, params, bound = _statement(snap, con, spec, request, read.markers)
    if reuse_key is not None and not bound:
        _STATEMENTS.keep(reuse_key, snap, text, params)
    return lazy_sql(con, text, params) if bound else answer_relation(con, text, params)


def _statement(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    spec: TableSpec,
    request: TotalsRequest,
    markers: Sequence[FileMarker],
) -> tuple[str, dict[str, list[str]], bool]:
    """The totals statement over ``markers``, its parameters (the files each group reads) and
    whether it reads a relation bound on ``con`` itself (files off the local disk), which only
    that connection can read."""
    schema = schema_read(spec, file_schema(snap.state.schema, snap.state.config), request)
    files = files_by_role(spec, markers)
    sources = file_sources(con, snap.store, snap.prefix, files, schema)
    names = Sources(
        entries=sources.names[ENTRIES if ENTRIES in files else INSERTIONS],
        insertions=sources.names.get(INSERTIONS) if ENTRIES in files else None,
    )
    # Without a file holding marks (after a full merge, or before any correction) the files
    # of insertions are the only source, summed without weighting.
    weighted = ENTRIES in files
    non_finite = frozenset[str]()
    marked: list[FileMarker] = []
    if weighted:
        marked = [m for m in files[ENTRIES] if not insertions_only(m)]
        non_finite = non_finite_marks(con, spec, request, sources, marked)
    facts = proven_facts(snap, sources, marked)
    if weighted and spec.policy.visible_rows == SIGNED:
        unproven = [c for c in _measured(request) if c not in facts.null_free]
        facts = ColumnFacts(
            facts.null_free | scanned_null_free(con, sources, unproven), facts.negatable
        )
    text = totals_text(
        spec,
        names,
        request,
        non_finite,
        parquet_read(request, markers, sources.parquet),
        weighted,
        signs_grouped=signs_grouped(request, markers, schema),
        null_free=facts.null_free & frozenset(_measured(request)),
        unwidened=facts.negatable & frozenset(_measured(request)),
    )
    bound = not set(sources.names.values()) <= {source.name for source in sources.parquet}
    return text, sources.params, bound


# A statement made for one state and request: (id of the state, id of the store, the table's
# prefix, the request, the plan thresholds it was made with).
_StatementKey = tuple[int, int, str, TotalsRequest, tuple[int, int, int]]
STATEMENTS_KEPT = 256  # statements kept with their files (one per table state and request)
_STATEMENTS = KeptStatements(STATEMENTS_KEPT)


def parquet_read(
    request: TotalsRequest, markers: Sequence[FileMarker], parquet: tuple[ParquetSource, ...]
) -> tuple[ParquetSource, ...]:
    """How the statement reads its groups of files: a grand total, and a grouped total of fewer
    than :data:`GROUPED_BY_NAME_FROM_ENTRIES` entries, read typed files without
    ``union_by_name`` (:func:`without_union_by_name`); a larger grouped total keeps it, its
    statistics letting DuckDB group a small integer column through its perfect hash grouping."""
    if request.by and sum(m.rows for m in markers) >= GROUPED_BY_NAME_FROM_ENTRIES:
        return parquet
    return without_union_by_name(parquet)


def without_union_by_name(parquet: tuple[ParquetSource, ...]) -> tuple[ParquetSource, ...]:
    """``parquet``, the groups of typed files (each holding every column read in its own
    type) read without ``union_by_name``: that option reads every file's footer to bind the
    statement, twice per call, and its statistics serve a grouping only (an integer ``by``
    column's perfect hash grouping), not an aggregate without groups."""
    return tuple(dataclasses.replace(p, union_by_name=False) if p.typed else p for p in parquet)


def restricted_totals(
    snap: Snapshot,
    con: duckdb.DuckDBPyConnection,
    spec: TableSpec,
    request: TotalsRequest,
    read: PartitionRead,
) -> duckdb.DuckDBPyRelation:
    """The totals of the rows of the chosen partitions where the files of those partitions
    alone do not give them (:mod:`ledger.reads.partitions`): the rows (or, where visible rows
    are signed, the entries without repeats) of the files ``read`` opens, kept by partition,
    then totalled as entries. The kept rows are held in memory, bound on ``con``."""
    with storage_errors(f"reading {snap.name!r}"):
        if spec.policy.visible_rows == SIGNED:
            rows = read.keep(_deduplicated_entries(snap, con, spec, read))
            non_finite = frozenset(measured_floats(spec, request))  # the exact form, always
        else:
            # Each visible row is its key's only entry, an insertion: totalled as it is.
            rows = restricted_rows(snap, con, read, system_columns=True)
            ones = pa.array(np.ones(rows.num_rows, dtype=np.int8))
            rows = rows.append_column(DML_TYPE, ones)
            non_finite = frozenset()
        names = bind_relations(con, {RESTRICTED: con.from_arrow(rows)})
        sources = Sources(entries=names[RESTRICTED])
        return lazy_sql(con, totals_text(spec, sources, request, non_finite))


def _deduplicated_entries(
    snap: Snapshot, con: duckdb.DuckDBPyConnection, spec: TableSpec, read: PartitionRead
) -> pa.Table:
    """Every entry of the files ``read`` opens, repeats dropped as the views drop them."""
    schema = file_schema(snap.state.schema, snap.state.config)
    sources = file_sources(con, snap.store, snap.prefix, {ENTRIES: read.markers}, schema)
    ctes: list[tuple[str, exp.Query]] = []
    kept = deduplicated(spec, sources.names[ENTRIES], ctes)
    query = with_ctes(exp.select("*").from_(relation(kept)), ctes)
    text = render(with_parquet_sources(query, sources.parquet), DUCKDB)
    return lazy_sql(con, text, sources.params).to_arrow_table()


def proven_facts(snap: Snapshot, sources: FileSources, marked: Sequence[FileMarker]) -> ColumnFacts:
    """What the footers of the files a statement reads prove (only local files read by the
    statement itself, whose footers are kept): the columns no file holds NULL in, and the
    integer columns no delete mark holds its type's smallest value in (weighed by its sign,
    such a value fits its type)."""
    if not sources.parquet:
        return ColumnFacts(frozenset(), frozenset())
    read = column_facts([path for paths in sources.params.values() for path in paths])
    local = [snap.store.local_path(snap.prefix + m.path) for m in marked]
    marks = [path for path in local if path is not None]
    negatable = column_facts(marks).negatable if len(marks) == len(local) else frozenset()
    return ColumnFacts(read.null_free, negatable)


def _measured(request: TotalsRequest) -> list[str]:
    return [*request.sums, *request.avgs]


# Whether a data file holds a NULL in a column, for columns its statistics say nothing of (the
# writer writes none for FLOAT and DOUBLE: ledger/writer.py): read once per file and column.
_NULLS_SEEN: OrderedDict[tuple[str, str], bool] = OrderedDict()
_NULLS_SEEN_LOCK = threading.Lock()
NULLS_SEEN_KEPT = 65536  # (file, column) pairs kept


def scanned_null_free(
    con: duckdb.DuckDBPyConnection, sources: FileSources, columns: Sequence[str]
) -> frozenset[str]:
    """The ``columns`` no local file of ``sources`` holds NULL in, each file read once for the
    columns not known yet (data files never change: their names are new uuids)."""
    if not columns or not sources.parquet:
        return frozenset()
    paths = [path for listed in sources.params.values() for path in listed]
    with _NULLS_SEEN_LOCK:
        known = {(p, c): _NULLS_SEEN[p, c] for p in paths for c in columns if (p, c) in _NULLS_SEEN}
    for path in {p for p in paths for c in columns if (p, c) not in known}:
        known.update(_nulls_of_file(con, path, columns))
    with _NULLS_SEEN_LOCK:
        for pair, holds_null in known.items():
            _NULLS_SEEN[pair] = holds_null
            _NULLS_SEEN.move_to_end(pair)
        while len(_NULLS_SEEN) > NULLS_SEEN_KEPT:
            _NULLS_SEEN.popitem(last=False)
    return frozenset(c for c in columns if not any(known[p, c] for p in paths))


def _nulls_of_file(
    con: duckdb.DuckDBPyConnection, path: str, columns: Sequence[str]
) -> dict[tuple[str, str], bool]:
    """Per column, whether the file ``path`` holds a NULL in it (a column it lacks reads as
    NULL on every row it has)."""
    held = tuple(c for c in columns if c in file_footer(path).columns)
    [counts] = con.sql(_null_count_text(held), params={"file": path}).fetchall()
    rows, *present = counts
    found = dict(zip(held, (count < rows for count in present), strict=True))
    return {(path, c): found.get(c, rows > 0) for c in columns}


@functools.lru_cache(maxsize=SHAPES_KEPT)
def _null_count_text(columns: tuple[str, ...]) -> str:
    counts = [exp.Count(this=exp.Star()), *(exp.Count(this=col(c)) for c in columns)]
    read = exp.ReadParquet(expressions=[exp.Placeholder(this="file")])
    return render(exp.select(*counts).from_(exp.Table(this=read)), DUCKDB)


def files_by_role(
    spec: TableSpec, markers: Sequence[FileMarker]
) -> dict[str, Sequence[FileMarker]]:
    """The files of signed entries (``entries``) and of insertions only (``insertions``).

    Files of insertions only add to totals without weighting, a cheaper aggregate per entry;
    but a second aggregate and the union of both cost a few milliseconds on their own. So they
    are read apart only when they hold at least :data:`SPLIT_FROM_ENTRIES` entries; below
    that, every file goes through the one weighted aggregate. Without a file holding marks
    the insertions are the only source (summed without weighting).
    """
    plain: list[FileMarker] = []
    marked = list(markers)
    if spec.policy.signs_consistent:
        plain = [m for m in markers if insertions_only(m)]
        marked = [m for m in markers if not insertions_only(m)]
    if marked and sum(m.rows for m in plain) < SPLIT_FROM_ENTRIES:
        marked, plain = list(markers), []
    files: dict[str, Sequence[FileMarker]] = {}
    if marked or not plain:
        files[ENTRIES] = marked
    if plain:
        files[INSERTIONS] = plain
    return files


def signs_grouped(request: TotalsRequest, markers: Sequence[FileMarker], schema: pa.Schema) -> bool:
    """Whether signed entries are summed per sign (``GROUP BY dml_type``), their signs weighed
    on the partial sums only, rather than weighed entry by entry.

    Without ``by``, the clean query is an ungrouped aggregate, so cheap per entry that weighing
    every entry (a product, integers widened to ``HUGEINT``) costs more than grouping by a
    one-byte sign; with ``by``, the entries are hashed by group anyway and adding the sign to
    the group measured no faster. On small tables the second aggregate over partial rows costs
    more to bind than the weighing saves, hence :data:`SIGNS_GROUPED_FROM_ENTRIES`.

    Only integer columns are summed so: the insertions alone and the marks alone may overflow
    where their difference does not (two infinities of a DOUBLE make NaN, a DECIMAL(38) sum
    passes 38 digits), while integer sums are exact in ``HUGEINT``."""
    measured = {*request.sums, *request.avgs}
    exact = all(pa.types.is_integer(schema.field(name).type) for name in measured)
    return exact and not request.by and sum(m.rows for m in markers) >= SIGNS_GROUPED_FROM_ENTRIES


def schema_read(spec: TableSpec, schema: pa.Schema, request: TotalsRequest) -> pa.Schema:
    """The columns of ``schema`` the totals query reads: where entries are only weighted and
    summed (signed tables keeping every entry), the grouping, measured and filtered columns
    and ``dml_type``; every column otherwise (replacing and aggregating tables find visible
    rows first, dedup tables drop repeats first). Fewer columns make a shorter statement,
    parsed and bound faster."""
    if spec.policy.visible_rows != SIGNED or spec.policy.repeat_columns(spec.key_columns):
        return schema
    read = {*request.by, *request.sums, *request.avgs, DML_TYPE}
    if request.where is not None:
        read |= {column.name for column in request.where.find_all(exp.Column)}
    if not read <= set(schema.names):
        return schema
    return pa.schema([field for field in schema if field.name in read])


@functools.lru_cache(maxsize=SHAPES_KEPT)
def totals_text(
    spec: TableSpec,
    sources: Sources,
    request: TotalsRequest,
    non_finite: frozenset[str],
    parquet: tuple[ParquetSource, ...] = (),
    weighted: bool = True,
    *,
    signs_grouped: bool = False,
    null_free: frozenset[str] = frozenset(),
    unwidened: frozenset[str] = frozenset(),
) -> str:
    """The totals query's DuckDB text: rendered once per shape (building and rendering the
    tree costs more than running the query on a small table)."""
    query = totals_tree(
        spec,
        DUCKDB,
        sources,
        request,
        non_finite_marks=non_finite,
        weighted=weighted,
        signs_grouped=signs_grouped,
        null_free=null_free,
        unwidened=unwidened,
    )
    return render(with_parquet_sources_inlined(query, parquet), DUCKDB)


@functools.lru_cache(maxsize=SHAPES_KEPT)
def _probe_text(entries: str, measured: tuple[str, ...], parquet: tuple[ParquetSource, ...]) -> str:
    return render(with_parquet_sources(non_finite_marks_probe(entries, measured), parquet), DUCKDB)


_PROBED: OrderedDict[tuple[tuple[str, ...], tuple[str, ...]], frozenset[str]] = OrderedDict()
_PROBED_LOCK = threading.Lock()


def non_finite_marks(
    con: duckdb.DuckDBPyConnection,
    spec: TableSpec,
    request: TotalsRequest,
    sources: FileSources,
    markers: Sequence[FileMarker],
) -> frozenset[str]:
    """The measured FLOAT/DOUBLE columns with NaN or an infinity in a delete mark (only files
    holding marks are read, once per set of files): the only ones whose weighted sum needs the
    slower exact form."""
    measured = tuple(measured_floats(spec, request))
    if not measured or all(insertions_only(m) for m in markers):
        return frozenset()
    # Data file names are unique (a uuid each) and files are never rewritten in place.
    key = (tuple(sorted(m.path for m in markers)), measured)
    with _PROBED_LOCK:
        found = _PROBED.get(key)
        if found is not None:
            _PROBED.move_to_end(key)
            return found
    entries = sources.names[ENTRIES]
    parquet = tuple(p for p in sources.parquet if p.name == entries)
    params = {k: v for k, v in sources.params.items() if k == entries}
    text = _probe_text(entries, measured, parquet)
    [flags] = (con.sql(text, params=params) if params else con.sql(text)).fetchall()
    found = frozenset(c for c, flag in zip(measured, flags, strict=True) if flag)
    with _PROBED_LOCK:
        _PROBED[key] = found
        while len(_PROBED) > PROBES_KEPT:
            _PROBED.popitem(last=False)
    return found
