"""Answers kept per statement, so a repeated read of an unchanged table runs no query.

A view's statement over data files named as parameters answers the same as long as the files
are the same, and data files are never rewritten under their name: its answer is a function
of the text, the paths and (checked at every call) each file's size and modification time. So
a read that made the same statement before keeps its answer as Arrow and makes the next
relations over it (docs/views.md 9). The first call of a statement runs lazily, as every view;
the second runs the statement at once and keeps the answer; later calls read the kept answer.

What is kept is bounded in bytes (the answers' Arrow buffers, the least recently used dropped
first) and per process; only reads on the product's own child connections use it (a caller's
connection may change settings the answer depends on), and only answers whose column types
come back from Arrow as DuckDB gave them.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa

from ledger.engines.duckdb.session import is_read_child, lazy_sql

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

# Bytes of kept answers in all (Arrow buffers), and the largest answer kept.
KEPT_BYTES = 64 * 2**20
LARGEST_KEPT_BYTES = 16 * 2**20
STATEMENTS_SEEN = 1024  # statements remembered as run once (their answer not kept yet)
ANSWERS_KEPT = 1024  # answers kept at most, however small


class KeptResults:
    """Answers by statement, at most ``limit`` bytes in all, none larger than ``largest``."""

    def __init__(self, limit: int, largest: int, seen: int) -> None:
        self.limit = limit
        self.largest = largest
        self._answers: OrderedDict[Hashable, tuple[pa.Table, str]] = OrderedDict()
        self._bytes = 0
        # Statements run once: True when their answer may be kept at the next call, False when
        # it cannot be (too large, or its types do not come back from Arrow).
        self._seen: OrderedDict[Hashable, bool] = OrderedDict()
        self._seen_limit = seen
        self._lock = threading.Lock()

    @property
    def kept_bytes(self) -> int:
        return self._bytes

    def get(self, key: Hashable) -> tuple[pa.Table, str] | None:
        with self._lock:
            answer = self._answers.get(key)
            if answer is not None:
                self._answers.move_to_end(key)
            return answer

    def worth_keeping(self, key: Hashable) -> bool:
        """Whether ``key``'s answer should be kept now: the statement ran before and its answer
        was not refused. Remembers this call."""
        with self._lock:
            before = self._seen.get(key)
            if before is None:
                self._seen[key] = True
                while len(self._seen) > self._seen_limit:
                    self._seen.popitem(last=False)
                return False
            self._seen.move_to_end(key)
            return before

    def refuse(self, key: Hashable) -> None:
        with self._lock:
            self._seen[key] = False

    def keep(self, key: Hashable, answer: pa.Table, projection: str) -> None:
        size = answer.nbytes
        if size > self.largest:
            self.refuse(key)
            return
        with self._lock:
            old = self._answers.pop(key, None)
            if old is not None:
                self._bytes -= old[0].nbytes
            self._answers[key] = (answer, projection)
            self._bytes += size
            self._seen.pop(key, None)
            while self._bytes > self.limit or len(self._answers) > ANSWERS_KEPT:
                _, (dropped, _) = self._answers.popitem(last=False)
                self._bytes -= dropped.nbytes

    def clear(self) -> None:
        with self._lock:
            self._answers.clear()
            self._seen.clear()
            self._bytes = 0


_KEPT = KeptResults(KEPT_BYTES, LARGEST_KEPT_BYTES, STATEMENTS_SEEN)


def kept_results() -> KeptResults:
    """The process's kept answers (for tests and benchmarks: ``kept_results().clear()``)."""
    return _KEPT


