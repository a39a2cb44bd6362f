"""The benchmark report: docs/benchmarks.md, its data as docs/benchmarks.json, and a chart.

Every benchmark records its figures into ``bench_results``. A figure with a target is a dict, at
any depth inside a benchmark's entry, holding ``ratio`` (a float), ``target`` (``">= 0.8"`` or
``"<= 2.0"``) and ``comparison`` (the baseline measured in the same run), plus ``value_s`` and
``baseline_s`` (medians) where the figure is a time ratio. Everything else a benchmark records is
kept in the JSON as it is.
"""

from __future__ import annotations

import datetime as dt
import importlib.metadata
import json
import os
import platform
import re
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

_TARGET = re.compile(r"^\s*(>=|<=)\s*([0-9]+(?:\.[0-9]+)?)\s*$")
_VERSIONED = ("duckdb", "pyarrow", "pyspark", "deltalake", "pandas")
REPORT_NAMES = ("benchmarks.md", "benchmarks.json", "benchmarks.png")


@dataclass(frozen=True)
class Figure:
    """One ratio with a target, found in a benchmark's entry."""

    benchmark: str
    name: str  # the keys leading to it inside the benchmark's entry, "" for the entry itself
    ratio: float
    target: str
    comparison: str
    value_s: float | None
    baseline_s: float | None

    @property
    def label(self) -> str:
        return f"{self.benchmark} / {self.name}" if self.name else self.benchmark

    @property
    def met(self) -> bool:
        return target_met(self.ratio, self.target)


def target_met(ratio: float, target: str) -> bool:
    """Whether ``ratio`` meets ``target`` (``">= 0.8"`` or ``"<= 2.0"``)."""
    match = _TARGET.match(target)
    if match is None:
        raise ValueError(f"a target reads '>= number' or '<= number', not {target!r}")
    bound = float(match.group(2))
    return ratio >= bound if match.group(1) == ">=" else ratio <= bound


def _is_figure(value: Mapping[str, Any]) -> bool:
    target = value.get("target")
    return (
        isinstance(value.get("ratio"), int | float)
        and isinstance(target, str)
        and _TARGET.match(target) is not None
    )


def _walk(benchmark: str, path: list[str], value: Any) -> Iterator[Figure]:
    if not isinstance(value, Mapping):
        return
    if _is_figure(value):
        yield Figure(
            benchmark=benchmark,
            name=" / ".join(path),
            ratio=float(value["ratio"]),
            target=str(value["target"]).strip(),
            comparison=str(value.get("comparison", "")),
            value_s=_optional_float(value.get("value_s")),
            baseline_s=_optional_float(value.get("baseline_s")),
        )
    for key, inner in value.items():
        yield from _walk(benchmark, [*path, str(key)], inner)


def _optional_float(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) else None


def figures_of(results: Mapping[str, Any]) -> list[Figure]:
    """Every figure with a target in the results, in recording order."""
    return [figure for name, entry in results.items() for figure in _walk(name, [], entry)]


# --- the machine ---------------------------------------------------------------------------------


def _memory_gib() -> float | None:
    try:
        pages, page_size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(pages * page_size / 2**30, 1)


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, Any]:
    """What the figures were measured on, and with which sizes (the LEDGER_BENCH_* knobs)."""
    return {
        "date_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        **{package: _version(package) for package in _VERSIONED},
        "size_knobs": {
            k: v
            for k, v in sorted(os.environ.items())
            if k.startswith("LEDGER_BENCH") and k != "LEDGER_BENCH_REPORT"
        },
    }


# --- writing -------------------------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value:.4g} s"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _machine_value(value: Any) -> str:
    if isinstance(value, dict):
        value = ", ".join(f"{k}={v}" for k, v in value.items())
    return "-" if value in ("", None) else str(value)


