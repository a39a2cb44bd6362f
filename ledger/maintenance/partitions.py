"""Partition drops (TTL, bulk removal) and rewrites (purging rows, e.g. one user's data).

A drop is log-only: one commit tombstones every alive file of the chosen partitions, chosen on
the latest state at commit time, and touches nothing else (the log records changes, so every
other file simply stays alive; IceDB rewrote the alive list and lost files of other partitions).
A rewrite passes each file of the chosen partitions through a filter query and commits the
results atomically; like a merge, it gives way when another commit changed those files first.
Transactions that read the dropped or rewritten partitions before the commit conflict, since the
entries they would cancel are gone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ledger.engines.duckdb.errors import USER_SQL_ERRORS, engine_reason
from ledger.engines.duckdb.query import partition_values_matching
from ledger.engines.duckdb.rewrite import entries_not_kept_once, query_changes_entries
from ledger.engines.duckdb.rmw import unmatched_marks_of_files
from ledger.errors import (
    ConflictError,
    InvalidArgumentError,
    InvalidPredicateError,
    SchemaError,
)
from ledger.log.commit import next_timestamp
from ledger.log.entries import FileMarker, LogFile, sum_markers
from ledger.log.state import TableState
from ledger.maintenance.merge import (
    check_query,
    delete_uncommitted,
    query_failures,
    write_query_result,
)
from ledger.partitioning import PartitionSpec
from ledger.pruning import prune_by_partitions
from ledger.reads.counts import count_from_log
from ledger.schema import ROW_ID
from ledger.snapshot import Snapshot
from ledger.sql.names import ENTRIES
from ledger.sql.predicates import predicate_over
from ledger.sql_guard import checked_select
from ledger.transaction import check_timeout, unmatched_marks_error
from ledger.trx_ids import reservation_body, reserve_trx_id
from ledger.writer import file_schema

if TYPE_CHECKING:
    from ledger.table import Table

DROP_PARTITIONS = "drop_partitions"
REWRITE_PARTITIONS = "rewrite_partitions"

PartitionChoice = Mapping[str, Any] | Iterable[Mapping[str, Any]] | None


@dataclass(frozen=True)
class PartitionChange:
    """The outcome of a drop or rewrite; ``version`` is None when nothing was committed.

    ``entries_rewritten`` counts the entries a rewrite wrote again into new files (those its
    query returned from the files it changed, redacted values included)."""

    version: int | None
    files_removed: int
    files_added: int
    entries_removed: int
    entries_rewritten: int = 0


def _refuse_rollup(table: Table, state: TableState, operation: str) -> None:
    """A rollup holds the totals of its base, and only its refreshes write to it: a dropped or
    rewritten partition would stay wrong through every later refresh."""
    if state.config.rollup is not None:
        base = state.config.rollup.get("base")
        raise InvalidArgumentError(
            f"table {table.name!r} is a rollup of {base!r}: only its refreshes write to it, so "
            f"{operation} is refused and nothing was written. Change {base!r} instead, then "
            "refresh the rollup"
        )


def drop_partitions(
    table: Table, partitions: PartitionChoice = None, *, where: str | None = None
) -> PartitionChange:
    started_ms = int(time.time() * 1000)
    base = table.handle.latest_state()
    _refuse_rollup(table, base, "drop_partitions")
    spec = _spec(table, base)
    choose = _chooser(spec, partitions, where, caller="drop_partitions")
    outcome: dict[str, list[FileMarker]] = {"dropped": []}

    def build(latest: TableState) -> LogFile | None:
        check_timeout(latest, started_ms, table.name)
        doomed = choose(latest.alive_files)
        outcome["dropped"] = doomed
        if not doomed:
            return None
        now = next_timestamp(latest)
        return LogFile(
            version=latest.version + 1,
            timestamp_ms=now,
            operation=DROP_PARTITIONS,
            schema=latest.schema,
            files=tuple(m.tombstone(now) for m in doomed),
            info=_drop_info(table, latest, doomed),
        )

    _, entry = table.handle.commit(build, base)
    dropped = outcome["dropped"] if entry is not None else []
    return PartitionChange(
        None if entry is None else entry.version,
        len(dropped),
        0,
        sum(m.rows for m in dropped),
    )


def _drop_info(table: Table, state: TableState, doomed: list[FileMarker]) -> dict[str, int]:
    """A drop's ``info``: ``entries_removed``, the entries of the dropped files, and
    ``deleted``, the logical rows dropped, where the log alone knows them (as ``count()``
    counts them: their ``dml_sum`` where merges keep sign sums, the rows of files whose rows are
    visible as they are otherwise). Only the log is read: reading data here would widen the
    commit window, and before it, slow the drop (and what runs beside it) by a read of every
    dropped file on S3; a count that needs data is left out rather than guessed."""
    info = {"entries_removed": sum(m.rows for m in doomed)}
    rows = count_from_log(Snapshot(table.name, table.store, table.prefix, state), doomed)
    if rows is not None:
        info["deleted"] = rows
    return info


def rewrite_partitions(
    table: Table, partitions: PartitionChoice, sql: str | None, *, where: str | None = None
) -> PartitionChange:
    started_ms = int(time.time() * 1000)
    if not isinstance(sql, str) or not sql.strip():
        raise InvalidArgumentError(
            "rewrite_partitions needs a query over 'entries', e.g. "
            '"SELECT * FROM entries WHERE user_id <> 42"'
        )
    # Checked before DuckDB sees it (binding alone would run a COPY); the checked text runs.
    sql = checked_select(sql, (ENTRIES,), "rewrite query")
    base = table.handle.latest_state()
    _refuse_rollup(table, base, "rewrite_partitions")
    spec = _spec(table, base)
    # A rewrite keeps every row its query returns, so no choice means every file (a purge of
    # one user across all partitions), unlike a drop, where it would empty the table.
    chosen = _chooser(
        spec, partitions, where, caller="rewrite_partitions", every_file_by_default=True
    )(base.alive_files)
    check_query(sql, file_schema(base.schema, base.config), "rewrite query")
    if not chosen:
        return PartitionChange(None, 0, 0, 0)
    replaced: list[FileMarker] = []
    added: list[FileMarker] = []
    try:
        for marker in chosen:
            if not _query_changes(table, base, marker, sql):
                continue  # the query returns the file's entries as they are: keep the file
            outputs = write_query_result(
                table, base, dict(marker.partition), [marker], sql, "rewrite query"
            )
            replaced.append(marker)
            added.extend(outputs)
        if replaced:
            _check_rewritten_entries(table, base, replaced, added)
        # The id makes the commit recognisable if its response is lost (see log/commit.py).
        body = reservation_body(base.version)  # a snapshot bound for vacuum (docs/merges.md 4.4)
        trx_id = reserve_trx_id(table.store, table.prefix, base.max_trx_id, body) if replaced else 0
    except BaseException:
        delete_uncommitted(table, added)
        raise
    if not replaced:
        return PartitionChange(None, 0, 0, 0)

    def build(latest: TableState) -> LogFile:
        check_timeout(latest, started_ms, table.name)
        for marker in replaced:
            current = latest.files.get(marker.path)
            if current is None or not current.alive:
                raise ConflictError(
                    f"table {table.name!r}: file {marker.path} was merged, dropped or "
                    "rewritten by another commit during this rewrite; nothing was "
                    "committed. Run the rewrite again"
                )
        now = next_timestamp(latest)
        return LogFile(
            version=latest.version + 1,
            timestamp_ms=now,
            operation=REWRITE_PARTITIONS,
            schema=latest.schema,
            files=(*(m.tombstone(now) for m in replaced), *added),
            trx_id=trx_id,
            info={"entries_removed": sum(m.rows for m in replaced) - _rows(added)},
        )

    try:
        _, entry = table.handle.commit(build, base)
    except ConflictError:  # certainly not committed; any other error leaves the files be
        delete_uncommitted(table, added)
        raise
    return PartitionChange(
        None if entry is None else entry.version,
        len(replaced),
        len(added),
        sum(m.rows for m in replaced) - _rows(added),
        _rows(added),
    )


def _check_rewritten_entries(
    table: Table, base: TableState, replaced: list[FileMarker], added: list[FileMarker]
) -> None:
    """Refuse a result (written, not committed) whose entries no writer could have made, though
    each row passed the result checks: an entry returned twice or an entry the rewritten files
    never held (counted twice, or given another's ``(trx_id, trx_seq)``), or a delete mark that
    cancels no insertion once the rewrite is applied (its insertion dropped or changed, or an
    insertion negated). Either would leave ``count()`` and the totals disagreeing with the
    visible rows; the marks are checked as ``append_entries`` checks them, over every alive
    entry of the keys the rewrite touched (a mark may cancel an insertion of another file)."""
    schema = file_schema(base.schema, base.config)
    repeated, foreign = entries_not_kept_once(table.store, table.prefix, replaced, added, schema)
    if repeated or foreign:
        raise SchemaError(
            f"rewrite query: its result holds {repeated} repeated entries and {foreign} entries "
            "the rewritten files do not hold (by trx_id and trx_seq); a rewrite may drop entries "
            "and change their values, but each entry it keeps must keep its trx_id and trx_seq "
            "and appear once. Nothing was committed"
        )
    config = base.config
    values = [*base.schema.names, *([ROW_ID] if config.generated_row_id else [])]
    rewritten = {m.path for m in replaced}
    after = [*added, *(m for m in base.alive_files if m.path not in rewritten)]
    if all(m.dml_sum == m.rows for m in after):
        return  # no delete mark left anywhere (the log knows): none can be unmatched
    unmatched = unmatched_marks_of_files(
        table.store,
        table.prefix,
        after,
        schema,
        config.key_columns or values,
        values,
        keys_files=[*replaced, *added],
    )
    if unmatched.num_rows:
        raise unmatched_marks_error(
            table.name,
            unmatched,
            "The rewrite query dropped or changed what they cancel, or turned insertions into "
            "marks; nothing was committed. Keep or drop a key's insertions and marks together",
        )


def _query_changes(table: Table, base: TableState, marker: FileMarker, sql: str) -> bool:
    """Whether ``sql`` returns anything but the entries of ``marker``'s file: a redaction keeps
    the row count and changes values, so counting rows cannot tell."""
    with query_failures("rewrite query", table.name):
        return query_changes_entries(
            table.store, table.prefix, [marker], file_schema(base.schema, base.config), sql
        )


def _rows(markers: list[FileMarker]) -> int:
    return sum(m.rows for m in markers)


def _spec(table: Table, state: TableState) -> PartitionSpec:
    return PartitionSpec.parse(list(state.config.partition_by), state.schema)


def _chooser(
    spec: PartitionSpec,
    partitions: PartitionChoice,
    where: str | None,
    *,
    caller: str,
    every_file_by_default: bool = False,
) -> Any:
    """A function from alive files to those in the chosen partitions (``caller`` names the
    call they were chosen for, in refusals)."""
    if partitions is not None and where is not None:
        raise InvalidArgumentError("choose partitions by values or by where=, not both")
    if partitions is None and where is None:
        if spec.fields and not every_file_by_default:
            raise InvalidArgumentError(
                "name the partitions ({field: value or [values]}) or pass where='predicate'; "
                "to remove every row use delete_where or drop the table"
            )
        return lambda files: list(files)
    if not spec.fields:
        raise InvalidArgumentError("the table is not partitioned; there are no partitions to pick")
    if partitions is not None:
        filters = spec.normalise_filter(partitions)
        return lambda files: prune_by_partitions(list(files), filters)
    if not isinstance(where, str):
        raise InvalidPredicateError(
            f"{caller} needs where= as a SQL predicate string over the partition fields, got "
            f"{where!r}"
        )
    tree = predicate_over(spec.names, where, f"{caller}(where=...)", "partition fields")
    predicate = str(tree.sql(dialect="duckdb"))

    def by_predicate(files: list[FileMarker]) -> list[FileMarker]:
        names = spec.names
        distinct = sorted({tuple(m.partition.get(n) for n in names) for m in files}, key=repr)
        values = pa.table(
            {n: pa.array([v[i] for v in distinct], pa.string()) for i, n in enumerate(names)}
        )
        try:
            matching = partition_values_matching(values, predicate)
        except USER_SQL_ERRORS as e:
            raise InvalidPredicateError(
                f"where={where!r} does not apply to the partition fields {names} (their values "
                f"are text, e.g. '2026-11-21' for day(ts)): {engine_reason(e)}"
            ) from e
        chosen = {tuple(row[n] for n in names) for row in matching.to_pylist()}
        return [m for m in files if tuple(m.partition.get(n) for n in names) in chosen]

    return by_predicate


@dataclass(frozen=True)
class PartitionInfo:
    """One partition of a snapshot, from the log alone: its values (field -> path text; empty
    for an unpartitioned table), alive data files, entries in them (delete marks included),
    logical rows (the sum of ``dml_type``) and bytes."""

    values: Mapping[str, str | None]
    files: int
    entries: int
    rows: int
    bytes: int


def partition_infos(
    markers: Iterable[FileMarker],
    count_rows: Callable[[Sequence[FileMarker]], int] = sum_markers,
) -> list[PartitionInfo]:
    """The partitions of ``markers`` (alive files), in partition-value order; ``count_rows``
    counts the rows of one partition's files."""
    grouped: dict[tuple[tuple[str, str | None], ...], list[FileMarker]] = {}
    for marker in markers:
        grouped.setdefault(tuple(sorted(marker.partition.items())), []).append(marker)
    return [
        PartitionInfo(
            values=dict(values),
            files=len(files),
            entries=sum(m.rows for m in files),
            rows=count_rows(files),
            bytes=sum(m.size for m in files),
        )
        for values, files in sorted(grouped.items(), key=lambda item: _sort_key(item[0]))
    ]


def _sort_key(values: tuple[tuple[str, str | None], ...]) -> tuple[tuple[str, bool, str], ...]:
    # NULL partition values (no path text) sort first, and never compare with text.
    return tuple((name, value is not None, value or "") for name, value in values)
