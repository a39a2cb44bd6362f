"""Correcting data with opposite entries, on two tables.

Run it with ``.venv/bin/python examples/corrections.py`` (a temporary warehouse; pass a folder
as the first argument to keep it). Nothing is edited in place: a wrong entry is cancelled by an
opposite entry (``dml_type = -1``) carrying the same values, so every sign-weighted total over
the raw ledger (``views.totals``) stays exact at every step, with no deduplication pass.

(a) A bank-style ledger of deposits. A deposit is booked with the wrong amount; the bank books
    the opposite entry by hand (``append_entries``), then the right deposit. The balances are
    right after every step and ``views.history`` shows the three entries of the deposit.

(b) Device metrics ``(device_id, probe_dtime, power_level, temperature)`` keyed by
    ``(device_id, probe_dtime)``: a load, the same load delivered twice more, corrections by
    ``update``, deletes by ``delete`` and ``delete_where``, then a merge. After each step the
    visible rows, the count per day and the average temperature per device are what a plain
    table edited in place would hold.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa

import ledger
import views

# --- (a) the bank ledger -------------------------------------------------------------------------

DAY = dt.date(2026, 11, 2)
DEPOSITS = [
    {"entry_id": "D-1", "account": "alice", "amount": Decimal("100.00"), "booked_on": DAY},
    {"entry_id": "D-2", "account": "bob", "amount": Decimal("250.00"), "booked_on": DAY},
]
# D-3 was keyed in as 1000.00 instead of 100.00 ...
WRONG_DEPOSIT = {
    "entry_id": "D-3",
    "account": "bob",
    "amount": Decimal("1000.00"),
    "booked_on": DAY,
}
# ... and is re-booked with the right amount after its opposite entry.
RIGHT_DEPOSIT = {**WRONG_DEPOSIT, "amount": Decimal("100.00")}

# --- (b) the device metrics --------------------------------------------------------------------

DEVICES = (1, 2, 3)
DAYS = (dt.date(2026, 11, 20), dt.date(2026, 11, 21))
HOURS = (0, 8, 16)
# Device 2 read 1.5 degrees too hot on the first day (its probe was recalibrated).
RECALIBRATED_DEVICE, RECALIBRATED_DAY, CALIBRATION_ERROR = 2, DAYS[0], 1.5
# One probe reported a power level of 37.25 by mistake; the right value is 75.25.
POWER_FIX_KEY, RIGHT_POWER = (1, dt.datetime(2026, 11, 20, 16)), 75.25
# A glitched probe to delete by key, and a device that was on the test bench the second day.
GLITCH_KEY = (1, dt.datetime(2026, 11, 21, 8))
BENCH_DEVICE, BENCH_DAY = 3, DAYS[1]


def probe_rows() -> list[dict[str, Any]]:
    """One file of probes as the loader receives it. Values are multiples of 0.25 so that the
    sums are exact in floating point. ``probe_day`` is the day of ``probe_dtime``: a plain
    column, so that ``views.totals`` can group by it."""
    rows = []
    for day_index, day in enumerate(DAYS):
        for device in DEVICES:
            for hour in HOURS:
                power = 50 + 10 * device + hour / 4
                if (device, dt.datetime.combine(day, dt.time(hour))) == POWER_FIX_KEY:
                    power = 37.25
                rows.append(
                    {
                        "device_id": device,
                        "probe_dtime": dt.datetime.combine(day, dt.time(hour)),
                        "probe_day": day,
                        "power_level": power,
                        "temperature": 20 + device + hour / 8 + day_index * 0.5,
                    }
                )
    return rows


# --- helpers -------------------------------------------------------------------------------------


def title(text: str) -> None:
    print(f"\n=== {text} ".ljust(100, "="))


def show(caption: str, relation: duckdb.DuckDBPyRelation) -> None:
    print(f"-- {caption}")
    relation.show(max_width=200)


def balances(deposits: ledger.Table) -> duckdb.DuckDBPyRelation:
    """Balance per account: sum(dml_type * amount) over the raw entries, by views.totals."""
    return views.totals(deposits, by="account", sum="amount").order("account")


def metrics_state(metrics: ledger.Table) -> dict[str, Any]:
    """What a reader sees now: visible rows, count per day, average temperature per device."""
    visible = views.visible(metrics).order("device_id, probe_dtime")
    per_day = views.totals(metrics, by="probe_day").order("probe_day")
    per_device = views.totals(metrics, by="device_id", avg="temperature").order("device_id")
    return {
        "visible": visible.fetchall(),
        "count_per_day": dict(per_day.fetchall()),
        "avg_temperature": {d: avg for d, _, avg in per_device.fetchall()},
        # From the log alone (no data file read): the logical rows of each day's partition.
        "log_count_per_day": {
            day: metrics.count(partitions={"probe_dtime_day": day.isoformat()}) for day in DAYS
        },
        "raw_entries": metrics.scan().count("*").fetchall()[0][0],
        "files": len(metrics.files()),
    }


def print_step(step: str, result: Any, state: dict[str, Any]) -> None:
    print(f"{step}: {result}")
    print(
        f"   -> visible rows {len(state['visible'])}, raw entries {state['raw_entries']}, "
        f"files {state['files']}"
    )


def overview(steps: dict[str, dict[str, Any]]) -> duckdb.DuckDBPyRelation:
    """One row per step: the ledger's size and what a reader sees."""
    rows = []
    for step, state in steps.items():
        row: dict[str, Any] = {
            "step": step,
            "raw entries": state["raw_entries"],
            "visible rows": len(state["visible"]),
        }
        row.update({f"rows {day:%m-%d}": n for day, n in state["count_per_day"].items()})
        row.update({f"avg temp dev {d}": t for d, t in state["avg_temperature"].items()})
        rows.append(row)
    return duckdb.from_arrow(pa.Table.from_pylist(rows))


