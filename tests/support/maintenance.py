"""Helpers shared by the maintenance suites: vacuum right now, turn off the clock-skew margin,
and a sample of every built-in merge policy."""

from __future__ import annotations

import time
from typing import Any

import pytest

import ledger
from ledger.maintenance import merge as merging
from ledger.maintenance.vacuum import VacuumResult

# One table definition per built-in policy, for tables of columns k (key), v and n.
POLICIES: dict[str, Any] = {
    "collapsing": "collapsing",
    "replacing": {"name": "replacing"},
    "aggregating": {"name": "aggregating", "measures": {"v": "sum", "n": "count"}},
    "dedup": {"name": "dedup"},
}


def vacuum_now(table: ledger.Table) -> VacuumResult:
    """vacuum(0) once the last commit's millisecond has passed: a tombstone set in the very
    millisecond vacuum starts is not yet older than a zero grace."""
    time.sleep(0.005)
    return table.vacuum(0)


def set_clock_skew(monkeypatch: pytest.MonkeyPatch, skew_ms: int = 0) -> None:
    """The clock-skew margin of merges and vacuum (both read ledger.maintenance.merge's)."""
    monkeypatch.setattr(merging, "CLOCK_SKEW_MS", skew_ms)
