"""The store interface: the only way the log touches storage.

Six methods over flat keys (``/``-separated, relative to the store's root) plus the pyarrow
filesystem that data files stream through. ``put_if_absent`` is the one atomic primitive commits
rely on; nothing else in the project needs a lock.
"""

from __future__ import annotations

import builtins
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow.fs as pafs

from ledger.storage.s3_settings import S3Settings


@dataclass(frozen=True)
class ObjectInfo:
    """A key in the store, its size in bytes and when it was last written (epoch ms)."""

    key: str
    size: int
    modified_ms: int = 0


class Store(ABC):
    """A flat key space with put-if-absent.

    Keys never start with ``/``. ``list`` yields keys in lexicographic (byte) order, which is the
    order log versions sort in.
    """

    uri: str
    # The S3 settings ``s3://`` load sources are read with when given apart from the store's own
    # (``connect(..., source_options=...)``); None: the store's own on S3, else the environment.
    source_settings: S3Settings | None = None

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Return the object's bytes; raise ``FileNotFoundError`` if it does not exist."""

    @abstractmethod
    def put(self, key: str, data: bytes) -> None:
        """Write (or replace) an object atomically: readers see the old or the new bytes."""

    @abstractmethod
    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Create the object only if no object has that key. Return False if one exists."""

    def reserve(self, key: str, data: bytes) -> bool:
        """:meth:`put_if_absent` for a claim that only matters while its writer lives (a
        ``trx_id`` reservation): as atomic, but a store may skip making it survive a machine
        crash, which ends its writer too. Return False if an object has that key."""
        return self.put_if_absent(key, data)

    @abstractmethod
    def list(self, prefix: str, start_after: str | None = None) -> Iterator[ObjectInfo]:
        """Yield the objects whose key starts with ``prefix``, sorted, after ``start_after``."""

    @abstractmethod
    def list_dirs(self, prefix: str) -> builtins.list[str]:
        """Return the names of the immediate "directories" under ``prefix`` (which ends in /)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove an object; deleting a missing key is not an error."""

    @abstractmethod
    def size(self, key: str) -> int:
        """Return the object's size in bytes; raise ``FileNotFoundError`` if it does not exist."""

    @property
    @abstractmethod
    def filesystem(self) -> pafs.FileSystem:
        """The pyarrow filesystem data files are streamed through."""

    @abstractmethod
    def fs_path(self, key: str) -> str:
        """The path of ``key`` on :attr:`filesystem`."""

    def list_temporaries(self, prefix: str) -> Iterator[ObjectInfo]:
        """Yield the temporary objects under ``prefix`` that writes in progress (or killed
        part-way) left, which ``list`` hides. Stores whose writes are atomic have none."""
        return iter(())

    def local_path(self, key: str) -> str | None:
        """A path on local disk for engines that read files natively, or None."""
        return None