# --- (a) -----------------------------------------------------------------------------------------


def bank_ledger(warehouse: ledger.Warehouse) -> dict[str, Any]:
    title("(a) a bank-style ledger of deposits")
    deposits = warehouse.create_table(
        "deposits",
        {
            "entry_id": "VARCHAR",
            "account": "VARCHAR",
            "amount": "DECIMAL(18,2)",
            "booked_on": "DATE",
        },
        primary_key="entry_id",
    )
    steps: dict[str, list[tuple[Any, ...]]] = {}

    deposits.insert([*DEPOSITS, WRONG_DEPOSIT])
    steps["wrong deposit"] = balances(deposits).fetchall()
    show("balances after the wrong deposit of 1000.00 to bob", balances(deposits))

    # The opposite entry: the same values with dml_type -1. It cancels the wrong deposit in
    # every sign-weighted sum. append_entries is a blind append (no read, never conflicts): the
    # caller, who has the original entry in its own journal, writes the reversal itself.
    # (Table.update would read the old values and write this mark plus the new insertion in one
    # commit; wrap both calls below in one `with deposits.transaction() as tx:` to make the
    # reversal and the re-booking atomic.)
    deposits.append_entries([{**WRONG_DEPOSIT, "dml_type": -1}])
    steps["opposite entry"] = balances(deposits).fetchall()
    show("balances after the opposite entry", balances(deposits))

    deposits.append_entries([{**RIGHT_DEPOSIT, "dml_type": 1}])
    steps["right deposit"] = balances(deposits).fetchall()
    show("balances after the right deposit", balances(deposits))

    history = views.history(deposits, "D-3")
    show("views.history(deposits, 'D-3'): nothing was erased", history)
    return {
        "balances": steps,
        "history": history.project("entry_id, account, amount, dml_type").fetchall(),
        "visible": views.visible(deposits).order("entry_id").fetchall(),
    }


# --- (b) -----------------------------------------------------------------------------------------


