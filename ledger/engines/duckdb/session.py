"""DuckDB connections: in memory, never downloading extensions, computing in UTC.

Reads without a caller's connection run on a :class:`ReadSessions`: one in-memory database per
store (a warehouse and its tables), opened once per process, with a child connection per read.
Opening a database costs tens of milliseconds; a child connection costs microseconds.
"""

from __future__ import annotations

import itertools
import os
import threading
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import duckdb

if TYPE_CHECKING:
    from ledger.storage import Store

DuckDBConnection = duckdb.DuckDBPyConnection
Relation = duckdb.DuckDBPyRelation

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}
_UTC = "SET TimeZone = 'UTC'"
_UTC_FOR_EVERY_CONNECTION = "SET GLOBAL TimeZone = 'UTC'"  # a read database's children inherit it
# Data files are never rewritten under their name, so a read database keeps each Parquet
# footer it decoded (DuckDB still compares the file's modification time before using one).
_FOOTERS_KEPT = "SET GLOBAL parquet_metadata_cache = true"

# Databases opened by a parent process, never closed in a forked child: closing one would tear
# down worker threads and file handles that belong to the parent.
_INHERITED: list[duckdb.DuckDBPyConnection] = []


def connect() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection that never downloads extensions.

    >>> from contextlib import closing
    >>> with closing(connect()) as con:
    ...     con.sql("SELECT 1 AS one").fetchall()
    [(1,)]
    """
    con = duckdb.connect(config=dict(_CONFIG))
    # Compute in UTC whatever the machine's zone: TIMESTAMPTZ values then come back as stored.
    con.execute(_UTC)
    return con


class ReadSessions:
    """The DuckDB database reads of one store run on, kept between calls.

    :meth:`cursor` gives each read its own child connection of one database: DuckDB
    connections are not thread-safe, and the temporary views a read registers live exactly as
    long as its child (and the lazy relation made on it). Each thread opens children from a
    parent of its own. The database is opened again in a forked process, never shared with
    the parent. :meth:`close` releases it (relations made on it can no longer run); a later
    read opens a new one.

    >>> sessions = ReadSessions()
    >>> sessions.cursor().sql("SELECT current_setting('TimeZone')").fetchall()
    [('UTC',)]
    >>> sessions.close()
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._database: duckdb.DuckDBPyConnection | None = None
        self._pid = 0
        self._threads = threading.local()

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A new child connection for one read, in UTC, never loading extensions."""
        # The database's zone is UTC for every connection (set once, globally, when it was
        # opened): a SET on each child would cost more than the child itself.
        child = self._thread_parent().cursor()
        _CHILDREN.add(child)
        return child

    def close(self) -> None:
        """Let go of the database: later reads open a new one. It is not closed here, since
        reads of other threads may still run on it (closing would fail them, or fail on them);
        DuckDB frees it when its last connection and relation are gone."""
        with self._lock:
            self._database = None

    def _thread_parent(self) -> duckdb.DuckDBPyConnection:
        database = self._current_database()
        threads = self._threads
        if getattr(threads, "database", None) is not database:
            with self._lock:
                threads.parent = database.cursor()
            threads.database = database
        parent: duckdb.DuckDBPyConnection = threads.parent
        return parent

    def _current_database(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            if self._database is not None and self._pid != os.getpid():
                _INHERITED.append(self._database)
                self._database = None
            if self._database is None:
                self._database = connect()
                self._database.execute(_UTC_FOR_EVERY_CONNECTION)
                self._database.execute(_FOOTERS_KEPT)
                self._pid = os.getpid()
            return self._database


# The database the engine's own short statements run on (read-modify-write reads, transforms,
# checks, merges): one per process, a child connection per statement.
_WORK = ReadSessions()


def work_connection() -> duckdb.DuckDBPyConnection:
    """A new child connection of the process's work database, for one piece of the engine's
    work: opening a database of its own would cost tens of milliseconds, a child costs
    microseconds. Close it when done; the views and temporary tables it made go with it.

    >>> from contextlib import closing
    >>> with closing(work_connection()) as con:
    ...     con.sql("SELECT current_setting('TimeZone')").fetchall()
    [('UTC',)]
    """
    return _WORK.cursor()


# Keyed by the store object itself (stores compare by identity): a warehouse's tables share
# its store; a store no longer used takes its database with it.
_SESSIONS: weakref.WeakKeyDictionary[Store, ReadSessions] = weakref.WeakKeyDictionary()
_SESSIONS_LOCK = threading.Lock()


def read_sessions(store: Store) -> ReadSessions:
    """The :class:`ReadSessions` of ``store``, shared by every table and snapshot read through
    it (a warehouse opens one store; its tables share it)."""
    with _SESSIONS_LOCK:
        sessions = _SESSIONS.get(store)
        if sessions is None:
            sessions = _SESSIONS[store] = ReadSessions()
        return sessions


def release_read_sessions(store: Store) -> None:
    """Close the DuckDB database reads of ``store`` run on (a later read opens a new one)."""
    with _SESSIONS_LOCK:
        sessions = _SESSIONS.pop(store, None)
    if sessions is not None:
        sessions.close()


def read_connection(
    store: Store, con: duckdb.DuckDBPyConnection | None
) -> duckdb.DuckDBPyConnection:
    """``con`` when the caller passed one, else a child connection of ``store``'s
    :class:`ReadSessions`."""
    return con if con is not None else read_sessions(store).cursor()


def bind_relations(
    con: duckdb.DuckDBPyConnection, relations: dict[str, duckdb.DuckDBPyRelation]
) -> dict[str, str]:
    """Make each relation readable by name in SQL on ``con``; returns the names.

    On a read's own child connection, a temporary view numbered from 0 (it vanishes with the
    child, and repeated names let the SQL text be reused). On a caller's connection, a view in
    the current catalog under a random name, as a catalog of registered tables expects (a
    temporary view would be listed beside the caller's tables, and connections of one database
    share their views, so numbers could collide)."""
    names = {}
    for role, relation in relations.items():
        if con in _CHILDREN:
            name = f"__ledger_{role}_{_view_number(con)}"
            con.register(name, relation)
        else:
            name = f"__ledger_{role}_{uuid.uuid4().hex[:12]}"
            relation.create_view(name, replace=True)
        names[role] = name
    return names


# The child connections ReadSessions made (a caller's connection is never in it).
_CHILDREN: weakref.WeakSet[duckdb.DuckDBPyConnection] = weakref.WeakSet()


def is_read_child(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether ``con`` is a child connection a :class:`ReadSessions` made for one read (not a
    caller's connection)."""
    return con in _CHILDREN


