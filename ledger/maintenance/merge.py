"""Merges: rewrite the chosen files of each partition through the table's merge policy.

Optimistic, with no lock: the merge reads a snapshot, writes its new files, and commits one log
entry that tombstones its inputs and adds its outputs. At commit, a partition whose inputs are
no longer all alive (another merge, a drop or a rewrite got there first) is left out and its new
files deleted; appends that raced the merge do not matter, since the merge never touched their
files. Merges rewrite entries without changing what they mean, so transactions never conflict
with them.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ledger.engines.duckdb import rewrite as embedded_rewrite
from ledger.engines.duckdb.errors import (
    QUERY_ERRORS,
    RUNNING_ERRORS,
    VALUE_ERRORS,
    failed_column,
    user_sql_failures,
)
from ledger.engines.duckdb.rewrite import COPY_ROW_GROUP_STEP, copy_entries, query_result_schema
from ledger.errors import (
    ConflictError,
    InvalidArgumentError,
    SchemaError,
    TypeMismatchError,
    UnknownColumnError,
)
from ledger.log.commit import next_timestamp
from ledger.log.entries import FileMarker, LogFile, TableConfig, json_value
from ledger.log.state import TableState
from ledger.maintenance.plan import PartitionPlan, plan_merge
from ledger.partitioning import PartitionSpec
from ledger.progress import progress
from ledger.pruning import _decoder as decoder
from ledger.reads.files import _box as key_box
from ledger.reads.files import _meet as boxes_meet
from ledger.reads.files import insertions_only
from ledger.schema import DML_TYPE, ROW_ID, TRX_ID, TRX_SEQ, arrow_to_sql_or_str
from ledger.snapshot import PartitionFilter, data_file_location
from ledger.sql.names import ENTRIES, ENTRIES_OF_INSERTION_FILES, ENTRIES_OF_MARK_FILES
from ledger.sql_guard import checked_select
from ledger.transaction import check_timeout
from ledger.trx_ids import reservation_body, reserve_trx_id
from ledger.writer import ROW_GROUP_ROWS, DataWriter, SortedFileSink, file_schema, sort_columns
from merge_policies import load_policy
from merge_policies.base import MergeContext, MergePolicy

if TYPE_CHECKING:
    from ledger.table import Table

log = logging.getLogger(__name__)

MERGE = "merge"
# Machines' clocks may disagree by this much; time-based rules wait this much longer.
CLOCK_SKEW_MS = 60_000
_TARGET_ROW_GROUP_BYTES = 64 * 1024 * 1024
_TARGET_FILE_BYTES = 512 * 1024 * 1024
_BATCH_ROWS = 1024 * 1024


# (table, snapshot state, partition, input files, policy query, what) -> the files written
PartitionRewrite = Callable[
    ["Table", TableState, dict[str, "str | None"], Sequence[FileMarker], str, str],
    list[FileMarker],
]


@dataclass(frozen=True)
class PartitionMerge:
    """What the merge did to one partition."""

    partition: dict[str, str | None]
    files_in: int
    files_out: int
    entries_in: int
    entries_out: int


@dataclass(frozen=True)
class MergeResult:
    """The outcome of :meth:`Table.merge`. ``version`` is None when nothing was committed."""

    version: int | None
    merged: tuple[PartitionMerge, ...]
    # Partitions whose files another commit merged, dropped or rewrote first: not committed.
    conflicts: tuple[dict[str, str | None], ...] = ()

    @property
    def files_in(self) -> int:
        return sum(p.files_in for p in self.merged)

    @property
    def files_out(self) -> int:
        return sum(p.files_out for p in self.merged)

    @property
    def entries_in(self) -> int:
        return sum(p.entries_in for p in self.merged)

    @property
    def entries_out(self) -> int:
        return sum(p.entries_out for p in self.merged)


def _as_marker_paths(table: Table, alive: Sequence[FileMarker], files: Sequence[str]) -> list[str]:
    """``files`` as paths relative to the table (as its markers hold them), each given either
    so or as :meth:`Table.files` gives it (a local path or a URI)."""
    relative = {data_file_location(table.store, table.prefix + m.path): m.path for m in alive}
    return [relative.get(f, f) for f in files]


def merge_table(
    table: Table,
    *,
    partitions: PartitionFilter = None,
    files: Sequence[str] | None = None,
    max_file_size: int | None = None,
    max_files: int | None = None,
    min_files: int = 2,
    order: str = "ascending",
    max_partitions: int | None = None,
    show_progress: bool | None = None,
    rewrite: PartitionRewrite | None = None,
) -> MergeResult:
    """Merge the planned files of each partition (see :meth:`Table.merge`); ``rewrite`` runs a
    policy's query over one partition's inputs and writes the result (default: on the embedded
    engine, :func:`write_query_result`)."""
    started_ms = int(time.time() * 1000)  # before the snapshot: see settled_trx_id
    base = table.handle.latest_state()
    # Refused even when no file needs a rewrite: a schema no engine can read is no table to merge.
    base.schema.check_usable()
    options: dict[str, Any] = {}
    if max_file_size is not None:
        options["max_file_size"] = max_file_size
    if max_files is not None:
        options["max_files"] = max_files
    policy = load_policy(base.config.policy, base.schema, base.config)
    if files is not None and not isinstance(files, str):
        files = _as_marker_paths(table, base.alive_files, files)
    plans = plan_merge(
        base,
        partitions=partitions,
        files=files,
        min_files=min_files,
        order=order,
        max_partitions=max_partitions,
        unchanged=lambda marker: _merges_unchanged(marker, policy, base.config.key_columns),
        **options,
    )
    if not plans:
        return MergeResult(None, ())
    settled = settled_trx_id(base, started_ms)
    outputs: dict[str, list[FileMarker]] = {}
    try:
        with progress(
            sum(p.entries for p in plans), f"merge {table.name}", "entries", show_progress
        ) as advance:
            for plan in plans:
                outputs[plan.folder] = _merge_partition(table, base, policy, plan, settled, rewrite)
                advance(plan.entries)
    except BaseException:
        delete_uncommitted(table, [m for markers in outputs.values() for m in markers])
        raise
    try:
        # The id makes the commit recognisable if its response is lost (see log/commit.py).
        trx_id = reserve_trx_id(
            table.store, table.prefix, base.max_trx_id, reservation_body(base.version)
        )
    except BaseException:
        delete_uncommitted(table, [m for markers in outputs.values() for m in markers])
        raise
    # From here on, files are deleted only when the commit certainly did not land: a storage
    # error on the log write leaves it unknown, and deleting then could lose committed files.
    return _commit(table, base, plans, outputs, trx_id, started_ms, settled)


def _merges_unchanged(
    marker: FileMarker, policy: MergePolicy, key_columns: tuple[str, ...]
) -> bool:
    """Whether the policy's query returns the entries of this file, merged alone, as they are:
    it holds no delete mark and the query passes keys without marks through, or no key of it
    occurs twice either and the query keeps such entries (a rewrite would copy the file)."""
    if marker.dml_sum != marker.rows:
        return False
    return policy.unmarked_keys_pass_through or (
        marker.unique_keys and policy.unique_insertions_unchanged(key_columns)
    )


def settled_trx_id(state: TableState, now_ms: int) -> int | None:
    """A ``trx_id`` at or below which every transaction has committed before ``now_ms`` or
    never will: transactions are refused at commit once open longer than the table's
    transaction timeout, a data file's transactions began before the file was written, and
    trx_ids are reserved in increasing order. Read the state *after* taking ``now_ms``."""
    cutoff = now_ms - state.config.transaction_timeout_ms - CLOCK_SKEW_MS
    old = [m.trx_max for m in state.files.values() if m.created_ms < cutoff]
    return max(old) if old else None


def _merge_partition(
    table: Table,
    base: TableState,
    policy: MergePolicy,
    plan: PartitionPlan,
    settled: int | None,
    rewrite: PartitionRewrite | None,
) -> list[FileMarker]:
    config = base.config
    schema = file_schema(base.schema, config)
    key_only = not config.partition_by or config.partition_by_key_only
    context = MergeContext(
        source=ENTRIES,
        columns=tuple(schema.names),
        key_columns=config.key_columns,
        value_columns=(*base.schema.names, *([ROW_ID] if config.generated_row_id else [])),
        covers_every_entry_of_its_keys=plan.covers_partition and key_only,
        settled_trx_id=settled,
        # The embedded engine registers the entries split by file (rewrite.register_entries);
        # a rewrite of another engine offers ``entries`` only.
        split_sources=(
            (ENTRIES_OF_INSERTION_FILES, ENTRIES_OF_MARK_FILES) if rewrite is None else None
        ),
    )
    sql, what = policy.merge_sql(context), f"merge policy {policy.name!r}"
    if rewrite is not None:
        outputs = rewrite(table, base, plan.partition, plan.inputs, sql, what)
    else:
        outputs = _write_merged(table, base, policy, plan, sql, what, schema)
    if policy.signs_consistent:
        _check_no_entries_added(table, plan, outputs, what)
    return outputs


def _check_no_entries_added(
    table: Table, plan: PartitionPlan, outputs: list[FileMarker], what: str
) -> None:
    """Refuse a merge whose output holds more insertions or more delete marks than its inputs
    (a custom query that repeats entries, invents them, or turns insertions into marks): the
    count and totals of a signed table are sums of ``dml_type`` over its entries, which a merge
    may lower only by cancelling or dropping entries. Counted from the files' markers (an
    entry count and a sign sum each), so nothing is read."""

    def signs(markers: Sequence[FileMarker]) -> tuple[int, int]:
        rows, total = sum(m.rows for m in markers), sum(m.dml_sum for m in markers)
        return (rows + total) // 2, (rows - total) // 2

    (insertions_in, marks_in), (insertions_out, marks_out) = signs(plan.inputs), signs(outputs)
    if insertions_out > insertions_in or marks_out > marks_in:
        delete_uncommitted(table, outputs)
        raise SchemaError(
            f"{what} turned {insertions_in} insertions and {marks_in} delete marks into "
            f"{insertions_out} insertions and {marks_out} delete marks in partition "
            f"{plan.folder or '(unpartitioned)'} of table {table.name!r}; a merge may cancel "
            "or drop entries and change their values, never repeat, add or negate entries "
            "(count() and the totals are sums of dml_type). Nothing was committed"
        )


def _write_merged(
    table: Table,
    base: TableState,
    policy: MergePolicy,
    plan: PartitionPlan,
    sql: str,
    what: str,
    schema: pa.Schema,
) -> list[FileMarker]:
    """The merged files of one partition, on the embedded engine."""
    config = base.config
    passing = passing_files(plan.inputs, policy, [schema.field(k).type for k in config.key_columns])
    if passing:
        log.debug(
            "table %s: merge copies %d of %d files of partition %s as they are",
            table.name,
            len(passing),
            len(plan.inputs),
            plan.folder or "(unpartitioned)",
        )
    return write_query_result(table, base, plan.partition, plan.inputs, sql, what, passing)


def passing_files(
    inputs: Sequence[FileMarker], policy: MergePolicy, key_types: Sequence[pa.DataType]
) -> list[FileMarker]:
    """The inputs a merge may copy as they are, without its policy's query: under a policy
    that returns the entries of keys holding no delete mark untouched, the files of insertions
    only whose key ranges meet no range of an input holding marks (boxes of per-column key
    bounds, as reads compare them in ledger/reads/files.py). None when a bound cannot be
    compared."""
    if not policy.unmarked_keys_pass_through:
        return []
    marked = [m for m in inputs if not insertions_only(m)]
    if not marked:
        return list(inputs)
    decoders = [decoder(t) for t in key_types]
    decode = [d for d in decoders if d is not None]
    if len(decode) < len(decoders):
        return []
    try:
        marked_boxes = [key_box(m, decode) for m in marked]
        passing = []
        for marker in inputs:
            box = key_box(marker, decode) if insertions_only(marker) else None
            if box is None or any(b is None or boxes_meet(box, b) for b in marked_boxes):
                continue
            passing.append(marker)
    except TypeError:  # bounds of different types (a widened key column): compare nothing
        return []
    return passing


def _check_result_entries(
    batch: pa.RecordBatch | pa.Table,
    base: TableState,
    spec: PartitionSpec,
    partition: dict[str, str | None],
    what: str,
) -> None:
    """A query may drop entries or change their values, never make entries no writer could
    have made: a sign other than +1/-1, a NULL key, a ``trx_id`` past the committed ones (a
    later transaction would be given it too), or a row of another partition (it would sit in
    this partition's files and be pruned wrongly)."""

    def refuse(problem: str) -> None:
        raise SchemaError(
            f"{what}: its result {problem}; a query may drop entries or change values, but its "
            "entries must keep a sign of +1 or -1, a non-NULL key, their partition and a "
            "trx_id the table committed"
        )

    signs = batch.column("dml_type")
    if signs.null_count or not pc.all(pc.is_in(signs, pa.array([1, -1], signs.type))).as_py():
        refuse("holds a dml_type other than +1 or -1")
    # A rollup's key is its group, which may be NULL (one group, as in GROUP BY).
    keys = () if base.config.rollup is not None else base.config.key_columns
    for column in (*keys, "trx_id", "trx_seq"):
        if batch.column(column).null_count:
            refuse(f"holds a NULL {column}")
    if batch.num_rows and pc.max(batch.column("trx_id")).as_py() > base.max_trx_id:
        refuse(f"holds a trx_id above the largest committed one ({base.max_trx_id})")
    for field in spec.fields:
        values = field.values(pa.table({field.source: batch.column(field.source)}))
        expected = partition.get(field.name)
        differs = pc.is_null(values) if expected is not None else pc.is_valid(values)
        if expected is not None:
            differs = pc.or_kleene(differs, pc.not_equal(values, expected))
        if pc.any(differs).as_py():
            refuse(f"moves rows out of partition {field.name}={expected!r}")


def write_query_result(
    table: Table,
    base: TableState,
    partition: dict[str, str | None],
    inputs: Sequence[FileMarker],
    sql: str,
    what: str,
    passing: Sequence[FileMarker] = (),
) -> list[FileMarker]:
    """Run ``sql`` over the entries of ``inputs`` and write the result, sorted, into new files of
    the partition; the result's columns are checked against the data files' first. The inputs
    listed in ``passing`` are not read by ``sql``: their entries join its result as they are.

    On local disk, a result that fits one file and already has the data files' column types is
    written by DuckDB's own Parquet writer (:func:`copy_query_result`); anything else streams
    through :class:`SortedFileSink` (:func:`stream_query_result`)."""
    _, file_rows = file_layout(inputs)
    if sum(m.rows for m in inputs) <= file_rows:
        copied = copy_query_result(table, base, partition, inputs, sql, what, passing)
        if copied is not None:
            return copied
    return stream_query_result(table, base, partition, inputs, sql, what, passing)


def _queried(inputs: Sequence[FileMarker], passing: Sequence[FileMarker]) -> list[FileMarker]:
    """The inputs a rewrite's query reads: those not copied as they are."""
    copied = {m.path for m in passing}
    return [m for m in inputs if m.path not in copied]


def copy_query_result(
    table: Table,
    base: TableState,
    partition: dict[str, str | None],
    inputs: Sequence[FileMarker],
    sql: str,
    what: str,
    passing: Sequence[FileMarker] = (),
) -> list[FileMarker] | None:
    """Write the result of ``sql`` over ``inputs`` (and the entries of ``passing``, see
    :func:`write_query_result`) as one file with DuckDB's parallel Parquet
    writer (no batch crosses into Python; row groups of the format's 131,072 rows), then read
    back its key and system columns to check its entries and compute its marker exactly as the
    streaming writer does. None, with nothing written, when the store is not local or the
    result's types are not exactly the data files' (the streaming path converts them, or
    refuses them, as it always has)."""
    config = base.config
    schema = file_schema(base.schema, config)
    spec = PartitionSpec.parse(list(config.partition_by), base.schema)
    writer = DataWriter(table.store, table.prefix, base.schema, config, spec)
    relative, key = writer.new_file_key(partition)
    local = table.store.local_path(key)
    if local is None:
        return None
    try:
        # The store makes the file (and may refuse to); DuckDB then fills it in place.
        table.store.filesystem.open_output_stream(table.store.fs_path(key)).close()
        with query_failures(what, table.name):
            copied = copy_entries(
                table.store,
                table.prefix,
                _queried(inputs, passing),
                schema,
                sql,
                sort_columns(config),
                local,
                copy_row_group_rows(),
                passing,
            )
        if not copied:
            _delete_keys(table, [key])
            return None
        entries = _read_back(local, config, spec)
        if entries.num_rows == 0:  # the query dropped every entry
            _delete_keys(table, [key])
            return []
        _check_result_entries(entries, base, spec, partition, what)
        writer.make_durable(key)
        return [_copied_marker(relative, os.path.getsize(local), entries, partition, config)]
    except BaseException:
        _delete_keys(table, [key])
        raise


def copy_row_group_rows() -> int:
    """Rows per row group of a file DuckDB writes: it encodes row groups in parallel, one per
    thread, so the format's standard size keeps every core busy where the streaming path's
    64 MiB groups would not (a multiple of DuckDB's step)."""
    return max(COPY_ROW_GROUP_STEP, ROW_GROUP_ROWS - ROW_GROUP_ROWS % COPY_ROW_GROUP_STEP)


def _read_back(path: str, config: TableConfig, spec: PartitionSpec) -> pa.Table:
    """The columns of a written file that its checks and marker need."""
    needed = [*config.key_columns, TRX_ID, TRX_SEQ, DML_TYPE, *(f.source for f in spec.fields)]
    return pq.read_table(path, columns=list(dict.fromkeys(needed)))


def _copied_marker(
    relative: str,
    size: int,
    entries: pa.Table,
    partition: dict[str, str | None],
    config: TableConfig,
) -> FileMarker:
    """The marker of a written file from its own rows, as :class:`SortedFileSink` computes it."""
    keys = list(config.key_columns)
    trx = pc.min_max(entries.column(TRX_ID))
    bounds = [pc.min_max(entries.column(k)) for k in keys]
    sorted_by_key = sort_columns(config)[: len(keys)] == keys
    return FileMarker(
        path=relative,
        size=size,
        created_ms=int(time.time() * 1000),
        rows=entries.num_rows,
        dml_sum=int(pc.sum(entries.column(DML_TYPE)).as_py() or 0),
        trx_min=int(trx["min"].as_py()),
        trx_max=int(trx["max"].as_py()),
        partition=partition,
        key_min=tuple(json_value(b["min"].as_py()) for b in bounds),
        key_max=tuple(json_value(b["max"].as_py()) for b in bounds),
        unique_keys=sorted_by_key and _adjacent_keys_differ(entries.select(keys)),
    )


def _adjacent_keys_differ(keys: pa.Table) -> bool:
    """Whether no two adjacent rows of ``keys`` (sorted) are equal (NULLs never equal)."""
    if keys.num_rows < 2:
        return True
    same = None
    for column in keys.columns:
        values = column.combine_chunks()
        equal = pc.fill_null(pc.equal(values[1:], values[:-1]), False)
        same = equal if same is None else pc.and_(same, equal)
    return not pc.any(same).as_py()


def stream_query_result(
    table: Table,
    base: TableState,
    partition: dict[str, str | None],
    inputs: Sequence[FileMarker],
    sql: str,
    what: str,
    passing: Sequence[FileMarker] = (),
) -> list[FileMarker]:
    """Run ``sql`` over the entries of ``inputs`` and stream the result (with the entries of
    ``passing``, see :func:`write_query_result`), sorted, through :class:`SortedFileSink` into
    new files of the partition (any store, any size; the result's columns are checked and cast
    to the data files' types)."""
    config = base.config
    schema = file_schema(base.schema, config)
    rows = max(1, sum(m.rows for m in inputs))
    row_group_rows, file_rows = file_layout(inputs)
    spec = PartitionSpec.parse(list(config.partition_by), base.schema)
    writer = DataWriter(table.store, table.prefix, base.schema, config, spec)
    sink = SortedFileSink(
        writer,
        partition,
        file_rows=file_rows,
        row_group_rows=row_group_rows,
        expected_rows=rows,
    )
    try:
        # Through the module, so that wrapping its function (to time it) wraps this call.
        with (
            query_failures(what, table.name),
            embedded_rewrite.rewrite_entries(
                table.store,
                table.prefix,
                _queried(inputs, passing),
                schema,
                sql,
                sort_columns(config),
                _BATCH_ROWS,
                passing,
            ) as reader,
        ):
            _check_result_schema(reader.schema, schema, what)
            for batch in reader:
                _check_result_entries(batch, base, spec, partition, what)
                try:
                    sink.write(_converted(batch, schema, what))
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                    raise TypeMismatchError(
                        f"{what}: its result does not fit the table's column types: {e}"
                    ) from e
        return sink.close()
    except BaseException:
        sink.abort()
        _delete_keys(table, sink.keys)
        raise


def _converted(batch: pa.RecordBatch, target: pa.Schema, what: str) -> pa.RecordBatch:
    """``batch`` with the data files' column types, each column converted on its own so that a
    value one cannot hold (``v + 0.5`` for a BIGINT ``v``) is refused naming its column; the
    check of the result's types (:func:`_check_result_schema`) only knows the types convert."""
    columns = []
    for field in target:
        column = batch.column(field.name)
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise TypeMismatchError(
                    f"{what} returns column {field.name!r} as {arrow_to_sql_or_str(column.type)}"
                    f", which does not convert to the table's {arrow_to_sql_or_str(field.type)} "
                    f"for every value ({e}); nothing was committed. Cast or round the column in "
                    "the query"
                ) from e
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=target.names)


