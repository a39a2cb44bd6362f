"""View speed: ``views.totals`` and ``views.visible`` over a collapsing ledger of 10M entries, 10%
of them delete marks, against DuckDB reading the equivalent clean table (the visible rows only,
no system columns, plain Parquet) in the same run.

ratio = ledger_time / clean_time (1.0 means the view costs no more than reading a table that
holds only the answer's rows; lower is better). Targets: totals <= 1.3, visible <= 2, and after
a full merge (``table.merge(min_files=1)``) both <= 1.1.

The ledger is built once, untimed: 8M shuffled keys inserted over several commits (so files
overlap), then 1M updates written with ``table.append_entries`` as a delete mark carrying the old
values plus an insertion of the new ones: 9M insertions + 1M marks, 8M visible rows. The clean
table holds those 8M rows sorted by ``k``, written with pyarrow in the ledger writer's file
size, row groups, compression and dictionary choice. For information, totals are also compared
with a clean table of as many rows as the ledger has entries (10M insertions), since part of the
gap is only that the ledger holds 25% more entries (``ratio_vs_entries_sized``).

Every figure is the median of ``LEDGER_BENCH_REPEATS`` (default 5) repetitions; repetition 0
warms caches and is not counted. Totals take a fraction of a second, so each repetition runs them
``TOTALS_PASSES`` times, every pass a sample. Within a repetition the ledger query and its
baselines run back to back, in alternating order; the baselines run on one DuckDB database
kept open, as view calls reuse their warehouse's database. The merged figures are measured on
a merged copy of the table (the copy and the merge are not timed). Note that the clean table is
cut and encoded like the files an insert writes, while a merge writes one file per writer thread
and samples more rows to choose dictionary columns, so the merged ledger can read faster than
the clean table (a ratio below 1). ``view_speed_breakdown`` times parts of the unmerged visible
query once: information only. ``LEDGER_BENCH_VIEW_ENTRIES`` shrinks the table (a full run
takes about 2 minutes).

Small tables (``view_speed_small_100k``, ``view_speed_small_5k``: 100k and 5k entries built the
same way) measure what a dashboard sees: the fixed cost of a call. There every view call reuses
the warehouse's DuckDB database and the baseline runs on one DuckDB connection kept open, as a
DuckDB user's program would; each repetition runs ``SMALL_PASSES`` calls of each. For
information they also time a view call that opens its own connection (``ledger_new_connection``)
and a per-call breakdown (``view_speed_small_breakdown``). A call on an unchanged table reads the
answer kept by an earlier call (docs/views.md section 9), so beside the repeated calls they
report each call with nothing kept (``ledger_first_call``: the statement runs) and, under
``after_commit``, the first three calls after each of ``SMALL_PASSES`` commits of one updated
row.
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import ledger
import views
from ledger.engines.duckdb import kept_results as kept_results_module
from ledger.engines.duckdb.kept_results import KEPT_BYTES, LARGEST_KEPT_BYTES, KeptResults
from ledger.engines.duckdb.session import connect
from ledger.writer import FILE_ROWS, ROW_GROUP_ROWS, dictionary_columns
from tests.benchmarks.builders import SCHEMA, column_values, keyed_rows, slices, with_dml
from tests.benchmarks.timing import env_int, repeats, summary, timed

ENTRIES = env_int("LEDGER_BENCH_VIEW_ENTRIES", 10_000_000)
UPDATES = ENTRIES // 10  # each one a delete mark and an insertion
KEYS = ENTRIES - 2 * UPDATES  # the visible rows
INSERT_COMMITS = 4
UPDATE_COMMITS = 2
REPEATS = repeats(5)
NAME = "ledger"
TARGETS = {"totals": 1.3, "visible": 2.0, "merged": 1.1}
TOTALS_PASSES = 3

pytestmark = pytest.mark.timeout(3600)


@dataclass(frozen=True)
class ViewInput:
    """A built ledger table (never changed), its clean equivalents and the expected answers."""

    root: Path
    warehouse: Path
    clean_files: list[str]  # the 8M visible rows
    entries_sized_files: list[str]  # 10M rows: every entry's values, as insertions
    expected_by_q: pa.Table  # q, count, sum_a, sum_b, avg_b of the visible rows, by q
    sum_a: int


def _by_key(rows: pa.Table) -> pa.Table:
    return rows.take(np.argsort(rows.column("k").to_numpy(), kind="stable"))


def write_clean(rows: pa.Table, folder: Path) -> list[str]:
    """Plain Parquet files of ``rows`` (sorted by k), cut and encoded as the ledger's writer
    cuts and encodes its files."""
    folder.mkdir(parents=True)
    files = []
    for number, start in enumerate(range(0, rows.num_rows, FILE_ROWS)):
        part = rows.slice(start, FILE_ROWS)
        path = folder / f"part-{number:05d}.parquet"
        pq.write_table(
            part,
            path,
            row_group_size=ROW_GROUP_ROWS,
            compression="snappy",
            use_dictionary=dictionary_columns(part),
        )
        files.append(str(path))
    return files


@pytest.fixture(scope="module")
def view_input(
    tmp_path_factory: pytest.TempPathFactory, bench_results: dict[str, Any]
) -> Iterator[ViewInput]:
    root = tmp_path_factory.mktemp("view_speed")
    warehouse = root / "pristine"
    started = time.perf_counter()
    table = ledger.connect(str(warehouse)).create_table(
        NAME, SCHEMA, primary_key=["k"], policy="collapsing"
    )
    rows = keyed_rows(KEYS, seed=20240401)
    for offset, length in slices(KEYS, INSERT_COMMITS):
        assert table.append_entries(with_dml(rows.slice(offset, length), 1)).inserted == length
    # An update: a mark carrying the key's old values, then an insertion of its new ones.
    rng = np.random.default_rng(11)
    updated = rng.choice(KEYS, UPDATES, replace=False)
    old = rows.take(pa.array(updated))
    new = pa.table({"k": old.column("k"), **column_values(UPDATES, rng)})
    for offset, length in slices(UPDATES, UPDATE_COMMITS):
        entries = pa.concat_tables(
            [with_dml(old.slice(offset, length), -1), with_dml(new.slice(offset, length), 1)]
        )
        info = table.append_entries(entries)
        assert (info.inserted, info.deleted) == (length, length)
    build_s = time.perf_counter() - started
    markers = table.snapshot().markers()
    assert sum(m.rows for m in markers) == ENTRIES
    assert table.count() == KEYS

    started = time.perf_counter()
    kept = np.ones(KEYS, dtype=bool)
    kept[updated] = False
    visible_rows = _by_key(pa.concat_tables([rows.filter(pa.array(kept)), new]))
    clean_files = write_clean(visible_rows, root / "clean")
    entries_sized_files = write_clean(
        _by_key(pa.concat_tables([rows, old, new])), root / "clean_entries_sized"
    )
    clean_build_s = time.perf_counter() - started
    expected = (
        visible_rows.group_by("q")
        .aggregate([([], "count_all"), ("a", "sum"), ("b", "sum"), ("b", "mean")])
        .rename_columns(
            {"count_all": "count", "a_sum": "sum_a", "b_sum": "sum_b", "b_mean": "avg_b"}
        )
        .select(["q", "count", "sum_a", "sum_b", "avg_b"])
    )
    sum_a = int(pc.sum(visible_rows.column("a")).as_py())
    bench_results["view_input"] = {
        "entries": ENTRIES,
        "insertions": KEYS + UPDATES,
        "delete_marks": UPDATES,
        "visible_rows": KEYS,
        "commits": table.version,
        "files": len(markers),
        "bytes": sum(m.size for m in markers),
        "clean_files": len(clean_files),
        "clean_bytes": sum(Path(f).stat().st_size for f in clean_files),
        "entries_sized_files": len(entries_sized_files),
        "build_s": round(build_s, 2),
        "clean_build_s": round(clean_build_s, 2),
        "note": "information only: the tables every view and baseline reads",
    }
    del rows, old, new, visible_rows
    yield ViewInput(root, warehouse, clean_files, entries_sized_files, expected, sum_a)
    shutil.rmtree(root, ignore_errors=True)


# --- the queries ---------------------------------------------------------------------------------


def _literal(text: str) -> str:
    return str(exp.Literal.string(text).sql(dialect="duckdb"))


def clean_totals_sql(files: list[str], by_q: bool) -> str:
    source = "read_parquet([" + ", ".join(_literal(f) for f in files) + "])"
    measures = 'count(*) AS "count", sum(a) AS sum_a, sum(b) AS sum_b, avg(b) AS avg_b'
    if by_q:
        return f"SELECT q, {measures} FROM {source} GROUP BY q"
    return f"SELECT {measures} FROM {source}"


def clean_visible_sql(files: list[str]) -> str:
    return "SELECT * FROM read_parquet([" + ", ".join(_literal(f) for f in files) + "])"


_BASELINE_DATABASE: list[Any] = []


def run_clean(sql: str) -> pa.Table:
    """A baseline query on a child connection of one database kept open, as view calls reuse
    their warehouse's database."""
    if not _BASELINE_DATABASE:
        _BASELINE_DATABASE.append(connect())
    with closing(_BASELINE_DATABASE[0].cursor()) as con:
        return con.sql(sql).to_arrow_table()


