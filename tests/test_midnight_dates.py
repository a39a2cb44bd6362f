"""A timestamp goes into a DATE column when it is at midnight (``datetime(2024, 1, 2)``, a pandas
Timestamp of a day, ``2024-01-02 00:00:00`` in a CSV or JSON file): the date loses nothing. One
with a time of day is refused with TypeMismatchError naming the value, before anything is
written; an instant (with a zone) goes in as its UTC time, as into a TIMESTAMP column. Every
source and both engines follow the one rule."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.errors import TypeMismatchError
from tests.conftest import examples
from tests.support.engines import Engine

SCHEMA = {"id": "BIGINT", "day": "DATE"}
MIDNIGHTS = st.dates(dt.date(1900, 1, 1), dt.date(2200, 12, 31)).map(
    lambda d: dt.datetime.combine(d, dt.time())
)
TIMES = st.times().filter(lambda t: t != dt.time())
DATETIMES = st.one_of(
    MIDNIGHTS,
    st.builds(dt.datetime.combine, st.dates(dt.date(1900, 1, 1), dt.date(2200, 12, 31)), TIMES),
)


def _write(tmp: Path, source: str, values: list[dt.datetime]) -> ledger.Table:
    table = ledger.connect(str(tmp / "wh")).create_table("t", SCHEMA, primary_key="id")
    rows = [{"id": i, "day": v} for i, v in enumerate(values)]
    data: Any
    if source == "dicts":
        data = rows
    elif source == "pandas":
        data = pd.DataFrame({"id": range(len(values)), "day": pd.to_datetime(values)})
    elif source == "arrow":
        data = pa.table({"id": range(len(values)), "day": pa.array(values, pa.timestamp("us"))})
    elif source == "csv":
        data = tmp / "in.csv"
        data.write_text(
            "id,day\n" + "".join(f"{i},{v.isoformat(' ')}\n" for i, v in enumerate(values))
        )
    else:
        data = tmp / "in.jsonl"
        data.write_text(
            "".join(
                json.dumps({"id": i, "day": v.isoformat()}) + "\n" for i, v in enumerate(values)
            )
        )
    table.insert(data if not isinstance(data, Path) else str(data))
    return table


@settings(max_examples=examples(30))
@given(
    values=st.lists(DATETIMES, min_size=1, max_size=5),
    source=st.sampled_from(["dicts", "pandas", "arrow", "csv", "json"]),
)
def test_a_timestamp_goes_into_a_date_only_at_midnight(tmp_path_factory, values, source):
    tmp = tmp_path_factory.mktemp("d")
    with_time = [v for v in values if v.time() != dt.time()]
    if with_time:
        with pytest.raises(TypeMismatchError) as refused:
            _write(tmp, source, values)
        message = str(refused.value)
        assert "column 'day' (DATE)" in message
        assert "time of day" in message
        assert str(with_time[0].date()) in message
        return
    table = _write(tmp, source, values)
    stored = table.to_arrow().sort_by("id").column("day").to_pylist()
    assert stored == [v.date() for v in values]


def test_a_midnight_datetime_among_dates_is_its_date_and_a_later_one_is_refused(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="id")
    table.insert([{"id": 1, "day": dt.date(2024, 1, 1)}, {"id": 2, "day": dt.datetime(2024, 1, 2)}])
    assert table.to_arrow().sort_by("id").column("day").to_pylist() == [
        dt.date(2024, 1, 1),
        dt.date(2024, 1, 2),
    ]
    with pytest.raises(TypeMismatchError, match="time of day"):
        table.insert(
            [{"id": 3, "day": dt.date(2024, 1, 1)}, {"id": 4, "day": dt.datetime(2024, 1, 2, 5)}]
        )
    assert table.count() == 2


def test_an_instant_goes_in_as_its_utc_day(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="id")
    utc = pd.Timestamp("2024-01-02", tz="UTC")
    table.insert(pd.DataFrame({"id": [1], "day": [utc]}))
    assert table.to_arrow().column("day").to_pylist() == [dt.date(2024, 1, 2)]
    paris = pd.Timestamp("2024-01-02", tz="Europe/Paris")  # 23:00 UTC the day before
    with pytest.raises(
        TypeMismatchError, match=r"2024-01-02 00:00:00\+01:00 has a time of day \(in UTC"
    ):
        table.insert(pd.DataFrame({"id": [2], "day": [paris]}))
    assert table.count() == 1


@pytest.mark.engines
def test_both_engines_take_midnight_and_refuse_a_time_of_day(engine: Engine, tmp_path):
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="id")
    for kind in (pa.timestamp("us"), pa.timestamp("us", tz="UTC")):
        midnight = pa.table({"id": [1, 2], "day": pa.array([dt.datetime(2024, 1, 2), None], kind)})
        engine.write(table, "upsert", midnight)
        assert engine.visible(table).sort_by("id").column("day").to_pylist() == [
            dt.date(2024, 1, 2),
            None,
        ]
        late = pa.table({"id": [3], "day": pa.array([dt.datetime(2024, 1, 2, 5, 6)], kind)})
        with pytest.raises(TypeMismatchError, match=r"2024-01-02 05:06:00.*time of day"):
            engine.write(table, "insert", late)
    assert table.count() == 2
    # Zoned text: midnight UTC is that day (an offset counts), a time of day is refused.
    zoned = pa.table({"id": [4, 5], "day": ["2024-01-03T00:00:00Z", "2024-01-04 05:30:00+05:30"]})
    engine.write(table, "insert", zoned)
    assert engine.visible(table).sort_by("id").column("day").to_pylist()[2:] == [
        dt.date(2024, 1, 3),
        dt.date(2024, 1, 4),
    ]
    with pytest.raises(TypeMismatchError, match=r"2024-01-05 01:00:00\+00:00 has a time of day"):
        engine.write(table, "insert", pa.table({"id": [6], "day": ["2024-01-05T01:00:00Z"]}))
    assert table.count() == 4


@pytest.mark.parametrize("form", ["dicts", "csv", "json"])
def test_zoned_midnight_text_goes_into_a_date_as_its_utc_day(tmp_path, form):
    texts = ["2024-01-01T00:00:00Z", "2024-01-02 05:30:00+05:30", "2024-01-03T00:00:00+00:00"]
    rows = [{"k": i, "d": text} for i, text in enumerate(texts)]
    if form == "csv":
        data: object = str(tmp_path / "d.csv")
        (tmp_path / "d.csv").write_text(
            "k,d\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts))
        )
    elif form == "json":
        data = str(tmp_path / "d.jsonl")
        (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        data = rows
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"k": "BIGINT", "d": "DATE"}, "k"
    )
    table.insert(data)
    days = table.to_arrow().sort_by("k").column("d").to_pylist()
    assert days == [dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3)]
    with pytest.raises(ledger.TypeMismatchError, match="time of day"):
        table.insert([{"k": 9, "d": "2024-01-04T01:00:00Z"}])


@pytest.mark.parametrize(
    "instant",
    [
        # Year 0 and year 10000 in UTC: Python cannot hold the time the refusal names.
        dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
        dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
        dt.datetime(1, 1, 1, 0, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    ],
)
def test_an_instant_whose_utc_time_python_cannot_hold_is_refused_typed(tmp_path, instant):
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="id")
    with pytest.raises(TypeMismatchError, match="has a time of day") as refused:
        table.insert([{"id": 1, "day": instant}])
    assert f"{instant.year:04d}-" in str(refused.value)
    assert table.count() == 0
