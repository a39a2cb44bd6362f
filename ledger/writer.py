"""Arrow entries -> partitioned, sorted Parquet files and their file markers.

Every engine writes through this module, so files look the same whoever wrote them: the user
columns in schema order, then ``_row_id`` (tables without a primary key), ``trx_id``,
``trx_seq`` and ``dml_type``; rows sorted by the table's sort order within each file; row groups
of bounded size. Derived partition values (``day(ts)``, ``bucket(16, id)``) are not stored as
columns: they live in the file's path and marker, computed from the user columns it holds.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ledger.log.entries import FileMarker, TableConfig, json_value
from ledger.partitioning import PartitionSpec
from ledger.schema import DML_TYPE, ROW_ID, SYSTEM_TYPES, TRX_ID, TRX_SEQ, TableSchema
from ledger.storage import Store
from ledger.storage.local import fsync_path

ROW_GROUP_ROWS = 128 * 1024
FILE_ROWS = 512 * 1024  # a larger write becomes several files (of sorted, disjoint key ranges)
_WRITE_THREADS = max(2, min(8, os.cpu_count() or 2))
_UPLOAD_THREADS = 8
_SYNC_THREADS = 16
# Arithmetic sequences (entry numbers, generated row ids) shrink to almost nothing this way.
_DELTA_ENCODED = (TRX_SEQ, ROW_ID)
_PART = "__ledger_partition_"
# Files of an object store whose rows take at most this much memory in Arrow are encoded in
# memory and stored with one request (their Parquet bytes are smaller still).
ONE_REQUEST_BYTES = 32 << 20


_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _forget_pools_in_child() -> None:
    """A forked process has none of its parent's threads: the inherited pools would take tasks
    no thread runs (a write would wait forever), and the lock may have been held at the fork."""
    global _pools_lock
    _pools.clear()
    _pools_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pools_in_child)
# Encoding is CPU work (one thread per core); uploads and fsyncs wait on the network or the disk,
# and a disk's journal makes many fsyncs in flight at once cost little more than one.
_POOL_THREADS = {"encode": _WRITE_THREADS, "upload": _UPLOAD_THREADS, "sync": _SYNC_THREADS}


def _pool(purpose: str) -> ThreadPoolExecutor:
    """The process's threads for one ``purpose`` of a write (see :data:`_POOL_THREADS`): kept
    between writes, since starting threads for each small write cost more than the writes on a
    busy machine. Tasks never wait on other tasks of the same pool, so sharing it cannot
    deadlock."""
    with _pools_lock:
        pool = _pools.get(purpose)
        if pool is None:
            pool = ThreadPoolExecutor(
                max_workers=_POOL_THREADS[purpose], thread_name_prefix=f"ledger-{purpose}"
            )
            _pools[purpose] = pool
        return pool


_T = TypeVar("_T")
_R = TypeVar("_R")


def _in_parallel(action: Callable[[_T], _R], items: list[_T], *, purpose: str) -> list[_R]:
    """``action`` of every item, on the shared threads; in this thread when there is one item,
    or when the interpreter is shutting down (a buffered writer's last flush at exit), when no
    thread can be started. Every item is finished (or failed) before an error is raised."""
    if len(items) < 2:
        return [action(item) for item in items]
    try:
        futures = [_pool(purpose).submit(action, item) for item in items]
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        return [action(item) for item in items]
    wait(futures)
    return [f.result() for f in futures]


def _start(action: Callable[[_T], _R], item: _T, *, purpose: str) -> Future[_R]:
    """``action(item)`` started on the shared threads of ``purpose``; run in this thread when
    no thread can be started (the interpreter is shutting down)."""
    try:
        return _pool(purpose).submit(action, item)
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        done: Future[_R] = Future()
        try:
            done.set_result(action(item))
        except Exception as e:
            done.set_exception(e)
        return done


def start_request(action: Callable[[], _R]) -> Future[_R]:
    """``action()``, a store request, started on the threads that wait on the network, so the
    caller can send another at the same time."""
    return _start(lambda _: action(), None, purpose="upload")


def file_schema(schema: TableSchema, config: TableConfig) -> pa.Schema:
    """The Arrow schema of the table's data files."""
    schema.check_usable()
    fields = [pa.field(n, t) for n, t in zip(schema.names, schema.arrow().types, strict=True)]
    if config.generated_row_id:
        fields.append(pa.field(ROW_ID, pa.int64()))
    fields += [pa.field(n, t) for n, t in SYSTEM_TYPES.items()]
    return pa.schema(fields)


def build_entries(
    rows: pa.Table,
    target: pa.Schema,
    *,
    trx_id: int,
    trx_seq: pa.Array,
    dml_type: int | pa.Array,
    new_row_ids: Callable[[int], pa.Array],
) -> pa.Table:
    """Rows (conformed user columns, maybe ``_row_id``) -> entries in the file schema ``target``:
    missing user columns NULL, system columns filled. Every engine makes its entries here.

    ``trx_seq`` holds one number per row; ``new_row_ids(n)`` gives ids to rows of a table
    without a primary key that arrive without one.
    """
    n = rows.num_rows
    columns = []
    for field in target:
        if field.name in rows.column_names:
            columns.append(rows.column(field.name).cast(field.type))
        elif field.name == ROW_ID:
            columns.append(new_row_ids(n))
        elif field.name == TRX_ID:
            columns.append(pa.array(np.full(n, trx_id, dtype=np.int64)))  # pa.repeat: 6x slower
        elif field.name == TRX_SEQ:
            columns.append(trx_seq)
        elif field.name == DML_TYPE:
            signs = dml_type if isinstance(dml_type, pa.Array | pa.ChunkedArray) else None
            columns.append(
                signs.cast(pa.int8())
                if signs is not None
                else pa.array(np.full(n, dml_type, dtype=np.int8))
            )
        else:
            columns.append(pa.nulls(n, field.type))
    return pa.Table.from_arrays(columns, schema=target)


def sequence(start: int, n: int) -> pa.Array:
    """``trx_seq`` values ``start, start + 1, ...`` (``n`` of them)."""
    return pa.array(np.arange(start, start + n, dtype=np.int32))


def row_ids(trx_id: int, start: int, n: int) -> pa.Array:
    """Generated ``_row_id`` values: the transaction's id in the high 32 bits, then a counter."""
    return pa.array(np.arange(start, start + n, dtype=np.int64) + (trx_id << 32))


def sort_columns(config: TableConfig) -> list[str]:
    """Sort order inside files: the configured order (default: the key), then trx_id, trx_seq."""
    leading = list(config.sort_by) or list(config.key_columns)
    return [*leading, *(c for c in (TRX_ID, TRX_SEQ) if c not in leading)]


@dataclass(frozen=True)
class _Piece:
    """The rows of one data file: ``entries`` itself, or the rows ``order`` picks from it (in
    that order), gathered only when the file is written."""

    entries: pa.Table
    order: pa.Array | None
    partition: dict[str, str | None]

    @property
    def num_rows(self) -> int:
        return self.entries.num_rows if self.order is None else len(self.order)

    def rows(self) -> pa.Table:
        return self.entries if self.order is None else self.entries.take(self.order)

    def files(self, file_rows: int) -> list[_Piece]:
        """This piece cut into pieces of at most ``file_rows`` rows."""
        if self.num_rows <= file_rows:
            return [self]
        cuts = range(0, self.num_rows, file_rows)
        if self.order is None:
            return [_Piece(self.entries.slice(c, file_rows), None, self.partition) for c in cuts]
        return [_Piece(self.entries, self.order.slice(c, file_rows), self.partition) for c in cuts]


@dataclass(frozen=True)
class DataWriter:
    """Writes entry tables of one table's current schema into its life's data folder."""

    store: Store
    table_prefix: str
    schema: TableSchema
    config: TableConfig
    partition_spec: PartitionSpec

    def write(self, entries: pa.Table) -> list[FileMarker]:
        """Write ``entries`` (full file schema) as one sorted file per partition."""
        if entries.num_rows == 0:
            return []
        target = file_schema(self.schema, self.config)
        entries = entries.select(target.names).cast(target)
        # Chosen once for the whole write: sampling every file's columns again cost more than
        # encoding a small partition's file. A partitioned write chooses on another thread
        # while this one splits the rows (both mostly in Arrow and numpy, without the GIL).
        chosen = (
            _start(dictionary_columns, entries, purpose="encode")
            if self.partition_spec.fields
            else None
        )
        pieces = [piece for whole in self._split(entries) for piece in whole.files(FILE_ROWS)]
        # A partition path that cannot be stored fails here, before any write.
        paths = [self.partition_spec.path(piece.partition) for piece in pieces]
        dictionary = dictionary_columns(entries) if chosen is None else chosen.result()
        partition_folders, parent_folders = self._make_folders(paths)
        local = self.store.local_path(self.table_prefix) is not None
        # Every file, then its folder's entry for it (and the entry of a folder this write made),
        # made durable before the commit can point at them. Each fsync starts as soon as what
        # it flushes exists: a new folder's parent at once, a file as soon as it is written and
        # its folder once every file of this write in it is written. So the disk flushes while
        # the other files are still being encoded, and the folders' entries ride in the same
        # journal commits as the files instead of a round of their own after the last file.
        syncs: list[Future[None]] = [
            _start(fsync_path, folder, purpose="sync") for folder in sorted(parent_folders)
        ]
        unwritten = collections.Counter(paths)
        counting = threading.Lock()

        def write_piece(piece_and_folder: tuple[_Piece, str]) -> FileMarker:
            piece, folder = piece_and_folder
            # A partition's rows are gathered here, on the piece's own thread: Arrow's take
            # runs without the GIL, so the pieces gather (and then encode) in parallel.
            marker, path = self._write_file(piece.rows(), piece.partition, folder, dictionary)
            if path is not None:
                syncs.append(_start(fsync_path, path, purpose="sync"))
                with counting:
                    unwritten[folder] -= 1
                    last = not unwritten[folder]
                if last and len(pieces) == 1:  # this thread has nothing else to do meanwhile
                    fsync_path(partition_folders[folder])
                elif last:  # the folder now holds every entry this write makes in it
                    syncs.append(_start(fsync_path, partition_folders[folder], purpose="sync"))
            return marker

        try:
            if len(pieces) == 1:
                markers = [write_piece((pieces[0], paths[0]))]
            else:
                # pyarrow encodes and compresses without the GIL: large writes use every core.
                # Files bound for an object store spend most of their time waiting on the
                # network, so more of them are in flight at once. The largest files start
                # first, so a large partition is not left to one thread at the end while the
                # others have finished.
                largest_first = sorted(range(len(pieces)), key=lambda i: -pieces[i].num_rows)
                written = _in_parallel(
                    write_piece,
                    [(pieces[i], paths[i]) for i in largest_first],
                    purpose="encode" if local else "upload",
                )
                place = {
                    index: marker for index, marker in zip(largest_first, written, strict=True)
                }
                markers = [place[index] for index in range(len(pieces))]
        finally:
            wait(syncs)  # none still running once this write has returned or failed
        for done in syncs:
            done.result()
        return markers

    def _make_folders(self, paths: list[str]) -> tuple[dict[str, str], set[str]]:
        """Create the local folders of the partition ``paths``. Return each path's folder, and
        the folders above them this write made, whose entries for the new folders must be made
        durable before a commit points at files in them (both empty for an object store)."""
        data_folder = self.store.local_path(self.table_prefix + self.config.data_folder)
        if data_folder is None:
            return {}, set()
        table_folder = (self.store.local_path(self.table_prefix) or "").rstrip("/")
        folders: dict[str, str] = {}
        parents: set[str] = set()
        for path in paths:
            if path in folders:
                continue
            folder = os.path.join(data_folder, *path.split("/")) if path else data_folder
            folders[path] = folder
            if not os.path.isdir(folder):
                os.makedirs(folder, exist_ok=True)
                # A new folder's own entry lives in its parent: up to the table's folder.
                parent = os.path.dirname(folder)
                while len(parent) >= len(table_folder) > 0:
                    parents.add(parent)
                    parent = os.path.dirname(parent)
        # A folder holding files of this write is flushed once they are written, not before.
        return folders, parents - set(folders.values())

    def _split(self, entries: pa.Table) -> Iterator[_Piece]:
        keys = [(c, "ascending") for c in sort_columns(self.config)]
        if not self.partition_spec.fields:
            yield _Piece(_sorted(entries, keys), None, {})
            return
        fields = self.partition_spec.fields
        names = [f"{_PART}{i}" for i in range(len(fields))]
        # Each field's values as their rank among its distinct values (NULL last): integers
        # sort and compare faster than the text they stand for, in the same order.
        ranked = [f.ranked_values(entries) for f in fields]
        with_parts = entries
        for name, (_, codes) in zip(names, ranked, strict=True):
            with_parts = with_parts.append_column(name, codes)
        # Within a partition rows keep their relative order, so only the sort keys the whole
        # table needs are used (none beyond the partition when it is already in key order).
        needed = _needed_sort_keys(entries, keys) if entries.num_rows > 1 else []
        order = _sort_order(with_parts, [*((n, "ascending") for n in names), *needed])
        code_columns = [codes.take(order).to_numpy() for _, codes in ranked]
        # A row starts a new partition where any field's value (NULL included) changes.
        changes = np.zeros(max(len(entries) - 1, 0), dtype=bool)
        for codes in code_columns:
            changes |= codes[1:] != codes[:-1]
        starts = [0, *(np.flatnonzero(changes) + 1).tolist(), len(entries)]
        for begin, end in itertools.pairwise(starts):
            partition = {
                f.name: distinct[int(codes[begin])].as_py()
                for f, (distinct, _), codes in zip(fields, ranked, code_columns, strict=True)
            }
            yield _Piece(entries, order.slice(begin, end - begin), partition)

    def new_file_key(self, partition: Mapping[str, str | None]) -> tuple[str, str]:
        """A fresh data file's path relative to the table, and its store key (its local
        folder created)."""
        folder = self.partition_spec.path(partition)
        data_folder = self.config.data_folder
        relative = f"{data_folder}/{folder + '/' if folder else ''}{uuid.uuid4().hex}.parquet"
        key = self.table_prefix + relative
        local = self.store.local_path(key)
        if local is not None:
            self.store.filesystem.create_dir(local.rsplit("/", 1)[0], recursive=True)
        return relative, key

    def make_durable(self, key: str) -> None:
        """fsync a local file and its folder before the log commit can point at it."""
        local = self.store.local_path(key)
        if local is not None:
            fsync_path(local)
            fsync_path(os.path.dirname(local))

    def _write_file(
        self,
        part: pa.Table,
        partition: dict[str, str | None],
        folder: str,
        dictionary: list[str],
    ) -> tuple[FileMarker, str | None]:
        """Write one file into the partition path ``folder``; return its marker and its local
        path (to be fsynced by the caller)."""
        relative = (
            f"{self.config.data_folder}/{folder + '/' if folder else ''}{uuid.uuid4().hex}.parquet"
        )
        key = self.table_prefix + relative
        local = self.store.local_path(key)
        if local is None and part.nbytes <= ONE_REQUEST_BYTES:
            # An object store takes a small file in one request. Through the store's own client:
            # against a Python S3 server (moto), 16 concurrent uploads of small files took a
            # third longer through pyarrow's filesystem.
            buffer = pa.BufferOutputStream()
            _write_parquet(part, buffer, dictionary)
            encoded = buffer.getvalue()
            self.store.put(key, encoded.to_pybytes())
            size = encoded.size
        else:
            with self.store.filesystem.open_output_stream(self.store.fs_path(key)) as out:
                _write_parquet(part, out, dictionary)
                size = out.tell()
        trx_min, trx_max = _bounds(part.column(TRX_ID))
        key_min, key_max = [], []
        for column in self.config.key_columns:
            low, high = _bounds(part.column(column))
            key_min.append(json_value(low))
            key_max.append(json_value(high))
        signs = _numbers_of(part.column(DML_TYPE))
        marker = FileMarker(
            path=relative,
            size=size,
            created_ms=int(time.time() * 1000),
            rows=part.num_rows,
            dml_sum=(
                int(signs.sum(dtype=np.int64))
                if signs is not None
                else int(pc.sum(part.column(DML_TYPE)).as_py() or 0)
            ),
            trx_min=int(trx_min),
            trx_max=int(trx_max),
            partition=partition,
            key_min=tuple(key_min),
            key_max=tuple(key_max),
            unique_keys=self._keys_sorted() and _strictly_increasing(part, self.config.key_columns),
        )
        return marker, local

    def _keys_sorted(self) -> bool:
        """Whether files are sorted by key first (so equal keys are adjacent)."""
        order = sort_columns(self.config)
        keys = list(self.config.key_columns)
        return order[: len(keys)] == keys


def statistics_columns(schema: pa.Schema) -> list[str]:
    """Columns whose min/max statistics are written: every column but FLOAT and DOUBLE.

    Parquet leaves NaN out of a float column's min/max, and DuckDB prunes row groups by those
    bounds as if no NaN were there, so `isnan(x)` or `x > 1e300` (NaN sorts above every number)
    would skip row groups holding NaN. Without the bounds the filter reads every value.
    """
    return [f.name for f in schema if not pa.types.is_floating(f.type)]


def _write_parquet(part: pa.Table, out: pa.NativeFile, dictionary: list[str]) -> None:
    pq.write_table(
        part,
        out,
        row_group_size=ROW_GROUP_ROWS,
        compression="snappy",
        use_dictionary=dictionary,
        write_statistics=statistics_columns(part.schema),
        write_page_index=True,  # see docs/format.md: DuckDB 2.0.0 misreads plain strings without it
        column_encoding=delta_encoded(part.schema, dictionary),
    )


def delta_encoded(schema: pa.Schema, dictionary: Sequence[str]) -> dict[str, str]:
    """The columns written with DELTA_BINARY_PACKED: every integer, timestamp, date and time
    column not dictionary-encoded (``trx_seq`` and ``_row_id`` always).

    A file is sorted by its key, so its key column steps by small amounts, and arithmetic
    sequences (entry numbers, generated row ids) shrink to almost nothing: delta encoding
    stores those steps in a few bits. Measured on 1M rows of a BIGINT key in four files, the
    files were 12% smaller, written with no more CPU, and a correction's read of every row group
    (which decodes the whole key column to find 1% of its keys) took about a tenth less CPU,
    the key column's decoding a third less.

    Value columns in no order gain too, as long as their values span less than their type: the
    steps then need fewer bits than the values (a BIGINT of 10,000 distinct values, a TIMESTAMP
    over a month). Measured on the same 1M rows, with such a BIGINT and TIMESTAMP delta-encoded
    as well: files 16% smaller, written with 6% more CPU, and DuckDB read them with a fifth
    less CPU (a correction's read of 1% of the keys, a full scan summing them, a filter on
    one); pyarrow read them at the same cost. Values spanning their whole type (hashes) take
    the full width either way, a few bytes per 128 values more than plain encoding."""
    names = set(schema.names)
    chosen = [c for c in _DELTA_ENCODED if c in names]
    chosen += [
        field.name
        for field in schema
        if field.name not in dictionary
        and field.name not in chosen
        and _delta_encodable(field.type)
    ]
    return {c: "DELTA_BINARY_PACKED" for c in chosen}


def _delta_encodable(data_type: pa.DataType) -> bool:
    """Whether a column of this type is stored as Parquet INT32 or INT64 values, which
    DELTA_BINARY_PACKED encodes (DECIMAL is stored as fixed-size bytes)."""
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_timestamp(data_type)
        or pa.types.is_date(data_type)
        or pa.types.is_time(data_type)
    )


