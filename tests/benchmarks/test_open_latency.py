"""Time to open a table with 10,000 commits on local disk: ``ledger.connect(path).table(name)``.

One table is built through ``table.insert`` of one-row batches (the default checkpoint interval,
50, so version 10,000 is a checkpoint). Variants of its log are made with hard links (the store
never rewrites a file in place, so links are safe and cost no copying):

* ``open_10k_commits``: the table as written (checkpoint hint, 200 checkpoints, 10,000 commits).
* ``open_10k_commits_without_hint``: the same log minus ``_last_checkpoint``: the open lists the
  whole log and starts from the newest checkpoint.
* ``open_10k_commits_no_checkpoints``: only the commit files, as a table with a huge
  checkpoint_interval would have (information: the open replays all 10,000 commits).
* ``open_10k_commits_plus_49_tail``: 49 more commits, the longest tail a checkpointed open reads.

Build time is reported too (per-commit cost at the start and end of the build).
"""

from __future__ import annotations

import os
import shutil
import statistics
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import ledger
from ledger.log.table_log import HINT
from tests.benchmarks.timing import REPEATS, env_int, summary, timed

COMMITS = env_int("LEDGER_BENCH_COMMITS", 10_000)
TAIL_COMMITS = 49
NAME = "events"
SCHEMA = {"id": "BIGINT", "kind": "VARCHAR", "amount": "DOUBLE"}
TARGET = "< 0.5 s"
BUDGET_S = 0.5

pytestmark = pytest.mark.timeout(1800)


@dataclass
class LogHeavyTable:
    """A warehouse holding a table with many small commits, and the handle that built it."""

    warehouse_path: str
    table: ledger.Table
    commit_seconds: list[float] = field(default_factory=list)

    def insert_one(self, row_id: int) -> None:
        batch = pa.table(
            {
                "id": pa.array([row_id], pa.int64()),
                "kind": pa.array([f"kind-{row_id % 7}"], pa.string()),
                "amount": pa.array([row_id * 0.5], pa.float64()),
            }
        )
        elapsed, info = timed(lambda: self.table.insert(batch))
        assert info.inserted == 1
        self.commit_seconds.append(elapsed)

    def log_dir(self, name: str = NAME) -> Path:
        return Path(self.warehouse_path) / name / "_log"

    def link_log(self, new_name: str, keep: Callable[[str], bool]) -> None:
        """Make table ``new_name`` from hard links to the log files for which ``keep(name)``."""
        target = self.log_dir(new_name)
        target.mkdir(parents=True)
        for entry in os.scandir(self.log_dir()):
            if entry.is_file() and keep(entry.name):
                os.link(entry.path, target / entry.name)


@pytest.fixture(scope="module")
def log_heavy(
    tmp_path_factory: pytest.TempPathFactory, bench_results: dict[str, Any]
) -> Iterator[LogHeavyTable]:
    root = tmp_path_factory.mktemp("open_latency")
    warehouse_path = str(root / "warehouse")
    table = ledger.connect(warehouse_path).create_table(NAME, SCHEMA, primary_key=["id"])
    heavy = LogHeavyTable(warehouse_path, table)
    for row_id in range(COMMITS):
        heavy.insert_one(row_id)
    assert table.version == COMMITS

    window = min(1_000, COMMITS)
    seconds = heavy.commit_seconds
    bench_results["build_10k_commits"] = {
        "commits": COMMITS,
        "checkpoint_interval": table.config["checkpoint_interval"],
        "total_s": round(sum(seconds), 2),
        f"first_{window}_median_ms_per_commit": round(statistics.median(seconds[:window]) * 1e3, 2),
        f"last_{window}_median_ms_per_commit": round(statistics.median(seconds[-window:]) * 1e3, 2),
        "note": "information only: one-row table.insert per commit",
    }
    heavy.link_log(f"{NAME}_without_hint", lambda name: name != HINT)
    heavy.link_log(f"{NAME}_no_checkpoints", lambda name: "checkpoint" not in name)
    yield heavy
    shutil.rmtree(root, ignore_errors=True)


