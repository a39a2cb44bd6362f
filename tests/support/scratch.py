"""Scratch folders for property and model tests: in memory (tmpfs) where there is one.

Hypothesis examples each build a fresh local warehouse and make dozens of commits, and every
commit fsyncs. These tests check answers, not durability (the fault suites check what a failed
write leaves behind), so their folders go to /dev/shm when it is writable (as tests/test_views.py
does), and to the usual temporary folder otherwise. The store is the same local store either way.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

MEMORY = "/dev/shm"


def memory_dir() -> str | None:
    """/dev/shm if it is a writable folder, else None (the default temporary folder)."""
    return MEMORY if os.path.isdir(MEMORY) and os.access(MEMORY, os.W_OK) else None


def make_scratch_dir(prefix: str) -> str:
    """A new empty folder; the caller removes it (shutil.rmtree)."""
    return tempfile.mkdtemp(prefix=prefix, dir=memory_dir())


@contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A new empty folder, removed afterwards."""
    directory = make_scratch_dir(prefix)
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)