def ledger_totals(table: ledger.Table, by_q: bool) -> pa.Table:
    by = ["q"] if by_q else None
    return views.totals(table, by=by, sum=["a", "b"], avg=["b"]).to_arrow_table()


def ledger_visible(table: ledger.Table) -> pa.Table:
    return views.visible(table).to_arrow_table()


def check_totals(result: pa.Table, source: ViewInput, by_q: bool) -> None:
    if not by_q:
        [row] = result.to_pylist()
        assert row["count"] == KEYS
        assert int(row["sum_a"]) == source.sum_a
        assert math.isclose(row["sum_b"], pc.sum(source.expected_by_q["sum_b"]).as_py())
        return
    got = sorted(result.to_pylist(), key=lambda r: r["q"])
    want = sorted(source.expected_by_q.to_pylist(), key=lambda r: r["q"])
    assert sum(r["count"] for r in got) == KEYS
    assert sum(int(r["sum_a"]) for r in got) == source.sum_a
    assert [(r["q"], r["count"], int(r["sum_a"])) for r in got] == [
        (r["q"], r["count"], r["sum_a"]) for r in want
    ]
    for g, w in zip(got, want, strict=True):
        assert math.isclose(g["sum_b"], w["sum_b"], rel_tol=1e-9)
        assert math.isclose(g["avg_b"], w["avg_b"], rel_tol=1e-9)