def file_layout(inputs: Sequence[FileMarker]) -> tuple[int, int]:
    """Rows per row group and per file of a rewrite's output, sized from its inputs' bytes per
    row (about 64 MB row groups and 512 MB files)."""
    rows = max(1, sum(m.rows for m in inputs))
    bytes_per_row = max(1.0, sum(m.size for m in inputs) / rows)
    row_group_rows = int(min(1 << 20, max(ROW_GROUP_ROWS, _TARGET_ROW_GROUP_BYTES / bytes_per_row)))
    return row_group_rows, int(max(row_group_rows, _TARGET_FILE_BYTES / bytes_per_row))


def query_failures(what: str, table_name: str) -> AbstractContextManager[None]:
    """Report an error of a merge or rewrite query running over a table's entries as a typed
    error naming the query and the table (nothing is committed after it): a query that does
    not bind raises :class:`SchemaError`; a value it computes that its column cannot hold (a
    failed cast, an overflow) :class:`TypeMismatchError`, naming the column where DuckDB names
    it; any other failure on the entries (a division by zero, ``error()``, a bad regular
    expression) :class:`InvalidArgumentError`."""

    def failed(reason: str, error: BaseException) -> Exception:
        if isinstance(error, VALUE_ERRORS):
            column = failed_column(error)
            named = f" column {column!r}:" if column else ""
            return TypeMismatchError(
                f"{what} computes a value its column cannot hold on the entries of table "
                f"{table_name!r}:{named} {reason}; nothing was committed. Cast, round or "
                "filter the values in the query"
            )
        if isinstance(error, RUNNING_ERRORS):
            return InvalidArgumentError(
                f"{what} failed on the entries of table {table_name!r}: {reason}; nothing was "
                "committed"
            )
        return SchemaError(f"{what} does not apply to table {table_name!r}: {reason}")

    return user_sql_failures(failed)