class SortedFileSink:
    """Writes already-sorted batches of one partition into files of up to ``file_rows`` rows
    (each a contiguous run of the order, so files hold disjoint ranges), in row groups of
    ``row_group_rows``. Used by merges and rewrites, which sort in the engine.

    Each file is encoded on its own thread while the next file's rows keep arriving, so a large
    result uses every core (pyarrow encodes without the GIL); pass ``expected_rows`` to cut it
    into enough files for that.
    """

    def __init__(
        self,
        writer: DataWriter,
        partition: dict[str, str | None],
        *,
        file_rows: int,
        row_group_rows: int,
        expected_rows: int = 0,
    ) -> None:
        self._writer = writer
        self._partition = partition
        spread = -(-expected_rows // _WRITE_THREADS)  # ceil: one file per thread
        self._file_rows = max(row_group_rows, min(file_rows, spread)) if spread else file_rows
        self._row_group_rows = row_group_rows
        self._target = file_schema(writer.schema, writer.config)
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._files: list[_OpenFile] = []
        self._current: _OpenFile | None = None
        self._queued: list[Future[None]] = []

    @property
    def keys(self) -> list[str]:
        """Store keys of every file opened so far (to delete them if the operation fails)."""
        return [f.key for f in self._files]

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.num_rows == 0:
            return
        self._pending.append(batch)
        self._pending_rows += batch.num_rows
        while self._pending_rows >= self._row_group_rows:
            self._flush(self._row_group_rows)

    def close(self) -> list[FileMarker]:
        """Flush and close; return the markers of every file written. The first error of any
        file's thread is raised here."""
        while self._pending_rows:
            self._flush(min(self._pending_rows, self._row_group_rows))
        if self._current is not None:
            self._current.finish()
            self._current = None
        while self._queued:
            self._queued.pop(0).result()
        return [f.marker() for f in self._files]

    def abort(self) -> None:
        """Stop writing; the caller deletes :attr:`keys`."""
        for f in self._files:
            f.abandon()

    def _flush(self, rows: int) -> None:
        pending = pa.Table.from_batches(self._pending)
        group, rest = pending.slice(0, rows), pending.slice(rows)
        self._pending = rest.to_batches()
        self._pending_rows = rest.num_rows
        group = group.select(self._target.names).cast(self._target)
        while group.num_rows:
            if self._current is None:
                self._current = _OpenFile(self._writer, self._partition, group)
                self._files.append(self._current)
            room = self._file_rows - self._current.rows
            self._queued.append(self._current.write(group.slice(0, room), self._row_group_rows))
            group = group.slice(room)
            if self._current.rows >= self._file_rows:
                self._current.finish()
                self._current = None
        # Bound the memory held by row groups waiting to be encoded.
        while len(self._queued) > _MAX_QUEUED_ROW_GROUPS:
            self._queued.pop(0).result()


_MAX_QUEUED_ROW_GROUPS = 4 * _WRITE_THREADS
_MERGED_DICTIONARY_SAMPLE_ROWS = 64 * 1024


class _OpenFile:
    """One data file being written by :class:`SortedFileSink` on its own thread, with its
    running statistics."""

    def __init__(self, owner: DataWriter, partition: dict[str, str | None], first: pa.Table):
        self.owner = owner
        self.partition = partition
        self.relative, self.key = owner.new_file_key(partition)
        self.schema = first.schema
        # Merged files are large: a bigger sample sees that a column repeats across row groups.
        self.dictionary = dictionary_columns(first, _MERGED_DICTIONARY_SAMPLE_ROWS)
        self.rows = 0  # rows handed to the file (written or queued)
        self._thread = ThreadPoolExecutor(max_workers=1)
        self._done: Future[FileMarker] | None = None
        self._stream: Any = None
        self._parquet: pq.ParquetWriter | None = None
        self._failed = False
        self._dml_sum = 0
        self._trx: list[int] = []
        self._key_bounds: list[list[Any]] = [[] for _ in owner.config.key_columns]
        self._unique_keys = owner._keys_sorted()
        self._last_key: pa.Table | None = None

    def write(self, part: pa.Table, row_group_rows: int) -> Future[None]:
        self.rows += part.num_rows
        return self._thread.submit(self._write, part, row_group_rows)

    def finish(self) -> None:
        self._done = self._thread.submit(self._close)
        self._thread.shutdown(wait=False)

    def marker(self) -> FileMarker:
        if self._done is None:
            raise RuntimeError("file not finished")
        return self._done.result()

    def abandon(self) -> None:
        self._thread.shutdown(wait=True, cancel_futures=True)
        with contextlib.suppress(Exception):  # the file is deleted next; only release it
            if self._parquet is not None and self._parquet.is_open:
                self._parquet.close()
        with contextlib.suppress(Exception):
            if self._stream is not None and not self._stream.closed:
                self._stream.close()

    def _write(self, part: pa.Table, row_group_rows: int) -> None:
        if self._failed:
            raise RuntimeError(f"an earlier write of {self.key} failed")
        try:
            self._write_row_group(part, row_group_rows)
        except BaseException:
            self._failed = True  # later row groups must not land after a gap
            raise

    def _write_row_group(self, part: pa.Table, row_group_rows: int) -> None:
        if self._parquet is None:
            self._stream = self.owner.store.filesystem.open_output_stream(
                self.owner.store.fs_path(self.key)
            )
            self._parquet = pq.ParquetWriter(
                self._stream,
                self.schema,
                compression="snappy",
                use_dictionary=self.dictionary,
                write_statistics=statistics_columns(self.schema),
                write_page_index=True,  # docs/format.md: why data files carry a page index
                column_encoding=delta_encoded(self.schema, self.dictionary),
            )
        self._parquet.write_table(part, row_group_size=row_group_rows)
        self._dml_sum += int(pc.sum(part.column(DML_TYPE)).as_py() or 0)
        bounds = pc.min_max(part.column(TRX_ID))
        self._trx += [bounds["min"].as_py(), bounds["max"].as_py()]
        for i, column in enumerate(self.owner.config.key_columns):
            bounds = pc.min_max(part.column(column))
            self._key_bounds[i] += [bounds["min"].as_py(), bounds["max"].as_py()]
        if self._unique_keys and part.num_rows:
            keys = part.select(list(self.owner.config.key_columns))
            joined = keys if self._last_key is None else pa.concat_tables([self._last_key, keys])
            self._unique_keys = _strictly_increasing(joined, self.owner.config.key_columns)
            self._last_key = keys.slice(keys.num_rows - 1)

    def _close(self) -> FileMarker:
        if self._failed or self._parquet is None:
            raise RuntimeError(f"{self.key} was not written completely")
        self._parquet.close()
        size = self._stream.tell()
        self._stream.close()
        self.owner.make_durable(self.key)
        return FileMarker(
            path=self.relative,
            size=size,
            created_ms=int(time.time() * 1000),
            rows=self.rows,
            dml_sum=self._dml_sum,
            trx_min=min(self._trx),
            trx_max=max(self._trx),
            partition=self.partition,
            key_min=tuple(json_value(_min(b)) for b in self._key_bounds),
            key_max=tuple(json_value(_max(b)) for b in self._key_bounds),
            unique_keys=self._unique_keys,
        )


def _numbers_of(column: pa.ChunkedArray) -> np.ndarray[Any, Any] | None:
    """The values of an integer column of one chunk and no NULL, as numpy sees them without a
    copy; None for any other column."""
    if column.num_chunks != 1 or column.null_count or not pa.types.is_integer(column.type):
        return None
    values: np.ndarray[Any, Any] = column.chunk(0).to_numpy(zero_copy_only=True)
    return values


def _bounds(column: pa.ChunkedArray) -> tuple[Any, Any]:
    """The least and greatest value of ``column`` as Python values (None for no value): an
    integer column by numpy (a file's bounds were a tenth of its small files' writes in Arrow
    calls' fixed costs), any other by Arrow."""
    numbers = _numbers_of(column)
    if numbers is not None and len(numbers):
        return int(numbers.min()), int(numbers.max())
    bounds = pc.min_max(column)
    return bounds["min"].as_py(), bounds["max"].as_py()


def _strictly_increasing(table: pa.Table, key_columns: tuple[str, ...]) -> bool:
    """Whether no two adjacent rows of ``table`` (sorted by key) share their key."""
    if table.num_rows < 2:
        return True
    if len(key_columns) == 1:
        numbers = _numbers_of(table.column(key_columns[0]))
        if numbers is not None:
            return not bool(np.any(numbers[1:] == numbers[:-1]))
    same = None
    for column in key_columns:
        values = table.column(column)
        equal = pc.fill_null(pc.equal(values[1:], values[:-1]), False)
        same = equal if same is None else pc.and_(same, equal)
    return not pc.any(same).as_py()


def _min(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _max(values: list[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _sorted(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Table:
    if table.num_rows < 2:
        return table
    needed = _needed_sort_keys(table, keys)
    return table if not needed else table.take(_sort_order(table, needed))


def _needed_sort_keys(table: pa.Table, keys: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The sort keys a stable sort of ``table`` needs to put it in ``keys`` order (Arrow's
    sort_indices is stable): with one trx_id and trx_seq growing in row order, the leading
    columns alone, and none when a single leading column never decreases already."""
    names = [name for name, _ in keys]
    if names[-2:] == [TRX_ID, TRX_SEQ] and len(names) > 2 and _in_entry_order(table):
        leading = keys[:-2]
        if len(leading) == 1 and _never_decreases(table.column(leading[0][0])):
            return []
        return leading
    return keys


def _sort_order(table: pa.Table, keys: list[tuple[str, str]]) -> pa.Array:
    """Arrow's sort_indices over columns given by any name: sorted under positional names,
    since Arrow reads a name starting with "." as a nested field path."""
    positional = [f"sort{i}" for i in range(len(keys))]
    columns = table.select([name for name, _ in keys]).rename_columns(positional)
    order = [(p, direction) for p, (_, direction) in zip(positional, keys, strict=True)]
    return pc.sort_indices(columns, sort_keys=order)


def _in_entry_order(table: pa.Table) -> bool:
    """Whether the rows hold one ``trx_id`` and ``trx_seq`` never decreases down the rows."""
    trx = pc.min_max(table.column(TRX_ID))
    if trx["min"] != trx["max"]:
        return False
    return _never_decreases(table.column(TRX_SEQ))


def _never_decreases(column: pa.ChunkedArray) -> bool:
    if column.null_count:
        return False
    numbers = _numbers_of(column)
    if numbers is not None:  # a fifth of Arrow's comparison of the shifted column
        return bool(np.all(numbers[1:] >= numbers[:-1]))
    try:
        steps = pc.greater_equal(column.slice(1), column.slice(0, len(column) - 1))
    except pa.ArrowNotImplementedError:
        return False
    return bool(pc.all(steps).as_py())


_DICTIONARY_SAMPLE_ROWS = 8192
_DICTIONARY_MAX_DISTINCT_RATIO = 0.25
# Text pays for its dictionary at half the sample distinct: a dictionary page holds each string
# once, and readers (DuckDB's above all) hand out dictionary entries instead of copying every
# value. Measured on a column of 5,000 distinct strings (half its 8,192-row sample distinct),
# written at the same CPU cost, 16% smaller, and a correction reading every row group of 1M
# rows for 1% of its keys took 28% less CPU. Past 1 MiB of dictionary per column chunk Arrow's
# writer falls back to plain encoding by itself.
_TEXT_DICTIONARY_MAX_DISTINCT_RATIO = 0.5


def dictionary_columns(table: pa.Table, sample_rows: int = _DICTIONARY_SAMPLE_ROWS) -> list[str]:
    """Columns worth dictionary encoding: those with few distinct values in a sample.

    Dictionary-encoding a high-cardinality column (keys, row ids, trx_seq, timestamps) hashes
    every value only to fall back to plain encoding, which made writes 2-3x slower and files
    larger; low-cardinality columns (trx_id, dml_type, categories) shrink a lot with it.
    """
    sample = table.slice(0, sample_rows)
    rows = max(sample.num_rows, 1)
    chosen = []
    for name in table.column_names:
        if name in (TRX_SEQ, ROW_ID):
            continue
        column = sample.column(name)
        text = pa.types.is_string(column.type) or pa.types.is_large_string(column.type)
        limit = _TEXT_DICTIONARY_MAX_DISTINCT_RATIO if text else _DICTIONARY_MAX_DISTINCT_RATIO
        if pa.types.is_floating(column.type):
            prefix = int(limit * rows) * 5 // 4
            if prefix < len(column) and count_distinct(column.slice(0, prefix)) > limit * rows:
                continue  # the whole sample has at least as many distinct values
        if count_distinct(column) / rows <= limit:
            chosen.append(name)
    return chosen


def count_distinct(column: pa.ChunkedArray) -> int:
    """Distinct values of ``column``, NULL counting as one: integers and times by sorting
    their numbers (a fifth of the cost of Arrow's hashing on 8k rows), others by Arrow."""
    numbers = _integer_view(column.type)
    if numbers is None:
        return int(pc.count_distinct(column, mode="all").as_py())
    values = column.drop_null().cast(numbers).to_numpy()
    found = len(values) and 1 + int(np.count_nonzero(np.diff(np.sort(values))))
    return found + (1 if column.null_count else 0)


def _integer_view(data_type: pa.DataType) -> pa.DataType | None:
    """The integer type ``data_type``'s values are stored as, for integers, dates and times."""
    if pa.types.is_integer(data_type):
        return data_type
    if pa.types.is_timestamp(data_type) or pa.types.is_duration(data_type):
        return pa.int64()
    if pa.types.is_date32(data_type) or pa.types.is_time32(data_type):
        return pa.int32()
    if pa.types.is_date64(data_type) or pa.types.is_time64(data_type):
        return pa.int64()
    return None