def check_visible(table: ledger.Table, source: ViewInput) -> None:
    [(count, keys, distinct, sum_a)] = (
        views.visible(table).aggregate("count(*), sum(k), count(DISTINCT k), sum(a)").fetchall()
    )
    assert (count, distinct) == (KEYS, KEYS)
    assert keys == KEYS * (KEYS - 1) // 2
    assert sum_a == source.sum_a


# --- measuring -----------------------------------------------------------------------------------


def measure(
    cases: dict[str, list[tuple[str, Callable[[], pa.Table], int]]],
) -> dict[str, dict[str, list[float]]]:
    """Per case, the samples of each of its runners (name, action, expected rows), run back to
    back in alternating order; repetition 0 is not kept. Totals take a fraction of a second, so
    each repetition runs them ``TOTALS_PASSES`` times (every pass is a sample)."""
    samples: dict[str, dict[str, list[float]]] = {
        case: {name: [] for name, _, _ in runners} for case, runners in cases.items()
    }
    for repetition in range(REPEATS + 1):
        for case, runners in cases.items():
            passes = TOTALS_PASSES if case.startswith("totals") else 1
            for number in range(passes):
                ordered = runners if (repetition + number) % 2 == 0 else runners[::-1]
                for name, action, rows in ordered:
                    elapsed, result = timed(action)
                    assert result.num_rows == rows
                    del result
                    if repetition:
                        samples[case][name].append(elapsed)
    return samples


