"""Sign-weighted totals of a snapshot: the tree of :mod:`ledger.sql.totals` over the
snapshot's files, files of insertions only read apart where signs are consistent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import bind_relations
from ledger.log.entries import FileMarker
from ledger.reads.files import insertions_only
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import ENTRIES
from ledger.sql.spec import TableSpec
from ledger.sql.totals import (
    TotalsRequest,
    measured_floats,
    non_finite_marks_probe,
)
from ledger.sql.totals import totals as totals_tree
from ledger.sql.trees import Sources, render
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb

DUCKDB = DIALECTS["duckdb"]
INSERTIONS = "insertions"  # the relation of files holding no delete mark


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
    markers = snap.markers(partitions)
    schema = file_schema(snap.state.schema, snap.state.config)
    plain: list[FileMarker] = []
    if spec.policy.signs_consistent:
        plain = [m for m in markers if insertions_only(m)]
        markers = [m for m in markers if not insertions_only(m)]
    relations = {ENTRIES: scan_files(con, snap.store, snap.prefix, markers, schema)}
    if plain:
        relations[INSERTIONS] = scan_files(con, snap.store, snap.prefix, plain, schema)
    names = bind_relations(con, relations)
    sources = Sources(entries=names[ENTRIES], insertions=names.get(INSERTIONS))
    non_finite = non_finite_marks(con, spec, request, names[ENTRIES], markers)
    query = totals_tree(spec, DUCKDB, sources, request, non_finite_marks=non_finite)
    return con.sql(render(query, DUCKDB))


def non_finite_marks(
    con: duckdb.DuckDBPyConnection,
    spec: TableSpec,
    request: TotalsRequest,
    entries: str,
    markers: Sequence[FileMarker],
) -> set[str]:
    """The measured FLOAT/DOUBLE columns with NaN or an infinity in a delete mark (only files
    holding marks are read): the only ones whose weighted sum needs the slower exact form."""
    measured = measured_floats(spec, request)
    if not measured or all(insertions_only(m) for m in markers):
        return set()
    [found] = con.sql(render(non_finite_marks_probe(entries, measured), DUCKDB)).fetchall()
    return {c for c, flag in zip(measured, found, strict=True) if flag}
