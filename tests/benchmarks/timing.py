"""Timing helpers for the benchmarks: repeat counts, medians and a JSON-ready summary.

The machine is shared and noisy (two cores), so every figure is the median of several
repetitions, measured with ``time.perf_counter``; the raw samples are kept for the report.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def env_int(name: str, default: int) -> int:
    """An integer knob from the environment, e.g. ``LEDGER_BENCH_REPEATS=3`` for a quick run."""
    value = os.environ.get(name)
    return default if value is None or not value.strip() else int(value)


def repeats(default: int) -> int:
    """Repetitions of a benchmark: ``LEDGER_BENCH_REPEATS`` if set, else the benchmark's own
    default (slow benchmarks pick fewer than the usual 7)."""
    return env_int("LEDGER_BENCH_REPEATS", default)


REPEATS = repeats(7)


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """Run ``action`` once; return the elapsed seconds and its result."""
    start = time.perf_counter()
    result = action()
    return time.perf_counter() - start, result


def summary(samples: list[float]) -> dict[str, Any]:
    """Median, spread and the samples themselves, rounded for reading."""
    return {
        "median_s": round(statistics.median(samples), 4),
        "min_s": round(min(samples), 4),
        "max_s": round(max(samples), 4),
        "samples_s": [round(s, 4) for s in samples],
    }