def device_metrics(warehouse: ledger.Warehouse) -> dict[str, Any]:
    metrics = warehouse.create_table(
        "device_metrics",
        {
            "device_id": "BIGINT",
            "probe_dtime": "TIMESTAMP",
            "probe_day": "DATE",
            "power_level": "DOUBLE",
            "temperature": "DOUBLE",
        },
        primary_key=["device_id", "probe_dtime"],
        # One folder per day; the partition is derived from a key column, so every entry of a
        # key lives in one partition, and per-day counts come from the log alone.
        partition_by="day(probe_dtime)",
    )
    steps: dict[str, dict[str, Any]] = {}
    rows = probe_rows()

    # 1. The load. The loader names its batches (app_id, batch): a commit records the pair.
    load = metrics.insert(rows, app_id="probe-loader", batch=1)
    steps["load"] = metrics_state(metrics)
    title("(b) device metrics: load, load again, correct, delete, merge")
    print_step("1. load", load, steps["load"])
    show("the visible rows", views.visible(metrics).order("device_id, probe_dtime"))

    # 2. The same load again, replayed by the loader after a crash with the same batch number:
    # a no-op (nothing written, CommitInfo.version is None). A blind insert without the token
    # would add a second live entry per key, counted twice by every total.
    replay = metrics.insert(rows, app_id="probe-loader", batch=1)
    steps["replayed load"] = metrics_state(metrics)
    print_step("2. the loader replays batch 1", replay, steps["replayed load"])

    # 3. The same file delivered once more by another route, with no batch number to recognise
    # it by: upsert replaces each existing key (a delete mark for the old entry plus the new
    # insertion) instead of adding a second copy, so the visible rows and every total stay
    # the same. It costs a read of the keys and two entries per row; the merge of step 6
    # collapses them again. (A dedup-policy table keyed by a load or event id drops such
    # repeats when read instead, but an update's new insertion would be a repeat too: that
    # suits tables that are never corrected, see docs/merges.md 2.4.)
    reload = metrics.upsert(rows)
    steps["reloaded file"] = metrics_state(metrics)
    print_step("3. the same file again, by upsert", reload, steps["reloaded file"])

    # 4. Corrections by update: only the named columns change, the others are kept. The
    # recalibrated temperatures are read inside the transaction (lookup): the keys count as
    # read, so a concurrent change to them makes this commit fail instead of being lost.
    hot_keys = [
        (RECALIBRATED_DEVICE, dt.datetime.combine(RECALIBRATED_DAY, dt.time(hour)))
        for hour in HOURS
    ]
    device, dtime = POWER_FIX_KEY
    with metrics.transaction() as tx:  # one trx_id for both corrections
        current = tx.lookup(hot_keys).to_pylist()
        tx.update(
            [
                {
                    "device_id": row["device_id"],
                    "probe_dtime": row["probe_dtime"],
                    "temperature": row["temperature"] - CALIBRATION_ERROR,
                }
                for row in current
            ]
        )
        tx.update([{"device_id": device, "probe_dtime": dtime, "power_level": RIGHT_POWER}])
    steps["corrected"] = metrics_state(metrics)
    print_step("4. corrections by update", tx.commit_info, steps["corrected"])
    show(
        f"views.history of probe ({device}, {dtime}): loaded, reloaded, corrected",
        views.history(metrics, POWER_FIX_KEY).project(
            "device_id, probe_dtime, power_level, trx_id, trx_seq, dml_type"
        ),
    )

    # 5. Deletes: a delete mark carrying the deleted values, by key or by predicate.
    by_key = metrics.delete([{"device_id": GLITCH_KEY[0], "probe_dtime": GLITCH_KEY[1]}])
    by_predicate = metrics.delete_where(
        f"device_id = {BENCH_DEVICE} AND probe_day = DATE '{BENCH_DAY}'"
    )
    steps["deleted"] = metrics_state(metrics)
    print(f"5. delete by key: {by_key}")
    print_step("   delete_where", by_predicate, steps["deleted"])

    # 6. A merge collapses every insertion with its delete mark; no answer changes.
    merged = metrics.merge(min_files=1)
    steps["merged"] = metrics_state(metrics)
    entries_in = sum(p.entries_in for p in merged.merged)
    entries_out = sum(p.entries_out for p in merged.merged)
    print_step("6. merge", f"{entries_in} entries -> {entries_out}", steps["merged"])
    show(
        "per step: count per day (views.totals by probe_day) and average temperature per "
        "device (views.totals avg)",
        overview(steps),
    )
    show(
        "views.totals(metrics, by='device_id', avg='temperature') now",
        views.totals(metrics, by="device_id", avg="temperature").order("device_id"),
    )
    show("the visible rows", views.visible(metrics).order("device_id, probe_dtime"))
    return {
        "steps": steps,
        "replay_version": replay.version,
        "reload": {"inserted": reload.inserted, "deleted": reload.deleted},
    }


def main(warehouse_path: str | None = None) -> dict[str, Any]:
    """Run both parts on a new warehouse at ``warehouse_path`` (a temporary folder if None)
    and return what they showed."""
    if warehouse_path is None:
        with tempfile.TemporaryDirectory(prefix="ledger-corrections-") as folder:
            return main(folder)
    warehouse = ledger.connect(warehouse_path)
    return {"bank": bank_ledger(warehouse), "metrics": device_metrics(warehouse)}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
