"""The three flagship examples run and give the answers a plain table edited in place would give.

Every expectation is computed here from the examples' input data with plain Python (dicts
edited in place), never with the library.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import ledger
from examples import corrections, dimension, rollups
from tests.support.scripts import run_as_script

ROOT = Path(__file__).resolve().parent.parent


# --- corrections (a): the bank ledger --------------------------------------------------------


def _balances(rows: dict[str, dict[str, Any]]) -> list[tuple[str, int, Decimal]]:
    count: dict[str, int] = defaultdict(int)
    total: dict[str, Decimal] = defaultdict(Decimal)
    for row in rows.values():
        count[row["account"]] += 1
        total[row["account"]] += row["amount"]
    return [(account, count[account], total[account]) for account in sorted(count)]


@pytest.fixture(scope="module")
def corrections_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One run of the corrections example (both parts, each on a table of its own) for the
    bank-ledger and device-metrics tests: neither changes what the run returned."""
    return corrections.main(str(tmp_path_factory.mktemp("corrections") / "wh"))


def test_bank_ledger_balances_and_history(corrections_run):
    got = corrections_run["bank"]

    table = {row["entry_id"]: dict(row) for row in corrections.DEPOSITS}
    wrong = corrections.WRONG_DEPOSIT
    table[wrong["entry_id"]] = dict(wrong)
    expected = {"wrong deposit": _balances(table)}
    del table[wrong["entry_id"]]  # the opposite entry cancels it
    expected["opposite entry"] = _balances(table)
    table[wrong["entry_id"]] = dict(corrections.RIGHT_DEPOSIT)
    expected["right deposit"] = _balances(table)

    assert got["balances"] == expected
    assert expected["wrong deposit"] != expected["right deposit"]  # the steps differ
    right = corrections.RIGHT_DEPOSIT
    assert got["history"] == [
        (wrong["entry_id"], wrong["account"], wrong["amount"], 1),
        (wrong["entry_id"], wrong["account"], wrong["amount"], -1),
        (right["entry_id"], right["account"], right["amount"], 1),
    ]
    assert got["visible"] == [
        (r["entry_id"], r["account"], r["amount"], r["booked_on"])
        for r in sorted(table.values(), key=lambda r: r["entry_id"])
    ]


# --- corrections (b): device metrics ---------------------------------------------------------


def _metrics_expectation(rows: dict[tuple[int, dt.datetime], dict[str, Any]]) -> dict[str, Any]:
    per_day: dict[dt.date, int] = defaultdict(int)
    temps: dict[int, list[float]] = defaultdict(list)
    for row in rows.values():
        per_day[row["probe_day"]] += 1
        temps[row["device_id"]].append(row["temperature"])
    return {
        "visible": [
            (
                r["device_id"],
                r["probe_dtime"],
                r["probe_day"],
                r["power_level"],
                r["temperature"],
            )
            for _, r in sorted(rows.items())
        ],
        "count_per_day": dict(sorted(per_day.items())),
        "avg_temperature": {d: sum(t) / len(t) for d, t in sorted(temps.items())},
        "log_count_per_day": {day: per_day.get(day, 0) for day in corrections.DAYS},
    }


def _plain_table_steps() -> dict[str, dict[str, Any]]:
    """The same steps applied to a dict keyed by (device_id, probe_dtime), edited in place."""
    load = corrections.probe_rows()
    table = {(r["device_id"], r["probe_dtime"]): dict(r) for r in load}
    steps = {"load": _metrics_expectation(table)}
    steps["replayed load"] = _metrics_expectation(table)  # a replayed batch is skipped
    for row in load:  # the reload replaces each key with the same values
        table[(row["device_id"], row["probe_dtime"])] = dict(row)
    steps["reloaded file"] = _metrics_expectation(table)
    for (device, _), row in table.items():
        if device == corrections.RECALIBRATED_DEVICE and (
            row["probe_day"] == corrections.RECALIBRATED_DAY
        ):
            row["temperature"] -= corrections.CALIBRATION_ERROR
    table[corrections.POWER_FIX_KEY]["power_level"] = corrections.RIGHT_POWER
    steps["corrected"] = _metrics_expectation(table)
    del table[corrections.GLITCH_KEY]
    for key in [
        k
        for k, r in table.items()
        if k[0] == corrections.BENCH_DEVICE and r["probe_day"] == corrections.BENCH_DAY
    ]:
        del table[key]
    steps["deleted"] = _metrics_expectation(table)
    steps["merged"] = _metrics_expectation(table)
    return steps


def test_device_metrics_match_a_plain_table_after_every_step(corrections_run):
    got = corrections_run["metrics"]
    expected = _plain_table_steps()

    assert list(got["steps"]) == list(expected)
    for step, want in expected.items():
        state = got["steps"][step]
        assert state["visible"] == want["visible"], step
        assert state["count_per_day"] == want["count_per_day"], step
        assert state["log_count_per_day"] == want["log_count_per_day"], step
        assert state["avg_temperature"] == pytest.approx(want["avg_temperature"]), step
    # The replayed batch wrote nothing; the reload rewrote every row (a mark plus an insertion)
    # and the merge collapsed the ledger to one entry per visible row.
    assert got["replay_version"] is None
    n = len(corrections.probe_rows())
    assert got["reload"] == {"inserted": n, "deleted": n}
    assert got["steps"]["replayed load"]["raw_entries"] == n
    assert got["steps"]["reloaded file"]["raw_entries"] == 3 * n
    assert got["steps"]["merged"]["raw_entries"] == len(expected["merged"]["visible"])
    # Each step that should change something did.
    assert expected["corrected"]["avg_temperature"] != expected["reloaded file"]["avg_temperature"]
    assert expected["deleted"]["count_per_day"] != expected["corrected"]["count_per_day"]


