"""The engine contract: what the ledger asks of an execution engine (DuckDB, Spark).

An engine reads and writes a table's data files and runs queries over their entries; the log,
snapshots and commits stay in ``ledger`` and are the same whatever engine ran. An engine
works in terms of its own *session* (a DuckDB connection, a SparkSession) and *relation* (a
DuckDB relation, a DataFrame): both are opaque to the caller, who gets a relation from one
method and hands it to another or to the engine's own API. Implementations are picked by name
from :data:`ledger.engines.ENGINES`.

Writes and rewrites are described, not performed, by the caller: a :class:`WriteTarget` (the
table's files) or a :class:`RewriteJob` (a query over some files, written into a partition) is
a plain value, and the engine decides where the work runs: DuckDB in this process, Spark on
its executors (the value is shipped to the tasks, which write the files and send back only
their markers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from ledger.partitioning import PartitionSpec
from ledger.writer import DataWriter, file_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from ledger.changes import ChangeSet
    from ledger.log.entries import FileMarker, TableConfig
    from ledger.schema import TableSchema
    from ledger.storage import Store


@dataclass(frozen=True)
class WriteTarget:
    """Where entry files are written: a table's store and prefix, and the schema and config
    of the version written to. A plain value (it pickles), so an engine may write on the
    driver or on its executors.

    >>> target = WriteTarget(store, prefix, state.schema, state.config)     # doctest: +SKIP
    >>> target.writer().write(entries)                                      # doctest: +SKIP
    """

    store: Store
    table_prefix: str
    schema: TableSchema
    config: TableConfig

    def writer(self) -> DataWriter:
        """The shared writer of these files (sorted, partitioned Parquet and their markers)."""
        spec = PartitionSpec.parse(list(self.config.partition_by), self.schema)
        return DataWriter(self.store, self.table_prefix, self.schema, self.config, spec)

    def file_schema(self) -> pa.Schema:
        """The data files' columns and types: the table's and the system columns."""
        return file_schema(self.schema, self.config)


@dataclass(frozen=True)
class RewriteJob:
    """A rewrite of some of a partition's files: ``sql`` (a merge policy's or rewrite's query,
    DuckDB SQL over the relation :data:`ledger.sql.names.ENTRIES`) over the entries of
    ``files``, its result written sorted into new files of ``partition``, files of about
    ``file_rows`` rows in row groups of ``row_group_rows``. ``group_columns`` are columns the
    query never relates entries across (an engine may run it apart on each group's entries);
    ``what`` names the query in errors."""

    target: WriteTarget
    partition: dict[str, str | None]
    files: tuple[FileMarker, ...]
    sql: str
    group_columns: tuple[str, ...]
    file_rows: int
    row_group_rows: int
    what: str = "the rewrite"


SessionT = TypeVar("SessionT", contravariant=True)
RelationT = TypeVar("RelationT")


class Engine(Protocol[SessionT, RelationT]):
    """An execution engine: five operations over a table's files, and the errors that mean a
    query does not fit the data.

    Every method reads only the files it is given, never the log: which files make a version is
    decided by the caller (``ledger.snapshot``, ``ledger.changes``), so an engine cannot make an
    uncommitted entry visible or show a committed one twice.
    """

    name: str
    """The engine's name in :data:`ledger.engines.ENGINES` (``"duckdb"``, ``"spark"``)."""

    query_errors: tuple[type[Exception], ...]
    """The engine's exceptions for a query that is wrong for the data (it does not parse or
    bind, or a cast fails), as opposed to one that fails reading a file (those are raised as
    :class:`ledger.errors.StorageError`). Callers catch them to raise a ledger error naming
    what the user got wrong."""

    def scan(
        self,
        session: SessionT,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
    ) -> RelationT:
        """The raw entries of ``files`` (relative to ``table_prefix``) as a relation with
        exactly ``schema``: a column a file lacks (written before the schema grew) reads as
        NULL, a narrower type is cast up; no files gives an empty relation. Nothing is read
        until the relation is computed; a file that cannot be read then raises StorageError."""
        ...

    def run(self, session: SessionT, tree: exp.Expression) -> RelationT:
        """``tree`` (a sqlglot query naming relations the session knows) rendered in the
        engine's dialect, as a relation; the same tree means the same rows on every engine."""
        ...

    def write_entries(
        self, session: SessionT, entries: RelationT, target: WriteTarget
    ) -> list[FileMarker]:
        """Write ``entries`` (numbered entry rows of the target's file schema) as sorted data
        files of ``target``, one or more per partition; return their markers. Nothing is
        committed: the caller commits the markers or deletes the files."""
        ...

    def rewrite_files(self, session: SessionT, job: RewriteJob) -> list[FileMarker]:
        """Run ``job``: its query over the entries of its files, the result sorted as appends
        sort (NULLs last) and written into new files of its partition; return their markers.
        A query that does not fit the data raises one of :attr:`query_errors` or a ledger
        error, an unreadable file StorageError; files written before a failure are deleted.
        Nothing is committed: the caller commits the markers (tombstoning the inputs) or
        deletes the files."""
        ...

    def change_entries(
        self,
        session: SessionT,
        store: Store,
        table_prefix: str,
        change_set: ChangeSet,
        schema: pa.Schema,
    ) -> RelationT:
        """The entries of ``change_set`` (see ``ledger.changes``) with ``_commit_version`` and
        ``_commit_timestamp``: the entries of files a commit wrote, stamped with that commit;
        for a commit that replaced files (a merge, a rewrite), the entries of its removed files
        negated and of its added files, netted per value tuple, each left as many times as its
        net sign says (a merge that changes no answer adds no change entry)."""
        ...
