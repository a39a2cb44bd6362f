"""Benchmark plumbing: every test records its figures here; the session prints one JSON document
and, when ``LEDGER_BENCH_REPORT`` names a folder (``make bench``: docs/), writes the report there
(benchmarks.md, benchmarks.json and a chart; see tests/benchmarks/report.py for what a figure is).

Benchmarks never assert on speed (the machine is shared); they assert that what they measured is
correct (row counts, versions), so a fast wrong answer cannot pass for a fast right one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.benchmarks.report import write_requested_report

_RESULTS: dict[str, Any] = {}


@pytest.fixture(scope="session")
def bench_results() -> dict[str, Any]:
    """The figures of the whole run, keyed by benchmark name; printed as JSON at the end."""
    return _RESULTS


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _RESULTS:
        return
    written = write_requested_report(_RESULTS)
    if written:
        terminalreporter.write_line("benchmark report: " + ", ".join(map(str, written)))
    terminalreporter.write_sep("=", "ledger-tables benchmark figures (JSON)")
    # One benchmark per line: short enough to read, still one valid JSON document.
    lines = [f"  {json.dumps(name)}: {json.dumps(figures)}" for name, figures in _RESULTS.items()]
    terminalreporter.write_line("{\n" + ",\n".join(lines) + "\n}")