# --- rollups ---------------------------------------------------------------------------------


def _per_user_day(events: dict[int, tuple[Any, ...]]) -> list[tuple[int, dt.date, int, int]]:
    groups: dict[tuple[int, dt.date], list[int]] = defaultdict(lambda: [0, 0])
    for _, user, day, _, duration in events.values():
        groups[(user, day)][0] += 1
        groups[(user, day)][1] += duration
    return [(user, day, n, secs) for (user, day), (n, secs) in sorted(groups.items())]


def test_rollup_follows_late_corrections(tmp_path):
    location = str(tmp_path / "wh")
    got = rollups.main(location)

    events = {e[0]: e for e in rollups.EVENTS}
    before = _per_user_day(events)
    for event in rollups.NEW_EVENTS:
        events[event[0]] = event
    late = rollups.LATE_DURATION
    event = events[late["event_id"]]
    events[late["event_id"]] = (*event[:4], late["duration"])
    events = {k: e for k, e in events.items() if e[1] != rollups.BOT}
    after = _per_user_day(events)
    old, new = {g[:2]: g[2:] for g in before}, {g[:2]: g[2:] for g in after}
    changed = [k for k in old.keys() | new.keys() if old.get(k, (0, 0)) != new.get(k, (0, 0))]

    assert got["before"] == before
    assert got["base_before"] == before
    assert got["stale"] == before  # no refresh yet: the rollup still holds the old numbers
    assert got["base_at_stale_watermark"] == before
    assert got["after"] == after
    assert got["base_after"] == after
    assert got["after_merge"] == after
    assert before != after
    assert got["refresh_groups"] == len(changed)
    base = ledger.connect(location).table("page_views")
    assert got["watermark_before"] == 1  # the first insert
    assert got["watermark_after"] == base.version
    assert got["second_refresh_version"] is None


# --- dimension -------------------------------------------------------------------------------


def test_dimension_join_is_the_same_before_and_after_the_merge(tmp_path):
    got = dimension.main(str(tmp_path / "wh"))

    versions: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for batch in dimension.CUSTOMER_BATCHES:
        for row in batch:
            versions[row[0]].append(row)
    latest = {key: max(rows, key=lambda r: r[4]) for key, rows in versions.items()}
    revenue: dict[str, list[Any]] = defaultdict(lambda: [0, Decimal(0)])
    for order_id, customer_id, amount in dimension.ORDERS:
        if order_id != dimension.CANCELLED_ORDER:
            tier = latest[customer_id][2]
            revenue[tier][0] += 1
            revenue[tier][1] += amount
    expected_revenue = [(tier, n, total) for tier, (n, total) in sorted(revenue.items())]
    expected_customers = [latest[key] for key in sorted(latest)]

    for when in ("before", "after"):
        assert got[when]["customers"] == expected_customers, when
        assert got[when]["revenue"] == expected_revenue, when
    # Before the merge every version is in the files; after it only the latest of each key.
    assert got["before"]["entries"] == {key: len(rows) for key, rows in versions.items()}
    assert got["after"]["entries"] == dict.fromkeys(versions, 1)
    assert got["before"]["files"] == len(dimension.CUSTOMER_BATCHES)
    assert got["after"]["files"] == 1


# --- the scripts -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["corrections", "rollups", "dimension"])
def test_the_example_runs_as_a_script(name, monkeypatch, capfd):
    # No argument: the script makes its warehouse in a temporary folder of its own.
    run_as_script(ROOT / "examples" / f"{name}.py", monkeypatch)
    assert "┌" in capfd.readouterr().out  # printed tables


# --- the Spark pipeline ----------------------------------------------------------------------


def test_spark_pipeline_totals_agree_on_both_engines_and_after_a_spark_merge(tmp_path, spark):
    from examples import spark_pipeline

    got = spark_pipeline.main(str(tmp_path / "wh"))

    table = {(s, h): c for s, h, c in spark_pipeline.READINGS}
    table.update({(s, h): c for s, h, c in spark_pipeline.CORRECTIONS})
    for key in spark_pipeline.DROPPED:
        del table[key]
    expected = []
    for sensor in sorted({s for s, _ in table}):
        values = [c for (s, _), c in table.items() if s == sensor]
        expected.append((sensor, len(values), sum(values) / len(values)))
    for name in ("spark", "duckdb", "after_merge"):
        assert [(s, n) for s, n, _ in got[name]] == [(s, n) for s, n, _ in expected], name
        for (_, _, avg), (_, _, want) in zip(got[name], expected, strict=True):
            assert avg == pytest.approx(want), name
    entries_in, entries_out = got["entries"]
    assert entries_in == len(spark_pipeline.READINGS) + 2 * len(spark_pipeline.CORRECTIONS) + 1
    assert entries_out == len(table)
