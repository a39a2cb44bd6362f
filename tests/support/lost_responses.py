"""Faults after the fact: the store did what it was asked, but the caller never heard so.

On object storage a request can succeed while its response is lost (a timeout, a dropped
connection). The caller then sees an error, or, when the client retries a conditional PUT that
already landed, a 412 "the key exists" for its own object. :class:`FailingStore` fails a call
before it reaches the store; these wrappers fail it after.
"""

from __future__ import annotations

import pyarrow.fs as pafs

from ledger.storage import Store
from ledger.storage.local import LocalStore
from tests.support.failing import CrashCounter, FailingStore, _FailingHandler

MUTATING = ("put ", "put_if_absent ", "delete ")


class LateFailingStore(FailingStore):
    """The ``fail_at``-th call takes effect, then raises :class:`InjectedFault`.

    Counts calls exactly as :class:`FailingStore` does, so the same N names the same call. Only
    writes and deletes differ from :class:`FailingStore` (a read that fails late has no effect);
    data files are written through the filesystem and still fail before the write.
    """

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)
        self.counter.tick(f"put {key}")

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = self.inner.put_if_absent(key, data)
        self.counter.tick(f"put_if_absent {key}")
        return created

    def delete(self, key: str) -> None:
        self.inner.delete(key)
        self.counter.tick(f"delete {key}")


class LateCrashingStore(LateFailingStore):
    """The ``fail_at``-th call takes effect, then raises; every later call fails too, writes
    and deletes after taking effect (an outage that began as the answer to that call was on
    its way) until ``counter.fail_at`` is set to None."""

    def __init__(self, inner: Store, fail_at: int | None) -> None:
        super().__init__(inner, fail_at)
        self.counter = CrashCounter(fail_at)
        self._fs = pafs.PyFileSystem(_FailingHandler(inner.filesystem, self.counter))


class LostCommitResponseStore(FailingStore):
    """The first log commit lands, but put-if-absent reports that the key already existed.

    That is what a client sees when its conditional PUT succeeded, the response was lost, and
    the retry (botocore retries PUTs on timeouts) found the object the first attempt created.
    """

    def __init__(self, inner: Store) -> None:
        super().__init__(inner, fail_at=None)
        self.lost: str | None = None

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = super().put_if_absent(key, data)
        if created and self.lost is None and "/_log/" in key and ".checkpoint." not in key:
            self.lost = key
            return False
        return created


class LosesLogResponses(LocalStore):
    """Log commits land, but the store answers 'exists' (a retried request answered 412)."""

    armed = False

    def put_if_absent(self, key: str, data: bytes) -> bool:
        created = super().put_if_absent(key, data)
        lost = self.armed and "/_log/" in key and ".checkpoint." not in key
        return False if lost else created
