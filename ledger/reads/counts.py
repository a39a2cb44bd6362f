"""The row count of a snapshot: the count its totals give, read from the log where the log
knows it.

The markers' ``dml_sum`` adds up to the row count while every delete mark cancels an insertion
carrying its values (the policy's signs are consistent): merges then keep every sign sum. Other
policies' merges keep a key's latest entry without the marks balancing it (replacing), merge
a group's entries into one (aggregating) or drop repeats (dedup), so their markers' sums drift
from the rows; those are counted from the data, except in files whose rows are visible as they
are (:mod:`ledger.reads.files`): after a full merge that is every file, and the count is free
again. Counts restricted to partitions, which may need a totals read, are in
:mod:`ledger.reads.partition_counts`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.scan import file_sources, with_parquet_sources
from ledger.engines.duckdb.session import read_sessions
from ledger.log.entries import FileMarker, sum_markers
from ledger.reads.files import split_isolated
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import ENTRIES
from ledger.sql.spec import TableSpec
from ledger.sql.totals import TotalsRequest, totals
from ledger.sql.trees import Sources, render
from ledger.writer import file_schema

if TYPE_CHECKING:
    from ledger.snapshot import Snapshot

DUCKDB = DIALECTS["duckdb"]


def count_from_log(snap: Snapshot, markers: Sequence[FileMarker]) -> int | None:
    """The row count of ``markers`` (alive files of ``snap``) if the log alone knows it, else
    None."""
    spec = TableSpec.of(snap.state)
    if spec.policy.signs_consistent:
        return sum_markers(markers)
    isolated, others = _isolated_files(snap, spec, markers)
    return None if others else sum(m.rows for m in isolated)


def row_count(snap: Snapshot, markers: Sequence[FileMarker]) -> int:
    """The number of rows the totals of ``markers`` (alive files of ``snap``) count: the sum of
    ``dml_type`` over the entries (after dropping repeats, for a dedup table) where visible rows
    are signed, the visible rows otherwise. Read from the log where it knows it, else only the
    files whose rows are not visible as they are are read."""
    spec = TableSpec.of(snap.state)
    if spec.policy.signs_consistent:
        return sum_markers(markers)
    isolated, others = _isolated_files(snap, spec, markers)
    counted = sum(m.rows for m in isolated)
    return counted + _counted_from_data(snap, spec, others) if others else counted


def _isolated_files(
    snap: Snapshot, spec: TableSpec, markers: Sequence[FileMarker]
) -> tuple[list[FileMarker], list[FileMarker]]:
    """(files of ``markers`` whose rows are visible as they are, every other file of
    ``markers``); each isolated file holds the only entry of each of its keys among every alive
    file of the snapshot, so its rows add to the count. Isolation is judged against them all,
    not only ``markers``: a key written again in a partition left out (a replacing table keyed
    apart from its partition column) hides the row of the file counted."""
    if not spec.policy.files_isolatable:
        return [], list(markers)
    schema = file_schema(snap.state.schema, snap.state.config)
    key_types = [schema.field(k).type for k in spec.key_columns]
    isolated_in_all, _ = split_isolated(snap.state.alive_files, key_types)
    isolated_ids = {id(m) for m in isolated_in_all}
    return (
        [m for m in markers if id(m) in isolated_ids],
        [m for m in markers if id(m) not in isolated_ids],
    )


def _counted_from_data(snap: Snapshot, spec: TableSpec, markers: Sequence[FileMarker]) -> int:
    schema = file_schema(snap.state.schema, snap.state.config)
    con = read_sessions(snap.store).cursor()
    try:
        sources = file_sources(con, snap.store, snap.prefix, {ENTRIES: markers}, schema)
        query = totals(spec, DUCKDB, Sources(entries=sources.names[ENTRIES]), TotalsRequest())
        text = render(with_parquet_sources(query, sources.parquet), DUCKDB)
        with storage_errors(f"counting the rows of {snap.name!r}"):
            relation = con.sql(text, params=sources.params) if sources.params else con.sql(text)
            [(found,)] = relation.fetchall()  # no grouping: one row, even over no entry
    finally:
        con.close()
    return int(found or 0)
