"""The row count of some partitions of a snapshot: the rows of the whole count that belong to
them (docs/views.md section 5).

Where every entry of a key lives in one partition, the chosen partitions' files alone give it
(:func:`ledger.reads.counts.row_count` of them); otherwise it is the count of the totals
restricted to those partitions, which also reads the files of other partitions that share
their keys. This sits above the snapshot: a restricted count is a totals read, and totals
reads take snapshots.

>>> count_rows(table.snapshot(), {"day": "2026-11-21"})                  # doctest: +SKIP
1200
"""

from __future__ import annotations

from collections.abc import Sequence

from ledger.engines.duckdb.session import read_sessions
from ledger.log.entries import FileMarker
from ledger.reads.counts import row_count
from ledger.reads.partitions import pruning_exact
from ledger.reads.totals import totals as restricted_totals
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql.totals import TotalsRequest


def count_rows(snap: Snapshot, partitions: PartitionFilter) -> int:
    """The logical row count of ``snap`` (as :meth:`Snapshot.count`) restricted to
    ``partitions``: its files' count where they alone give it, else the restricted totals'."""
    if partitions is None:
        return snap.count()
    read = snap.partition_read(partitions, entries=True)
    if not read.exact:
        return count_in_partitions(snap, partitions)
    return row_count(snap, read.markers)


def rows_of(snap: Snapshot, markers: Sequence[FileMarker]) -> int:
    """The row count of the partition whose alive files are ``markers`` (files of one
    partition of ``snap``): :func:`row_count` of them where the partition's files alone give
    it, else :func:`count_in_partitions`."""
    if not markers or pruning_exact(snap.state, entries=True):
        return row_count(snap, markers)
    return count_in_partitions(snap, dict(markers[0].partition))


def count_in_partitions(snap: Snapshot, partitions: PartitionFilter) -> int:
    """The row count of the ``partitions`` of ``snap`` where their files alone do not give it
    (:mod:`ledger.reads.partitions`): the count of the totals restricted to them."""
    con = read_sessions(snap.store).cursor()
    try:
        relation = restricted_totals(snap, con, TotalsRequest(), partitions=partitions)
        [(found,)] = relation.fetchall()
    finally:
        con.close()
    return int(found or 0)
