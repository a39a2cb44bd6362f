"""Fault injection: a store whose N-th storage call fails.

Every call through the store interface counts, and so do data-file accesses: ``fs_path`` (the
library asks it for every data file it is about to write or read) and every file written through
the pyarrow filesystem. So "fail the N-th call" covers log writes, trx_id reservations, listings
and data-file writes and reads alike.

Reads fail at ``fs_path``, on the caller's thread, not inside the filesystem handler. This
store's filesystem is written in Python, so every call into it takes the GIL: the engine's scans
open its data files on the thread that runs the statement, before the scan starts
(ledger/engines/duckdb/scan.py), since a file opened on one of pyarrow's threads while DuckDB
starts a scan holding the GIL deadlocks both. Real stores are C++ filesystems that never call
back into Python.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow.fs as pafs

from ledger.storage import ObjectInfo, Store


class InjectedFault(OSError):
    """The failure the test asked for."""


class CallCounter:
    def __init__(self, fail_at: int | None) -> None:
        self.calls = 0
        self.fail_at = fail_at
        self.failed = False
        self.log: list[str] = []

    def tick(self, what: str) -> None:
        self.calls += 1
        self.log.append(what)
        if self.fail_at is not None and self.calls == self.fail_at:
            self.failed = True
            raise InjectedFault(f"injected failure at storage call {self.calls} ({what})")


class FailingStore(Store):
    """Wraps a real store; the ``fail_at``-th call raises :class:`InjectedFault`."""

    def __init__(self, inner: Store, fail_at: int | None) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.counter = CallCounter(fail_at)
        self._fs = pafs.PyFileSystem(_FailingHandler(inner.filesystem, self.counter))

    def get(self, key: str) -> bytes:
        self.counter.tick(f"get {key}")
        return self.inner.get(key)

    def put(self, key: str, data: bytes) -> None:
        self.counter.tick(f"put {key}")
        self.inner.put(key, data)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        self.counter.tick(f"put_if_absent {key}")
        return self.inner.put_if_absent(key, data)

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        self.counter.tick(f"list {prefix}")
        return iter(list(self.inner.list(prefix, start_after)))

    def list_dirs(self, prefix: str) -> list[str]:
        self.counter.tick(f"list_dirs {prefix}")
        return self.inner.list_dirs(prefix)

    def delete(self, key: str) -> None:
        self.counter.tick(f"delete {key}")
        self.inner.delete(key)

    def size(self, key: str) -> int:
        self.counter.tick(f"size {key}")
        return self.inner.size(key)

    @property
    def filesystem(self) -> pafs.FileSystem:
        return self._fs

    def fs_path(self, key: str) -> str:
        self.counter.tick(f"fs path {key}")
        return self.inner.fs_path(key)

    def local_path(self, key: str) -> str | None:
        return self.inner.local_path(key)


class _FailingHandler(pafs.FileSystemHandler):  # type: ignore[misc]
    def __init__(self, fs: pafs.FileSystem, counter: CallCounter) -> None:
        self.fs = fs
        self.counter = counter

    def get_type_name(self) -> str:
        return "failing"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: Any) -> bool:
        return self is other

    def get_file_info(self, paths: list[str]) -> Any:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.fs.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self.fs.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self.fs.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self.fs.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError

    def delete_file(self, path: str) -> None:
        self.counter.tick(f"fs delete {path}")
        self.fs.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self.fs.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self.fs.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        return self.fs.open_input_stream(path)  # counted at fs_path, see the module docstring

    def open_input_file(self, path: str) -> Any:
        return self.fs.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        self.counter.tick(f"fs write {path}")
        return self.fs.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        raise NotImplementedError


class CrashCounter(CallCounter):
    """Fails the ``fail_at``-th call and every call after it (the process died there)."""

    def tick(self, what: str) -> None:
        self.calls += 1
        self.log.append(what)
        if self.fail_at is not None and self.calls >= self.fail_at:
            self.failed = True
            raise InjectedFault(f"injected crash at storage call {self.calls} ({what})")


class CrashingStore(FailingStore):
    """A process dying at its ``fail_at``-th storage call: no later call reaches the store."""

    def __init__(self, inner: Store, fail_at: int | None) -> None:
        super().__init__(inner, fail_at)
        self.counter = CrashCounter(fail_at)
        self._fs = pafs.PyFileSystem(_FailingHandler(inner.filesystem, self.counter))


# The two kinds of fault the fault suites inject at each storage call in turn.
FAULTS: dict[str, type[FailingStore]] = {"fail once": FailingStore, "crash": CrashingStore}


def caused_by_fault(error: BaseException) -> bool:
    """Whether ``error`` is (or was raised because of) an injected fault."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, InjectedFault) or "injected" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


class AlwaysFailingCommits(FailingStore):
    """Every log commit fails (a storage error not retried inside the commit) until
    ``healthy`` is set."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner, fail_at=None)
        self.healthy = False

    def put_if_absent(self, key: str, data: bytes) -> bool:
        if not self.healthy and "/_log/" in key:
            raise InjectedFault(f"injected failure: the store refuses {key}")
        return self.inner.put_if_absent(key, data)