def check_query(sql: str, target: pa.Schema, what: str) -> None:
    """Bind ``sql`` over an empty ``entries`` and check its result columns (no data read).

    Binding runs the text in DuckDB, so it is checked to be one safe SELECT first (a COPY would
    run here), and the checked rendering is what binds."""
    checked = checked_select(sql, (ENTRIES,), what)
    try:
        result = query_result_schema(checked, target)
    except QUERY_ERRORS as e:
        raise SchemaError(f"{what} does not apply to the table: {e}") from e
    _check_result_schema(result, target, what)


def _check_result_schema(result: pa.Schema, target: pa.Schema, what: str) -> None:
    missing = [n for n in target.names if n not in result.names]
    extra = [n for n in result.names if n not in target.names]
    if missing or extra:
        raise UnknownColumnError(
            f"{what} must return exactly the data files' columns {target.names}; "
            f"missing {missing}, unexpected {extra}"
        )
    for field in target:
        got = result.field(field.name).type
        if got != field.type and not _castable(got, field.type):
            raise TypeMismatchError(
                f"{what} returns column {field.name!r} as {arrow_to_sql_or_str(got)}, which "
                f"does not convert to the table's {arrow_to_sql_or_str(field.type)}; cast it "
                "in the query"
            )


def _castable(source: pa.DataType, target: pa.DataType) -> bool:
    try:
        pa.array([], source).cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal)
    same_family = (
        any(f(source) and f(target) for f in numeric)
        or (pa.types.is_integer(source) and pa.types.is_decimal(target))
        or (pa.types.is_decimal(source) and pa.types.is_integer(target))
    )
    return (
        same_family
        or (pa.types.is_temporal(source) and pa.types.is_temporal(target))
        or (
            (pa.types.is_string(source) or pa.types.is_large_string(source))
            and (pa.types.is_string(target) or pa.types.is_large_string(target))
        )
    )