def figures(
    case: dict[str, list[float]], target: float, entries_sized: bool = False
) -> dict[str, Any]:
    ours, clean = summary(case["ledger"]), summary(case["clean"])
    ratio = round(ours["median_s"] / clean["median_s"], 3)
    paired = [o / c for o, c in zip(case["ledger"], case["clean"], strict=True)]
    out: dict[str, Any] = {
        "ledger_s": ours["median_s"],
        "clean_s": clean["median_s"],
        "ratio": ratio,
        "target": f"<= {target}",
        "comparison": "the same query over a clean table of the visible rows",
        "value_s": ours["median_s"],
        "baseline_s": clean["median_s"],
        "meets_target": ratio <= target,
        "ratio_paired_median": round(statistics.median(paired), 3),
    }
    if entries_sized:
        sized = summary(case["clean_entries_sized"])
        out["clean_entries_sized_s"] = sized["median_s"]
        out["ratio_vs_entries_sized"] = round(ours["median_s"] / sized["median_s"], 3)
        out["clean_entries_sized_samples_s"] = sized["samples_s"]
    out["ledger_samples_s"] = ours["samples_s"]
    out["clean_samples_s"] = clean["samples_s"]
    return out


def totals_cases(
    table: ledger.Table, source: ViewInput, entries_sized: bool
) -> dict[str, list[tuple[str, Callable[[], pa.Table], int]]]:
    groups = source.expected_by_q.num_rows
    cases = {}
    for case, by_q, rows in (("totals_by_q", True, groups), ("totals_grand", False, 1)):
        clean_sql = clean_totals_sql(source.clean_files, by_q)
        runners = [
            ("ledger", lambda by_q=by_q: ledger_totals(table, by_q), rows),
            ("clean", lambda sql=clean_sql: run_clean(sql), rows),
        ]
        if entries_sized:
            sql = clean_totals_sql(source.entries_sized_files, by_q)
            runners.append(("clean_entries_sized", lambda sql=sql: run_clean(sql), rows))
        cases[case] = runners
    return cases


def visible_case(
    table: ledger.Table, source: ViewInput
) -> dict[str, list[tuple[str, Callable[[], pa.Table], int]]]:
    sql = clean_visible_sql(source.clean_files)
    return {
        "visible": [
            ("ledger", lambda: ledger_visible(table), KEYS),
            ("clean", lambda: run_clean(sql), KEYS),
        ]
    }


def test_views_10m_entries_unmerged(view_input: ViewInput, bench_results: dict[str, Any]) -> None:
    table = ledger.connect(str(view_input.warehouse)).table(NAME)
    for by_q in (True, False):
        check_totals(ledger_totals(table, by_q), view_input, by_q)
        check_totals(run_clean(clean_totals_sql(view_input.clean_files, by_q)), view_input, by_q)
    check_visible(table, view_input)

    samples = measure(
        {**totals_cases(table, view_input, entries_sized=True), **visible_case(table, view_input)}
    )
    bench_results["view_speed_unmerged"] = {
        "entries": ENTRIES,
        "delete_marks": UPDATES,
        "visible_rows": KEYS,
        "files": len(table.files()),
        "repeats": REPEATS,
        "totals_samples_per_repeat": TOTALS_PASSES,
        "totals_by_q": figures(samples["totals_by_q"], TARGETS["totals"], entries_sized=True),
        "totals_grand": figures(samples["totals_grand"], TARGETS["totals"], entries_sized=True),
        "visible": figures(samples["visible"], TARGETS["visible"]),
    }
    bench_results["view_speed_breakdown"] = visible_breakdown(table)


