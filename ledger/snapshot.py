"""A table at one version: its files, raw ledger and logical row count."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import read_connection
from ledger.log.entries import FileMarker
from ledger.log.state import TableState
from ledger.partitioning import PartitionSpec
from ledger.pruning import prune_by_partitions
from ledger.reads.counts import count_from_log, row_count
from ledger.reads.partitions import PartitionRead, partition_read
from ledger.storage import Store
from ledger.writer import file_schema

if TYPE_CHECKING:
    import duckdb

PartitionFilter = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None


def data_file_location(store: Store, key: str) -> str:
    """Where a reader finds the data file ``key`` of ``store``: its local path, else its URI."""
    local = store.local_path(key)
    return local if local is not None else f"{store.uri}/{key}"


@dataclass(frozen=True)
class Snapshot:
    """An immutable view of a table at ``version``; the same version always reads the same."""

    name: str
    store: Store
    prefix: str
    state: TableState

    def __repr__(self) -> str:
        # One line: the state behind it (every file marker) is far too long to print.
        moment = dt.datetime.fromtimestamp(self.timestamp_ms / 1000, tz=dt.UTC)
        # Rows only where the log knows them: showing a snapshot must not read its data.
        rows = count_from_log(self, self.markers())
        counted = f"rows={rows}" if rows is not None else f"entries={sum_entries(self.markers())}"
        return (
            f"Snapshot({self.name!r}, version={self.version}, "
            f"at={moment.isoformat(timespec='milliseconds')}, "
            f"files={len(self.state.alive_files)}, {counted}, store={self.store.uri!r})"
        )

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def timestamp_ms(self) -> int:
        return self.state.timestamp_ms

    def markers(self, partitions: PartitionFilter = None) -> list[FileMarker]:
        """File markers of the alive files, pruned by partition values from the log alone.

        ``partitions`` is ``{"field": value or [values]}`` or a list of such dicts (OR-ed).
        """
        alive = sorted(self.state.alive_files, key=lambda m: m.path)
        if partitions is None:
            return alive
        spec = PartitionSpec.parse(list(self.state.config.partition_by), self.state.schema)
        return prune_by_partitions(alive, spec.normalise_filter(partitions))

    def partition_read(
        self, partitions: PartitionFilter, *, entries: bool = False
    ) -> PartitionRead:
        """The files a read of ``partitions`` opens (every alive file when None) and whether
        its rows must then be kept by partition: exact pruning where the table is partitioned
        by its key, else every file that may share a key with a chosen one too
        (:mod:`ledger.reads.partitions`). ``entries``: the read sums entries where visible
        rows are signed (totals and counts)."""
        alive = sorted(self.state.alive_files, key=lambda m: m.path)
        if partitions is None:
            return PartitionRead(alive)
        return partition_read(self.state, alive, partitions, entries=entries)

    def files(self, partitions: PartitionFilter = None) -> list[str]:
        """Paths (local) or URIs (``s3://...``) of the alive data files, for any Parquet reader."""
        markers = self.markers(partitions)
        return [data_file_location(self.store, self.prefix + m.path) for m in markers]

    def scan(
        self,
        partitions: PartitionFilter = None,
        con: duckdb.DuckDBPyConnection | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """The raw ledger (every entry, system columns included) as a DuckDB relation."""
        connection = read_connection(self.store, con)
        schema = file_schema(self.state.schema, self.state.config)
        return scan_files(connection, self.store, self.prefix, self.markers(partitions), schema)

    def count(self) -> int:
        """The logical row count: the count :func:`views.totals` gives, which is the number of
        visible rows unless blind inserts gave a key of a collapsing, dedup or custom table
        several live entries (each counts).

        Collapsing and custom tables answer from the log alone (the sum of every file's
        ``dml_sum``). Replacing, aggregating and dedup tables' merges do not keep those sums,
        so their rows are counted from the data files, except files holding the only entry of
        each of their keys and no delete mark (every file, after a full merge), which the log
        counts (docs/concepts.md section 9). ``Table.count(partitions=...)`` counts the rows
        of some partitions (:mod:`ledger.reads.partition_counts`)."""
        return row_count(self, self.markers())


def sum_entries(markers: Iterable[FileMarker]) -> int:
    return sum(m.rows for m in markers)
