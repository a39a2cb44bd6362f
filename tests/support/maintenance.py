"""Helpers shared by the maintenance suites: vacuum right now, turn off the clock-skew margin,
a sample of every built-in merge policy, and the partitioned table of the staged races."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

import ledger
from ledger.maintenance import merge as merging
from ledger.maintenance.vacuum import VacuumResult
from tests.conftest import Location

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


class ShiftedClock:
    """The ``time`` module as seen from ``seconds`` in the future."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def time(self) -> float:
        return time.time() + self.seconds

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


def clock_ahead(monkeypatch: pytest.MonkeyPatch, module: Any, seconds: float) -> None:
    """``module`` (ledger.maintenance.vacuum or .merge) reads its clock ``seconds`` ahead: it
    judges every age as it would after a sleep of that long, with no sleep."""
    monkeypatch.setattr(module, "time", ShiftedClock(seconds))


def set_clock_skew(monkeypatch: pytest.MonkeyPatch, skew_ms: int = 0) -> None:
    """The clock-skew margin of merges and vacuum (both read ledger.maintenance.merge's)."""
    monkeypatch.setattr(merging, "CLOCK_SKEW_MS", skew_ms)


# --- a partitioned table for staged races of maintenance against writers ------------------------
#
# Each race is made deterministic: the operation under test is paused at a precise point (between
# writing its data and committing, or inside vacuum) by `run_once_before`, the rival operation
# runs from another connection, and then the first one carries on. Every test ends by checking
# the table from a fresh connection (`other_handle`, `assert_files_consistent`).

REGION_SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "v": "INTEGER"}

# The staged races whose S3 run adds nothing: the races are staged by hooks in the library, not
# in the store, so one test of each hazard on S3 suffices.
LOCAL_ONLY = pytest.mark.parametrize("location", ["local"], indirect=True)


def region_table(location: Location, **options: Any) -> ledger.Table:
    """A fresh table ``events`` keyed by ``id`` and partitioned by ``region``."""
    return location.connect().create_table(
        "events", REGION_SCHEMA, primary_key="id", partition_by="region", **options
    )


def add_rows(table: ledger.Table, region: str, ids: list[int]) -> None:
    table.insert([{"id": i, "region": region, "v": i} for i in ids])


def other_handle(location: Location) -> ledger.Table:
    """The table ``events`` as another process sees it."""
    return location.connect().table("events")


def sorted_entries(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(table.scan().fetchall(), key=repr)


def data_keys(table: ledger.Table) -> set[str]:
    """Every object under the table's ``_data/``."""
    return {info.key for info in table.store.list(table.prefix + "_data/")}


def assert_files_consistent(location: Location, *, tombstones_allowed: bool = True) -> None:
    """Every alive file of ``events`` exists; every data file is known to the log (alive, or
    tombstoned and waiting for vacuum when allowed)."""
    fresh = other_handle(location)
    state = fresh.snapshot().state
    alive = {fresh.prefix + m.path for m in state.alive_files}
    known = {fresh.prefix + p for p in state.files} if tombstones_allowed else alive
    present = data_keys(fresh)
    assert alive <= present, f"alive files missing from the store: {sorted(alive - present)}"
    assert present <= known, f"data files the log does not know: {sorted(present - known)}"


def run_once_before(
    monkeypatch: pytest.MonkeyPatch, module: Any, name: str, rival: Callable[[], Any]
) -> list[Any]:
    """Patch ``module.name`` so that its first call runs ``rival()`` first; return the list the
    rival's result is appended to."""
    real = getattr(module, name)
    results: list[Any] = []

    def paused(*args: Any, **kwargs: Any) -> Any:
        if not results:
            results.append(rival())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, paused)
    return results