def measure_open(
    warehouse_path: str, name: str, expected_version: int, note: str | None = None
) -> dict[str, Any]:
    """Median time of ``ledger.connect(path).table(name)``, checking what each open returns."""

    def open_table() -> ledger.Table:
        return ledger.connect(warehouse_path).table(name)

    figures: dict[str, Any] = {"commits": expected_version, "target": TARGET}
    if note:
        figures["note"] = note
    try:
        open_table()  # warm-up: imports and the page cache, not counted
    except ledger.LedgerError as e:
        figures.update(median_s=None, error=f"{type(e).__name__}: {e}")
        return figures
    samples = []
    for _ in range(REPEATS):
        elapsed, table = timed(open_table)
        samples.append(elapsed)
        assert table.version == expected_version
    # What was opened is the whole table: one alive file and one row per insert commit.
    assert table.count() == expected_version
    assert len(table.files()) == expected_version
    figures.update(summary(samples))
    figures["repeats"] = REPEATS
    # The report's figure: no same-run baseline exists for opening, so the budget stands in.
    figures["budget"] = {
        "ratio": round(figures["median_s"] / BUDGET_S, 3),
        "target": "<= 1.0",
        "comparison": f"a fixed budget of {BUDGET_S} s per open (not a measurement)",
        "value_s": figures["median_s"],
        "baseline_s": BUDGET_S,
    }
    return figures


def _report(bench_results: dict[str, Any], key: str, figures: dict[str, Any]) -> None:
    bench_results[key] = figures
    if figures.get("error"):
        pytest.fail(f"{key}: opening the table failed: {figures['error']}")


def test_open_10k_commits(log_heavy: LogHeavyTable, bench_results: dict[str, Any]) -> None:
    figures = measure_open(log_heavy.warehouse_path, NAME, COMMITS)
    _report(bench_results, "open_10k_commits", figures)


def test_open_10k_commits_without_hint(
    log_heavy: LogHeavyTable, bench_results: dict[str, Any]
) -> None:
    figures = measure_open(
        log_heavy.warehouse_path,
        f"{NAME}_without_hint",
        COMMITS,
        note="same log without _last_checkpoint: full listing, newest checkpoint",
    )
    _report(bench_results, "open_10k_commits_without_hint", figures)


def test_open_10k_commits_no_checkpoints(
    log_heavy: LogHeavyTable, bench_results: dict[str, Any]
) -> None:
    figures = measure_open(
        log_heavy.warehouse_path,
        f"{NAME}_no_checkpoints",
        COMMITS,
        note="information: commit files only (as with a huge checkpoint_interval); full replay",
    )
    figures["target"] = "none (information)"
    figures.pop("budget", None)
    _report(bench_results, "open_10k_commits_no_checkpoints", figures)


def test_open_10k_commits_plus_tail(
    log_heavy: LogHeavyTable, bench_results: dict[str, Any]
) -> None:
    """Runs last: it adds commits to the shared table (the other variants are links made before)."""
    for row_id in range(COMMITS, COMMITS + TAIL_COMMITS):
        log_heavy.insert_one(row_id)
    version = COMMITS + TAIL_COMMITS
    log_heavy.link_log(f"{NAME}_tail_without_hint", lambda name: name != HINT)
    tail_without_hint = measure_open(
        log_heavy.warehouse_path,
        f"{NAME}_tail_without_hint",
        version,
        note="without _last_checkpoint: full listing, newest checkpoint + 49 commits",
    )
    bench_results["open_10k_commits_plus_49_tail_without_hint"] = tail_without_hint
    figures = measure_open(
        log_heavy.warehouse_path,
        NAME,
        version,
        note="newest checkpoint + 49 commits after it (the longest tail at interval 50)",
    )
    _report(bench_results, "open_10k_commits_plus_49_tail", figures)
    assert not tail_without_hint.get("error"), tail_without_hint["error"]
