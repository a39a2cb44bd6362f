"""A list of dicts mixing dates with datetimes in a DATE column, or naive with zoned datetimes
in a TIMESTAMPTZ column, is refused as one of its values alone would be, whatever order the
values come in and on every write path (not converted by the first value's type, losing a time
of day or a zone). Into a TIMESTAMP column both kinds of datetime are taken alone, and so they
are together (tests/test_mixed_zone_datetimes.py)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples
from tests.support.scratch import scratch_dir

DAY = dt.date(2024, 1, 1)
LATE = dt.datetime(2024, 1, 1, 23, 59)
AWARE = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
NAIVE = dt.datetime(2024, 1, 1, 12)


@settings(max_examples=examples(20), deadline=None)
@given(
    column=st.sampled_from([("DATE", [DAY, LATE]), ("TIMESTAMPTZ", [AWARE, NAIVE])]),
    order=st.permutations([0, 1]),
    padding=st.integers(0, 3),
    mode=st.sampled_from(["insert", "upsert", "writer"]),
)
def test_mixed_kinds_of_time_are_refused_in_any_order(
    column: tuple[str, list[Any]], order: list[int], padding: int, mode: str
) -> None:
    sql_type, pair = column
    values = [pair[order[0]]] * (padding + 1) + [pair[order[1]]]
    rows = [{"k": i, "t": v} for i, v in enumerate(values)]
    with scratch_dir("mixed-times") as folder:
        table = ledger.connect(f"{folder}/wh").create_table(
            "m", {"k": "BIGINT", "t": sql_type}, primary_key="k"
        )
        with pytest.raises(ledger.TypeMismatchError, match="'t'"):
            if mode == "writer":
                with table.writer() as writer:
                    writer.write(rows)
            else:
                getattr(table, mode)(rows)
        assert table.refresh().version == 0 and table.count() == 0


def test_one_kind_of_time_per_column_still_converts() -> None:
    with scratch_dir("mixed-times") as folder:
        table = ledger.connect(f"{folder}/wh").create_table(
            "m", {"k": "BIGINT", "d": "DATE", "z": "TIMESTAMPTZ"}, primary_key="k"
        )
        table.insert([{"k": 1, "d": DAY, "z": AWARE}, {"k": 2, "d": None, "z": AWARE}])
        got = table.to_arrow().sort_by("k").to_pylist()
        assert [r["d"] for r in got] == [DAY, None]
        assert got[0]["z"] == AWARE