def markdown(
    figures: list[Figure],
    host: Mapping[str, Any],
    chart_name: str | None,
    informational: list[str] | None = None,
) -> str:
    met = sum(figure.met for figure in figures)
    lines = [
        "# Benchmarks",
        "",
        "Written by `make bench` (tests/benchmarks); the data is in "
        "[benchmarks.json](benchmarks.json). Each figure is a ratio against a baseline measured "
        "in the same run, from medians of repeated runs; speed is never asserted by the tests.",
        "",
        f"**{met} of {len(figures)} targets met.**",
        "",
    ]
    if chart_name is not None:
        lines += [f"![ratios against their targets]({chart_name})", ""]
    lines += [
        "| figure | ours | comparison (same run) | baseline | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for figure in figures:
        lines.append(
            f"| {_cell(figure.label)} | {_seconds(figure.value_s)} | {_cell(figure.comparison)} "
            f"| {_seconds(figure.baseline_s)} | {figure.ratio:.3f} | {_cell(figure.target)} "
            f"| {'yes' if figure.met else '**no**'} |"
        )
    if informational:
        lines += [
            "",
            "Recorded for information only (no ratio with a target; see the JSON): "
            + ", ".join(f"`{name}`" for name in informational)
            + ".",
        ]
    lines += ["", "## Machine", "", "| | |", "|---|---|"]
    for key, value in host.items():
        lines.append(f"| {key} | {_cell(_machine_value(value))} |")
    return "\n".join(lines) + "\n"


def chart(figures: list[Figure], path: Path) -> None:
    """A horizontal bar per figure: its ratio, with its target as a tick (log scale)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = max(2.5, 0.45 * len(figures) + 1.2)
    fig, ax = plt.subplots(figsize=(9, height))
    positions = list(range(len(figures)))[::-1]
    colours = ["tab:green" if figure.met else "tab:red" for figure in figures]
    ax.barh(positions, [figure.ratio for figure in figures], color=colours, alpha=0.8)
    for position, figure in zip(positions, figures, strict=True):
        bound = float(_TARGET.match(figure.target).group(2))  # type: ignore[union-attr]
        ax.plot([bound, bound], [position - 0.4, position + 0.4], color="black", linewidth=2)
        ax.annotate(
            f"{figure.ratio:.2f} (target {figure.target})",
            (figure.ratio, position),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(positions, [figure.label for figure in figures], fontsize=8)
    ax.set_xscale("log")
    # Room on the right for the labels, which are drawn in points beyond each bar's end.
    scale = [figure.ratio for figure in figures if figure.ratio > 0] + [
        float(_TARGET.match(figure.target).group(2))  # type: ignore[union-attr]
        for figure in figures
    ]
    ax.set_xlim(min(scale) / 1.5, max(scale) * 6)
    ax.set_xlabel("ratio against the same-run baseline (black tick: target; green: met)")
    ax.set_title("ledger-tables benchmarks")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_report(
    results: Mapping[str, Any], folder: Path, host: Mapping[str, Any] | None = None
) -> list[Path]:
    """Write benchmarks.md, benchmarks.json and (if any figure has a target) benchmarks.png
    into ``folder``; return the paths written."""
    folder.mkdir(parents=True, exist_ok=True)
    host = dict(machine() if host is None else host)
    figures = figures_of(results)
    written = []
    chart_name = None
    if figures:
        chart_name = REPORT_NAMES[2]
        chart(figures, folder / chart_name)
        written.append(folder / chart_name)
    data = {
        "machine": host,
        "figures": [{**asdict(figure), "met": figure.met} for figure in figures],
        "results": results,
    }
    (folder / REPORT_NAMES[1]).write_text(json.dumps(data, indent=1, default=str) + "\n")
    with_figures = {figure.benchmark for figure in figures}
    informational = [name for name in results if name not in with_figures]
    (folder / REPORT_NAMES[0]).write_text(markdown(figures, host, chart_name, informational))
    return [folder / REPORT_NAMES[0], folder / REPORT_NAMES[1], *written]


def write_requested_report(results: Mapping[str, Any]) -> list[Path]:
    """Write the report into the folder ``LEDGER_BENCH_REPORT`` names (``make bench``: docs/),
    if it names one; a quick run without it leaves the committed report alone."""
    folder = os.environ.get("LEDGER_BENCH_REPORT", "").strip()
    return write_report(results, Path(folder)) if folder else []
