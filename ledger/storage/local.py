"""A directory on local disk as a store."""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import uuid
from collections.abc import Iterator

import pyarrow.fs as pafs

from ledger.errors import StorageError
from ledger.storage.base import ObjectInfo, Store

log = logging.getLogger(__name__)

# A write in progress, or one killed part-way: listed apart (vacuum removes old ones).
TEMP_PREFIX = ".tmp-"


class LocalStore(Store):
    """Keys are files below ``root``.

    ``put_if_absent`` writes a temporary file, fsyncs it and hard-links it to the final name:
    ``link`` fails if the name exists, so two writers can never both win, and a reader never sees
    a half-written file.
    """

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uri = "file://" + self.root
        # The folder is made by the first write, so that reading a mistyped path leaves no
        # empty warehouse behind.
        blocking = _file_on_the_way(self.root)
        if blocking is not None:
            raise StorageError(
                f"{blocking} is a file, not a folder, so no warehouse can live at {self.root}: "
                "a warehouse is a folder (which need not exist yet); pass a folder's path"
            )
        self._fs = pafs.LocalFileSystem()

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/"))

    def get(self, key: str) -> bytes:
        with open(self._path(key), "rb") as f:
            return f.read()

    def _write_temp(self, path: str, data: bytes, *, durable: bool = True) -> str:
        directory = os.path.dirname(path)
        os.makedirs(directory, exist_ok=True)
        temp = os.path.join(directory, f"{TEMP_PREFIX}{uuid.uuid4().hex}")
        with open(temp, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        return temp

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        temp = self._write_temp(path, data)
        os.replace(temp, path)

    def put_if_absent(self, key: str, data: bytes) -> bool:
        return self._create(key, data, durable=True)

    def reserve(self, key: str, data: bytes) -> bool:
        """Linked as atomically as :meth:`put_if_absent`, without its two fsyncs: a
        reservation lost in a machine crash belonged to a transaction the crash ended, and every
        id that committed is in the log, above which new ids are reserved (ledger/trx_ids.py)."""
        return self._create(key, data, durable=False)

    def _create(self, key: str, data: bytes, *, durable: bool) -> bool:
        path = self._path(key)
        temp = self._write_temp(path, data, durable=durable)
        try:
            for _ in range(2):
                try:
                    os.link(temp, path)
                    break
                except FileExistsError:
                    if not _move_foreign_directory(path):
                        return False
        finally:
            os.unlink(temp)
        if durable:
            fsync_path(os.path.dirname(path))
        return True

    def list(self, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        yield from self._listing(prefix, start_after, temporaries=False)

    def list_temporaries(self, prefix: str) -> Iterator[ObjectInfo]:
        yield from self._listing(prefix, None, temporaries=True)

    def _listing(
        self, prefix: str, start_after: str | None, *, temporaries: bool
    ) -> builtins.list[ObjectInfo]:
        base_key = prefix[: prefix.rfind("/") + 1]
        found: builtins.list[ObjectInfo] = []
        start = self._path(base_key) if base_key else self.root
        self._walk(start, base_key, prefix, start_after, found, temporaries)
        found.sort(key=lambda info: info.key)
        return found

    def _walk(
        self,
        directory: str,
        dir_key: str,
        prefix: str,
        start_after: str | None,
        found: builtins.list[ObjectInfo],
        temporaries: bool,
    ) -> None:
        try:
            entries = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return
        with entries:
            for entry in entries:
                key = dir_key + entry.name
                if entry.is_dir(follow_symlinks=False):
                    sub = key + "/"
                    if sub.startswith(prefix) or prefix.startswith(sub):
                        self._walk(entry.path, sub, prefix, start_after, found, temporaries)
                    continue
                if entry.name.startswith(TEMP_PREFIX) != temporaries or not key.startswith(prefix):
                    continue
                if start_after is not None and key <= start_after:
                    continue
                try:
                    stat = entry.stat()
                except FileNotFoundError:  # deleted while listing
                    continue
                found.append(ObjectInfo(key, stat.st_size, int(stat.st_mtime * 1000)))

    def list_dirs(self, prefix: str) -> builtins.list[str]:
        path = self._path(prefix) if prefix else self.root
        try:
            entries = os.scandir(path)
        except FileNotFoundError:
            return []
        with entries:
            return sorted(e.name for e in entries if e.is_dir())

    def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(key))

    def size(self, key: str) -> int:
        return os.stat(self._path(key)).st_size

    @property
    def filesystem(self) -> pafs.FileSystem:
        return self._fs

    def fs_path(self, key: str) -> str:
        return self._path(key)

    def local_path(self, key: str) -> str | None:
        return self._path(key)


def _file_on_the_way(path: str) -> str | None:
    """The file standing where ``path`` or one of its parent folders should be, if any."""
    current = path
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None if os.path.isdir(current) else current


def _move_foreign_directory(path: str) -> bool:
    """A directory where an object should be is no object (S3 keys cannot collide with one, and
    no writer makes one): move it aside, so a name like the next log version cannot stop every
    commit, and keep what it holds. Return whether the name is free to try again."""
    if not os.path.isdir(path) or os.path.islink(path):
        return False
    aside = f"{path}.foreign-{uuid.uuid4().hex}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return True  # another writer moved it first
    except OSError:
        return False
    log.warning("moved the directory %s, where an object belongs, aside to %s", path, aside)
    return True


def fsync_path(path: str) -> None:
    """Flush a file's or a directory's contents to disk, by path."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