def answer_relation(
    con: duckdb.DuckDBPyConnection, text: str, params: Mapping[str, Sequence[str]] | None
) -> duckdb.DuckDBPyRelation:
    """The relation of ``text`` over the files ``params`` name, on ``con``: over the kept
    answer when there is one, else :func:`lazy_sql` (kept when the same statement ran
    before). ``text`` must read no relation bound on ``con`` (only files named in ``params``)."""
    key = None if changes_between_runs(text) else _key(con, text, params)
    if key is None:
        return lazy_sql(con, text, dict(params) if params else None)
    found = _KEPT.get(key)
    if found is not None:
        answer, projection = found
        kept = _over(con, answer, projection)
        if kept is not None:
            return kept
    relation = lazy_sql(con, text, dict(params) if params else None)
    if not _KEPT.worth_keeping(key):
        return relation
    try:
        answer = relation.to_arrow_table()
    except duckdb.Error:  # the lazy relation fails again, as it would have, when read
        _KEPT.refuse(key)
        return relation
    projection = _projection(relation)
    kept = _over(con, answer, projection)
    if kept is None or kept.types != relation.types:
        _KEPT.refuse(key)  # a type that does not come back from Arrow
        return relation
    _KEPT.keep(key, answer, projection)
    return kept


def _projection(relation: duckdb.DuckDBPyRelation) -> str:
    """The projection giving a relation over the Arrow answer the statement's own types:
    DuckDB hands some of its types to Arrow as others (``HUGEINT`` as ``DECIMAL(38,0)``, ``UUID``
    as text), exactly, and they are cast back. (DuckDB's lossless Arrow conversion is a setting
    of the whole database, which would change what other reads hand over meanwhile.)"""
    return ", ".join(
        f"CAST({quoted} AS {kind}) AS {quoted}"
        for quoted, kind in (
            ('"' + name.replace('"', '""') + '"', str(kind))
            for name, kind in zip(relation.columns, relation.types, strict=True)
        )
    )


def _over(
    con: duckdb.DuckDBPyConnection, answer: pa.Table, projection: str
) -> duckdb.DuckDBPyRelation | None:
    try:
        return con.from_arrow(answer).project(projection)
    except duckdb.Error:
        return None


def _key(
    con: duckdb.DuckDBPyConnection, text: str, params: Mapping[str, Sequence[str]] | None
) -> Hashable | None:
    """The statement and a digest of, for each file it reads, its path, size and modification
    time (a key holds no list of files, whatever their number); None when the answer is not
    to be kept (a caller's connection, a file gone, files larger in all than an answer kept)."""
    if not is_read_child(con):
        return None
    files = hashlib.blake2b(digest_size=20)
    read = 0
    for name, paths in sorted((params or {}).items()):
        for path in paths:
            try:
                stat = os.stat(path)
            except OSError:  # not a local file, or gone: the statement reports it
                return None
            read += stat.st_size
            files.update(f"{name}\0{path}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    if read > LARGEST_KEPT_BYTES:
        # Its answer (the visible rows) could be too large to keep, and learning that would
        # read it all at once, where the caller may only fetch a part (a filter, a limit).
        return None
    return text, files.digest()


# Functions whose value changes from one run of the same statement to the next, over the same
# files: the clock (a ``where=`` such as ``ts > now() - INTERVAL 1 HOUR``), chance and the
# session. A statement naming one is run at every call, never answered from a kept answer.
# (DuckDB's catalog marks far more functions as not consistent, every date part and even
# arithmetic among them, because their result may depend on the TimeZone setting, which the
# read database fixes to UTC.)
_CHANGING = (
    "now", "today", "current_date", "current_time", "current_timestamp", "current_localtime",
    "current_localtimestamp", "localtime", "localtimestamp", "get_current_time",
    "get_current_timestamp", "transaction_timestamp", "statement_timestamp", "age",
    "random", "uuid", "uuidv4", "uuidv7", "gen_random_uuid", "setseed",
    "nextval", "currval", "setval", "txid_current", "current_transaction_id",
    "current_query", "current_query_id", "current_connection_id", "sleep_ms", "getvariable",
    "current_setting", "getenv",
)  # fmt: skip
_NAMES_A_CHANGING_FUNCTION = re.compile(
    r'(?<![\w$])"?(?:' + "|".join(_CHANGING) + r')"?(?![\w$])', re.IGNORECASE
)


@functools.lru_cache(maxsize=1024)
def changes_between_runs(text: str) -> bool:
    """Whether statement ``text`` may name a function whose value changes between runs (the
    clock, chance, the session): its answer is then never kept. Any word spelt as one of
    them counts, a column so named too: keeping fewer answers is never wrong."""
    return _NAMES_A_CHANGING_FUNCTION.search(text) is not None
