"""The benchmark report `make bench` writes, from a synthetic set of recorded figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.report import (
    figures_of,
    machine,
    target_met,
    write_report,
    write_requested_report,
)

RESULTS: dict[str, Any] = {
    "append_1m_rows_x6": {
        "rows": 1_000_000,
        "ratio": 0.912,
        "target": ">= 0.8",
        "comparison": "pyarrow.parquet.write_table",
        "value_s": 1.25,
        "baseline_s": 1.14,
        "samples_s": [1.2, 1.25, 1.3],
    },
    "view_speed_unmerged": {
        "entries": 10_000,
        "totals_by_q": {
            "ratio": 1.5,
            "target": "<= 1.3",
            "comparison": "DuckDB over the clean table | visible rows only",
            "value_s": 0.3,
            "baseline_s": 0.2,
        },
        "visible": {"ratio": 1.9, "target": "<= 2.0", "comparison": "clean table"},
    },
    "correct_1pct": {
        "time": {"ratio": 12.0, "target": ">= 10", "comparison": "Delta MERGE"},
        "bytes": {"ratio": 9.5, "target": ">= 10", "comparison": "Delta MERGE bytes"},
    },
    "information_only": {"ratio": 3.0, "target": "none (reported only)", "note": "no target"},
    "build_input": {"rows": 5, "note": "no figure at all"},
}
HOST = {"date_utc": "2026-11-24 00:00 UTC", "cores": 2, "memory_gib": 24.0, "duckdb": "1.4.0"}


def test_figures_are_found_at_any_depth_and_only_with_a_target() -> None:
    found = {(f.benchmark, f.name): f for f in figures_of(RESULTS)}
    assert set(found) == {
        ("append_1m_rows_x6", ""),
        ("view_speed_unmerged", "totals_by_q"),
        ("view_speed_unmerged", "visible"),
        ("correct_1pct", "time"),
        ("correct_1pct", "bytes"),
    }
    assert [f.met for f in found.values()] == [True, False, True, True, False]
    append = found[("append_1m_rows_x6", "")]
    assert (append.value_s, append.baseline_s, append.label) == (1.25, 1.14, "append_1m_rows_x6")
    assert found[("view_speed_unmerged", "visible")].value_s is None


@pytest.mark.parametrize(
    ("ratio", "target", "met"),
    [
        (0.8, ">= 0.8", True),
        (0.799, ">= 0.8", False),
        (2.0, "<= 2.0", True),
        (2.001, "<=2", False),
        (10, " >= 10 ", True),
    ],
)
def test_target_met_reads_both_directions(ratio: float, target: str, met: bool) -> None:
    assert target_met(ratio, target) is met


@pytest.mark.parametrize("target", ["> 0.8", "0.8", ">= x", "< 0.5 s", ""])
def test_a_target_that_does_not_read_is_refused(target: str) -> None:
    with pytest.raises(ValueError, match="a target reads"):
        target_met(1.0, target)


def test_the_report_lists_every_figure_the_machine_and_a_chart(tmp_path: Path) -> None:
    written = write_report(RESULTS, tmp_path / "docs", HOST)
    assert sorted(p.name for p in written) == [
        "benchmarks.json",
        "benchmarks.md",
        "benchmarks.png",
    ]
    text = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "**3 of 5 targets met.**" in text
    assert "![ratios against their targets](benchmarks.png)" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and " / " in line]
    assert (
        "| view_speed_unmerged / totals_by_q | 0.3 s | DuckDB over the clean table \\| visible "
        "rows only | 0.2 s | 1.500 | <= 1.3 | **no** |"
    ) in rows
    assert "| correct_1pct / time |  | Delta MERGE |  | 12.000 | >= 10 | yes |" in rows
    assert "| append_1m_rows_x6 | 1.25 s | pyarrow.parquet.write_table | 1.14 s | 0.912 |" in text
    assert "| cores | 2 |" in text and "| duckdb | 1.4.0 |" in text
    assert "information_only /" not in text and "| information_only |" not in text
    assert "information only (no ratio with a target; see the JSON): `information_only`, " in text
    assert "`build_input`." in text

    data = json.loads((tmp_path / "docs" / "benchmarks.json").read_text())
    assert data["machine"] == HOST
    assert data["results"] == RESULTS  # every recorded number kept, figures or not
    assert [(f["benchmark"], f["name"], f["met"]) for f in data["figures"]][:2] == [
        ("append_1m_rows_x6", "", True),
        ("view_speed_unmerged", "totals_by_q", False),
    ]
    png = (tmp_path / "docs" / "benchmarks.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 5_000


def test_a_run_without_targets_writes_no_chart(tmp_path: Path) -> None:
    written = write_report({"build_input": {"rows": 5}}, tmp_path, HOST)
    assert sorted(p.name for p in written) == ["benchmarks.json", "benchmarks.md"]
    assert "**0 of 0 targets met.**" in (tmp_path / "benchmarks.md").read_text()
    assert "png" not in (tmp_path / "benchmarks.md").read_text()


def test_the_machine_names_its_cores_memory_versions_and_size_knobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("LEDGER_BENCH_ROWS", "1000")
    host = machine()
    assert host["cores"] and host["cores"] >= 1
    assert host["memory_gib"] and host["memory_gib"] > 0
    assert host["duckdb"] and host["pyarrow"] and host["python"].startswith("3.")
    assert host["size_knobs"]["LEDGER_BENCH_ROWS"] == "1000"


def test_the_report_is_written_only_where_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("LEDGER_BENCH_REPORT", raising=False)
    assert write_requested_report(RESULTS) == []
    monkeypatch.setenv("LEDGER_BENCH_REPORT", str(tmp_path / "report"))
    written = write_requested_report(RESULTS)
    assert {p.name for p in written} == {"benchmarks.md", "benchmarks.json", "benchmarks.png"}
    assert all(p.parent == tmp_path / "report" and p.stat().st_size > 0 for p in written)