_VIEW_NUMBERS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, Iterator[int]] = (
    weakref.WeakKeyDictionary()
)
_VIEW_NUMBERS_LOCK = threading.Lock()


def _view_number(con: duckdb.DuckDBPyConnection) -> int | str:
    """The next number of a view on ``con``: each connection counts from 0, so a read on a
    fresh child connection names its views alike every time and its SQL text can be reused
    (see :func:`ledger.reads.totals.totals`)."""
    with _VIEW_NUMBERS_LOCK:
        try:
            numbers = _VIEW_NUMBERS.setdefault(con, itertools.count())
        except TypeError:  # a connection that takes no weak reference: never reuse a name
            return uuid.uuid4().hex[:12]
        return next(numbers)


STATEMENTS_KEPT = 512  # parsed statements kept per thread (one per query text)

_PARSED = threading.local()


def lazy_sql(
    con: duckdb.DuckDBPyConnection, text: str, params: dict[str, Any] | None = None
) -> duckdb.DuckDBPyRelation:
    """``con.sql(text, params=params)``, a lazy relation, without parsing ``text`` again when
    this thread made a relation of the same text before: making a relation parses and binds
    its statement, and on a small table the parse of a view's long statement costs about as
    much as the bind. Each thread keeps its own parsed statements (they are not shared
    between threads); the relation still runs ``text`` itself."""
    kept: OrderedDict[str, Any] | None = getattr(_PARSED, "statements", None)
    if kept is None:
        kept = _PARSED.statements = OrderedDict()
    statement = kept.get(text)
    if statement is None:
        [statement] = con.extract_statements(text)
        kept[text] = statement
        while len(kept) > STATEMENTS_KEPT:
            kept.popitem(last=False)
    else:
        kept.move_to_end(text)
    return con.sql(statement, params=params) if params else con.sql(statement)


def function_kinds() -> list[tuple[str, str]]:
    """Every function name DuckDB knows (lower case) with its kind: scalar, aggregate, table,
    table_macro, pragma, ..."""
    with connect() as con:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name), function_type FROM duckdb_functions()"
        ).fetchall()
    return [(str(name), str(kind)) for name, kind in rows]


def function_schemas() -> list[tuple[str, str]]:
    """Every function name DuckDB knows (lower case) with the schema defining it (``main``,
    ``pg_catalog``)."""
    with connect() as con:
        rows = con.execute(
            "SELECT DISTINCT lower(function_name), schema_name FROM duckdb_functions()"
        ).fetchall()
    return [(str(name), str(schema)) for name, schema in rows]