def _commit(
    table: Table,
    base: TableState,
    plans: list[PartitionPlan],
    outputs: dict[str, list[FileMarker]],
    trx_id: int,
    started_ms: int,
    settled: int | None,
) -> MergeResult:
    outcome: dict[str, list[PartitionPlan]] = {"merged": [], "conflicts": []}

    def build(latest: TableState) -> LogFile | None:
        check_timeout(latest, started_ms, table.name)
        merged: list[PartitionPlan] = []
        conflicts: list[PartitionPlan] = []
        for plan in plans:
            (merged if _still_mergeable(base, latest, plan, settled) else conflicts).append(plan)
        outcome["merged"], outcome["conflicts"] = merged, conflicts
        if not merged:
            return None
        now = next_timestamp(latest)
        files = [m.tombstone(now) for plan in merged for m in plan.inputs]
        files += [m for plan in merged for m in outputs[plan.folder]]
        return LogFile(
            version=latest.version + 1,
            timestamp_ms=now,
            operation=MERGE,
            schema=latest.schema,
            files=tuple(files),
            trx_id=trx_id,
            info={
                "policy": str(base.config.policy.get("name")),
                "entries_in": sum(p.entries for p in merged),
                "entries_out": sum(m.rows for p in merged for m in outputs[p.folder]),
            },
        )

    try:
        _, entry = table.handle.commit(build, base)
    except ConflictError:
        delete_uncommitted(table, [m for markers in outputs.values() for m in markers])
        raise
    conflicts = outcome["conflicts"] if entry is not None else plans
    delete_uncommitted(table, [m for plan in conflicts for m in outputs[plan.folder]])
    for plan in conflicts:
        log.warning(
            "table %s: merge of partition %s skipped: another commit changed its files first",
            table.name,
            plan.folder or "(unpartitioned)",
        )
    merged = outcome["merged"] if entry is not None else []
    return MergeResult(
        None if entry is None else entry.version,
        tuple(
            PartitionMerge(
                plan.partition,
                len(plan.inputs),
                len(outputs[plan.folder]),
                plan.entries,
                sum(m.rows for m in outputs[plan.folder]),
            )
            for plan in merged
        ),
        tuple(plan.partition for plan in conflicts),
    )


def _still_mergeable(
    base: TableState, latest: TableState, plan: PartitionPlan, settled: int | None
) -> bool:
    for marker in plan.inputs:
        current = latest.files.get(marker.path)
        if current is None or not current.alive:
            return False
    if plan.covers_partition and settled is not None:
        # Delete marks may have been dropped on the grounds that every entry of their keys was
        # merged: a file committed since the snapshot with an older transaction voids that.
        for marker in latest.alive_files:
            if (
                marker.path not in base.files
                and dict(marker.partition) == plan.partition
                and marker.trx_min <= settled
            ):
                return False
    return True


def delete_uncommitted(table: Table, markers: Sequence[FileMarker]) -> None:
    """Delete files no commit references (best effort; vacuum collects what is left)."""
    _delete_keys(table, [table.prefix + marker.path for marker in markers])


def _delete_keys(table: Table, keys: Sequence[str]) -> None:
    for key in keys:
        try:
            table.store.delete(key)
        except Exception as e:  # best effort: vacuum collects orphans later
            log.warning("could not delete uncommitted file %s: %s", key, e)
