"""A materialized rollup of page views per user and day, with late corrections.

Run it with ``.venv/bin/python examples/rollups.py`` (a temporary warehouse; pass a folder as
the first argument to keep it).

``page_views`` is a ledger of events. ``create_rollup`` makes ``page_views_daily``, an
aggregating table keyed by ``(user_id, day)`` holding ``views`` (a count) and ``secs`` (the sum
of ``duration``). A refresh reads only what the base committed after the rollup's watermark
(a base version), sums it per group with every entry weighted by its ``dml_type`` and commits
those deltas together with the new watermark, exactly once. So late corrections to past days
(an update of an old event, a delete of a bot's events) flow into the rollup as the difference
they make, without recomputing anything else; and the rollup always equals
``views.totals`` of the base read at the rollup's watermark.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
from typing import Any

import duckdb

import ledger
import views

DAYS = (dt.date(2026, 11, 1), dt.date(2026, 11, 2), dt.date(2026, 11, 3))
BOT = 666
ROLLUP = "page_views_daily"
# (event_id, user_id, day, page, duration in seconds)
EVENTS = [
    (1, 1, DAYS[0], "/", 30),
    (2, 1, DAYS[0], "/pricing", 45),
    (3, 2, DAYS[0], "/", 12),
    (4, BOT, DAYS[0], "/", 1),
    (5, BOT, DAYS[0], "/login", 1),
    (6, 1, DAYS[1], "/docs", 120),
    (7, 2, DAYS[1], "/", 20),
    (8, 2, DAYS[1], "/pricing", 60),
    (9, 3, DAYS[1], "/", 5),
    (10, BOT, DAYS[1], "/", 1),
]
# Events of the third day, and the late corrections: event 2 was capped at 45 s by a bug in the
# tracker (the visit lasted 450 s), and user 666 turned out to be a bot.
NEW_EVENTS = [(11, 1, DAYS[2], "/", 15), (12, 3, DAYS[2], "/docs", 300), (13, BOT, DAYS[2], "/", 1)]
LATE_DURATION = {"event_id": 2, "duration": 450}
COLUMNS = ("event_id", "user_id", "day", "page", "duration")


def title(text: str) -> None:
    print(f"\n=== {text} ".ljust(100, "="))


def show(caption: str, relation: duckdb.DuckDBPyRelation) -> None:
    print(f"-- {caption}")
    relation.show(max_width=200)


def rows(events: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    return [dict(zip(COLUMNS, event, strict=True)) for event in events]


def rollup_rows(rollup: ledger.Rollup) -> duckdb.DuckDBPyRelation:
    """The rollup's groups: its visible rows (the aggregating view merges its entries)."""
    return views.visible(rollup.table).order("user_id, day")


def base_totals(rollup: ledger.Rollup) -> duckdb.DuckDBPyRelation:
    """The same numbers computed from the base ledger, read at the rollup's watermark."""
    return (
        views.totals(rollup.base, by=["user_id", "day"], sum="duration", version=rollup.watermark)
        .project("user_id, day, count AS views, sum_duration AS secs")
        .order("user_id, day")
    )


def main(warehouse_path: str | None = None) -> dict[str, Any]:
    """Run the example on a new warehouse at ``warehouse_path`` (a temporary folder if None)
    and return the rollup before and after the corrections."""
    if warehouse_path is None:
        with tempfile.TemporaryDirectory(prefix="ledger-rollups-") as folder:
            return main(folder)
    warehouse = ledger.connect(warehouse_path)
    events = warehouse.create_table(
        "page_views",
        {
            "event_id": "BIGINT",
            "user_id": "BIGINT",
            "day": "DATE",
            "page": "VARCHAR",
            "duration": "INTEGER",
        },
        primary_key="event_id",
        partition_by="day",
    )
    result: dict[str, Any] = {}

    title("1. two days of page views, then the rollup")
    events.insert(rows(EVENTS))
    # Created and filled at once (its first refresh reads the whole base). With
    # auto_refresh=True every write to page_views would refresh it before returning; here
    # refreshes are explicit, as a scheduled job would run them.
    daily = events.create_rollup(
        ROLLUP, by=["user_id", "day"], measures={"views": "count", "secs": "sum(duration)"}
    )
    print(daily, "schema:", daily.table.schema)
    show("the rollup", rollup_rows(daily))
    result["watermark_before"] = daily.watermark
    result["before"] = rollup_rows(daily).fetchall()
    result["base_before"] = base_totals(daily).fetchall()

    title("2. a new day of events, and late corrections to past days")
    print(events.insert(rows(NEW_EVENTS)), "new events of", DAYS[2])
    print(events.update([LATE_DURATION]), "event 2 lasted 450 s, not 45 s")
    print(events.delete_where(f"user_id = {BOT}"), f"user {BOT} is a bot: every event deleted")
    show("the corrections in the change feed", views.changes(events, daily.watermark or 0))
    print(f"the rollup still holds base version {daily.watermark}; the base is at {events.version}")
    # Until the next refresh the rollup is consistent with the base at its watermark: time
    # travel to that version gives the same numbers.
    result["stale"] = rollup_rows(daily).fetchall()
    result["base_at_stale_watermark"] = base_totals(daily).fetchall()
    print(
        "rollup == views.totals(base, version=watermark):",
        result["stale"] == result["base_at_stale_watermark"],
    )

    title("3. refresh: the deltas since the watermark, committed with the new watermark")
    held = daily.table.version
    refreshed = daily.refresh()
    print(refreshed)
    show(
        "the deltas it appended (the bot's groups are cancelled, event 2 adds 405 s)",
        views.changes(daily.table, held).project("user_id, day, views, secs").order("user_id, day"),
    )
    show("the rollup after the refresh", rollup_rows(daily))
    show(f"views.totals of the base at version {daily.watermark}", base_totals(daily))
    result["refresh_groups"] = refreshed.groups
    result["watermark_after"] = daily.watermark
    result["after"] = rollup_rows(daily).fetchall()
    result["base_after"] = base_totals(daily).fetchall()
    print(
        "rollup == views.totals(base, version=watermark):", result["after"] == result["base_after"]
    )

    title("4. refresh again (from another handle): nothing new, nothing written")
    again = warehouse.rollup(ROLLUP).refresh()
    print(again)
    result["second_refresh_version"] = again.version

    title("5. merge the rollup table: one entry per group, the same numbers")
    print(daily.table.merge(min_files=1))
    show("the rollup's raw entries after the merge", daily.table.scan().order("user_id, day"))
    result["after_merge"] = rollup_rows(daily).fetchall()
    return result


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