def visible_breakdown(table: ledger.Table) -> dict[str, Any]:
    """Single runs of parts of the unmerged visible query (information only)."""
    with closing(connect()) as con:
        entries = table.scan(con=con)
        entries.create_view("entries")
        crowded_s, [(crowded,)] = timed(
            lambda: con.sql(
                "SELECT count(*) FROM (SELECT k FROM entries GROUP BY k HAVING count(*) > 1)"
            ).fetchall()
        )
        scan_s, scanned = timed(
            lambda: con.sql("SELECT k, a, q, b, s, ts FROM entries").to_arrow_table().num_rows
        )
    assert crowded == UPDATES and scanned == ENTRIES
    return {
        "note": "one run each, information only",
        "crowded_keys_aggregate_s": round(crowded_s, 3),
        "entries_scan_to_arrow_s": round(scan_s, 3),
        "explain": {
            "crowded_keys_aggregate_s": (
                "GROUP BY k HAVING count(*) > 1 over every entry: the keys with more than one "
                "entry, which the visible view computes before anything else"
            ),
            "entries_scan_to_arrow_s": "every entry's user columns read into Arrow, nothing else",
        },
    }


def test_views_10m_entries_after_full_merge(
    view_input: ViewInput, bench_results: dict[str, Any]
) -> None:
    work = view_input.root / "merged"
    shutil.copytree(view_input.warehouse, work)
    try:
        table = ledger.connect(str(work)).table(NAME)
        merge_s, result = timed(lambda: table.merge(min_files=1))
        assert not result.conflicts and result.entries_out == KEYS
        assert table.count() == KEYS
        for by_q in (True, False):
            check_totals(ledger_totals(table, by_q), view_input, by_q)
        check_visible(table, view_input)
        samples = measure(
            {
                **totals_cases(table, view_input, entries_sized=False),
                **visible_case(table, view_input),
            }
        )
        bench_results["view_speed_merged"] = {
            "entries": result.entries_out,
            "files": len(table.files()),
            "merge_s": round(merge_s, 2),
            "repeats": REPEATS,
            "totals_samples_per_repeat": TOTALS_PASSES,
            "totals_by_q": figures(samples["totals_by_q"], TARGETS["merged"]),
            "totals_grand": figures(samples["totals_grand"], TARGETS["merged"]),
            "visible": figures(samples["visible"], TARGETS["merged"]),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


# --- small tables: the fixed cost of a call ------------------------------------------------------

SMALL_SIZES = {"view_speed_small_100k": 100_000, "view_speed_small_5k": 5_000}
SMALL_PASSES = 20


def build_small(root: Path, entries: int) -> tuple[ledger.Table, list[str]]:
    """A ledger of ``entries`` entries built as the 10M one (10% of them marks, 4 insert commits
    and an update commit) and the clean files of its visible rows."""
    updates = entries // 10
    keys = entries - 2 * updates
    table = ledger.connect(str(root / "warehouse")).create_table(
        NAME, SCHEMA, primary_key=["k"], policy="collapsing"
    )
    rows = keyed_rows(keys, seed=entries)
    for offset, length in slices(keys, INSERT_COMMITS):
        table.append_entries(with_dml(rows.slice(offset, length), 1))
    rng = np.random.default_rng(entries)
    updated = rng.choice(keys, updates, replace=False)
    old = rows.take(pa.array(updated))
    new = pa.table({"k": old.column("k"), **column_values(updates, rng)})
    table.append_entries(pa.concat_tables([with_dml(old, -1), with_dml(new, 1)]))
    kept = np.ones(keys, dtype=bool)
    kept[updated] = False
    visible_rows = _by_key(pa.concat_tables([rows.filter(pa.array(kept)), new]))
    assert table.count() == keys
    return table, write_clean(visible_rows, root / "clean")


def small_cases(
    table: ledger.Table, clean_files: list[str], con: Any
) -> dict[str, list[tuple[str, Callable[[], pa.Table], int]]]:
    def clean(sql: str) -> Callable[[], pa.Table]:
        return lambda: con.sql(sql).to_arrow_table()

    def fresh_totals(by_q: bool) -> pa.Table:
        with closing(connect()) as own:
            by = ["q"] if by_q else None
            return views.totals(table, by=by, sum=["a", "b"], avg=["b"], con=own).to_arrow_table()

    def first_call(action: Callable[[], pa.Table]) -> Callable[[], pa.Table]:
        def run() -> pa.Table:
            kept = kept_results_module._KEPT  # the repeated calls' answers stay kept
            kept_results_module._KEPT = KeptResults(KEPT_BYTES, LARGEST_KEPT_BYTES, 1)
            try:
                return action()
            finally:
                kept_results_module._KEPT = kept

        return run

    rows = table.count()
    groups = clean(clean_totals_sql(clean_files, True))().num_rows
    cases: dict[str, list[tuple[str, Callable[[], pa.Table], int]]] = {}
    for case, by_q, expected in (("totals_by_q", True, groups), ("totals_grand", False, 1)):
        cases[case] = [
            ("ledger", lambda by_q=by_q: ledger_totals(table, by_q), expected),
            ("clean", clean(clean_totals_sql(clean_files, by_q)), expected),
            ("ledger_new_connection", lambda by_q=by_q: fresh_totals(by_q), expected),
            (
                "ledger_first_call",
                first_call(lambda by_q=by_q: ledger_totals(table, by_q)),
                expected,
            ),
        ]
    cases["visible"] = [
        ("ledger", lambda: ledger_visible(table), rows),
        ("clean", clean(clean_visible_sql(clean_files)), rows),
        ("ledger_first_call", first_call(lambda: ledger_visible(table)), rows),
    ]
    return cases


def measure_small(
    cases: dict[str, list[tuple[str, Callable[[], pa.Table], int]]],
) -> dict[str, dict[str, list[float]]]:
    """As :func:`measure`, with ``SMALL_PASSES`` samples per repetition (calls take
    milliseconds); repetition 0 warms up and is not kept."""
    samples: dict[str, dict[str, list[float]]] = {
        case: {name: [] for name, _, _ in runners} for case, runners in cases.items()
    }
    for repetition in range(REPEATS + 1):
        for case, runners in cases.items():
            for number in range(SMALL_PASSES):
                ordered = runners if (repetition + number) % 2 == 0 else runners[::-1]
                for name, action, rows in ordered:
                    elapsed, result = timed(action)
                    assert result.num_rows == rows
                    if repetition:
                        samples[case][name].append(elapsed)
    return samples


def small_figures(case: dict[str, list[float]], target: float) -> dict[str, Any]:
    out = figures(case, target)
    out["comparison"] = "the same query over a clean table, on a DuckDB connection kept open"
    if "ledger_first_call" in case:  # nothing kept: the call runs its statement
        first = summary(case["ledger_first_call"])["median_s"]
        out["ledger_first_call_s"] = first
        out["ratio_first_call"] = round(first / out["clean_s"], 3)
    if "ledger_new_connection" in case:
        fresh = summary(case["ledger_new_connection"])["median_s"]
        out["ledger_new_connection_s"] = fresh
        out["ratio_new_connection"] = round(fresh / out["clean_s"], 3)
    for key in ("ledger_samples_s", "clean_samples_s"):
        out.pop(key)  # hundreds of samples: the medians say enough
    return out


@pytest.mark.parametrize("name", list(SMALL_SIZES))
def test_views_small_tables(name: str, tmp_path: Path, bench_results: dict[str, Any]) -> None:
    table, clean_files = build_small(tmp_path, SMALL_SIZES[name])
    with closing(connect()) as con:
        for by_q in (True, False):
            ours = ledger_totals(table, by_q)
            theirs = con.sql(clean_totals_sql(clean_files, by_q)).to_arrow_table()
            if by_q:
                ours, theirs = ours.sort_by("q"), theirs.sort_by("q")
            assert ours.column("count").to_pylist() == theirs.column("count").to_pylist()
            assert ours.column("sum_a").to_pylist() == theirs.column("sum_a").to_pylist()
        samples = measure_small(small_cases(table, clean_files, con))
        after_commit = calls_after_commits(table, con, clean_files)
    bench_results[name] = {
        "after_commit": after_commit,
        "entries": SMALL_SIZES[name],
        "visible_rows": table.count(),
        "repeats": REPEATS,
        "samples_per_repeat": SMALL_PASSES,
        "totals_by_q": small_figures(samples["totals_by_q"], TARGETS["totals"]),
        "totals_grand": small_figures(samples["totals_grand"], TARGETS["totals"]),
        "visible": small_figures(samples["visible"], TARGETS["visible"]),
    }
    if name == "view_speed_small_100k":
        bench_results["view_speed_small_breakdown"] = call_breakdown(table)
    table.close()


def calls_after_commits(table: ledger.Table, con: Any, clean_files: list[str]) -> dict[str, Any]:
    """Medians of the first, second and third call of each view after a commit (an update of
    one row, not timed), over ``SMALL_PASSES`` commits: what a dashboard sees on a table being
    written. The clean queries run between the calls, for the ratios."""
    keys = table.count()
    views_of: dict[str, tuple[Callable[[], pa.Table], str]] = {
        "totals_by_q": (lambda: ledger_totals(table, True), clean_totals_sql(clean_files, True)),
        "totals_grand": (lambda: ledger_totals(table, False), clean_totals_sql(clean_files, False)),
        "visible": (lambda: ledger_visible(table), clean_visible_sql(clean_files)),
    }
    calls: dict[str, list[list[float]]] = {case: [[], [], [], []] for case in views_of}
    for number in range(SMALL_PASSES):
        table.update([{"k": (number * 7919) % keys, "a": number}])
        for case, (action, clean_sql) in views_of.items():
            for call in range(3):
                calls[case][call].append(timed(action)[0])
            calls[case][3].append(timed(lambda sql=clean_sql: con.sql(sql).to_arrow_table())[0])
    out: dict[str, Any] = {"commits": SMALL_PASSES}
    for case, (first, second, third, clean) in calls.items():
        clean_s = statistics.median(clean)
        out[case] = {
            f"{which}_call_s": round(statistics.median(samples), 5)
            for which, samples in (("first", first), ("second", second), ("third", third))
        }
        out[case]["clean_s"] = round(clean_s, 5)
        for which, samples in (("first", first), ("second", second), ("third", third)):
            out[case][f"ratio_{which}_call"] = round(statistics.median(samples) / clean_s, 3)
        # The first call after a commit is a figure of its own, with the view's target.
        out[case].update(
            ratio=out[case]["ratio_first_call"],
            target=f"<= {TARGETS['visible' if case == 'visible' else 'totals']}",
            comparison="the first call after a commit, against the clean query",
            value_s=out[case]["first_call_s"],
            baseline_s=out[case]["clean_s"],
        )
    return out


def call_breakdown(table: ledger.Table) -> dict[str, Any]:
    """Medians of the parts of one ``views.totals(by q, sum a and b, avg b)`` call on the
    100k-entry table (information only)."""
    from ledger.engines.duckdb.session import read_sessions
    from ledger.reads.totals import totals_text
    from ledger.sql.spec import TableSpec
    from ledger.sql.totals import check_totals_request
    from ledger.sql.trees import Sources

    spec = TableSpec.of(table.snapshot().state)
    request = check_totals_request(spec, ["q"], ["a", "b"], True, ["b"], None)
    sources = Sources(entries="__ledger_entries_0", insertions="__ledger_insertions_1")

    def relation() -> Any:
        return views.totals(table, by=["q"], sum=["a", "b"], avg=["b"])

    parts: dict[str, Callable[[], Any]] = {
        "new_connection_s": lambda: connect().close(),
        "kept_database_child_connection_s": lambda: read_sessions(table.store).cursor().close(),
        "log_check_s": table.snapshot,
        "render_uncached_s": lambda: totals_text.__wrapped__(spec, sources, request, frozenset()),
        "render_cached_s": lambda: totals_text(spec, sources, request, frozenset()),
        "relation_built_s": relation,
        "executed_one_row_out_s": lambda: relation().aggregate("count(*)").fetchall(),
        "executed_to_arrow_s": lambda: relation().to_arrow_table(),
    }
    out: dict[str, Any] = {"note": "medians of single calls, information only"}
    for part, action in parts.items():
        action()
        out[part] = round(statistics.median(timed(action)[0] for _ in range(15)), 5)
    out["explain"] = {
        "relation_built_s": "a whole call up to the lazy relation: log check, scans, names, text",
        "executed_one_row_out_s": "the call, its query run, one row handed over",
        "executed_to_arrow_s": "the call, its query run, every group handed over as Arrow",
    }
    return out
