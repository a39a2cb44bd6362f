"""What a ``partitions=`` pick takes besides text: a date or datetime for a time field, a whole
number for a year field (``{"ts_year": 2026}``), and any other value refused with
``InvalidArgumentError`` naming the field and the form it takes; field names are matched
without case, as column names are, and a name two fields share but for case is refused."""

from __future__ import annotations

import datetime as dt
import decimal
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.partitioning import PartitionSpec
from ledger.schema import TableSchema
from tests.conftest import Location, examples
from tests.test_cli import run_ledger

SCHEMA = {"id": "BIGINT", "ts": "TIMESTAMP", "d": "DATE", "Region": "VARCHAR"}
FORMATS = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d", "hour": "%Y-%m-%d-%H"}
SHAPES = {"year": r"\d{4}", "month": r"\d{4}-\d{2}", "day": r"\d{4}-\d{2}-\d{2}"}
SHAPES["hour"] = r"\d{4}-\d{2}-\d{2}-\d{2}"
REFUSED = object()


def _expected(transform: str, value: Any) -> Any:
    """The partition text a time field's pick of ``value`` selects, or REFUSED."""
    if isinstance(value, str):
        if not re.fullmatch(SHAPES[transform], value, flags=re.ASCII):
            return REFUSED
        try:
            dt.datetime.strptime(value, FORMATS[transform])
        except ValueError:
            return REFUSED
        return value
    if isinstance(value, dt.datetime):
        return value.strftime(FORMATS[transform])
    if isinstance(value, dt.date):
        return dt.datetime.combine(value, dt.time()).strftime(FORMATS[transform])
    whole = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if transform == "year" and whole and 1 <= value <= 9999:
        return f"{int(value):04d}"
    return REFUSED


_VALUES = st.one_of(
    st.integers(min_value=-5, max_value=3_000_000_000),
    st.integers(min_value=1, max_value=9999),
    st.integers(min_value=1, max_value=9999).map(np.int64),
    st.floats(allow_nan=True),
    st.integers(min_value=1000, max_value=9999).map(float),
    st.booleans(),
    st.decimals(allow_nan=False, places=0, min_value=1000, max_value=9999),
    st.builds(object),
    st.datetimes(min_value=dt.datetime(1000, 1, 1)),
    st.dates(min_value=dt.date(1000, 1, 1)),
    st.from_regex(r"\A[0-9]{4}(-[0-9]{2}){0,3}\Z"),
)


@settings(max_examples=examples(80))
@given(transform=st.sampled_from(sorted(FORMATS)), value=_VALUES, in_list=st.booleans())
def test_a_time_field_takes_exactly_its_forms_and_names_itself_when_refusing(
    transform: str, value: Any, in_list: bool
) -> None:
    spec = PartitionSpec.parse([f"{transform}(ts)"], TableSchema.parse(SCHEMA))
    name = f"ts_{transform}"
    pick = {name: [value] if in_list else value}
    expected = _expected(transform, value)
    if expected is REFUSED:
        with pytest.raises(ledger.InvalidArgumentError, match=rf"'{name}'.*{transform}"):
            spec.normalise_filter(pick)
    else:
        assert spec.normalise_filter(pick) == [{name: {expected}}]


def _by_time(location: Location) -> ledger.Table:
    table = location.connect().create_table(
        "y", SCHEMA, primary_key="id", partition_by=["year(ts)", "month(d)", "hour(ts)"]
    )
    table.insert(
        [
            {"id": 1, "ts": dt.datetime(2024, 1, 1, 5), "d": dt.date(2024, 2, 1)},
            {"id": 2, "ts": dt.datetime(2025, 1, 1, 5), "d": dt.date(2025, 2, 1)},
        ]
    )
    return table


@pytest.mark.parametrize(
    "pick",
    [
        {"d_month": 202402},
        {"ts_hour": 2024010105},
        {"ts_year": 2024.0},
        {"ts_year": [2024.5]},
        {"ts_year": True},
        {"ts_year": 0},
        {"ts_year": decimal.Decimal(2024)},
        {"ts_year": object()},
    ],
)
def test_a_number_no_time_field_takes_is_refused_by_every_call(
    local_location: Location, pick: dict[str, Any]
) -> None:
    table = _by_time(local_location)
    [name] = pick
    for call in (
        lambda: table.count(partitions=pick),
        lambda: table.files(partitions=pick),
        lambda: views.visible(table, partitions=pick),
        lambda: table.drop_partitions(partitions=pick),
    ):
        with pytest.raises(ledger.InvalidArgumentError, match=rf"'{name}'.*(YYYY|year)"):
            call()
    assert table.count() == 2  # nothing was dropped


def test_a_whole_number_picks_a_year(local_location: Location) -> None:
    table = _by_time(local_location)
    assert table.count(partitions={"ts_year": 2024}) == 1
    assert table.count(partitions={"ts_year": [2024, np.int32(2025)]}) == 2
    assert len(table.files(partitions={"ts_year": 2025})) == 1
    assert views.visible(table, partitions={"ts_year": 2024}).fetchall()[0][0] == 1
    table.drop_partitions(partitions={"ts_year": 2024})
    assert table.to_arrow()["id"].to_pylist() == [2]


def _case_variant(name: str, flips: list[bool]) -> str:
    return "".join(c.swapcase() if flip else c for c, flip in zip(name, flips, strict=False))


@settings(max_examples=examples(40))
@given(
    field=st.sampled_from(["ts_day", "Region", "id_bucket"]),
    flips=st.lists(st.booleans(), min_size=10, max_size=10),
)
def test_a_field_name_is_matched_without_case(field: str, flips: list[bool]) -> None:
    spec = PartitionSpec.parse(["day(ts)", "Region", "bucket(4, id)"], TableSchema.parse(SCHEMA))
    value = {"ts_day": "2026-11-20", "Region": "eu", "id_bucket": "3"}[field]
    name = _case_variant(field, flips)
    assert spec.normalise_filter({name: value}) == [{field: {value}}]


def test_a_name_two_fields_share_but_for_case_is_refused_unless_exact() -> None:
    schema = TableSchema.parse({"id": "BIGINT", "ts": "TIMESTAMP", "TS_day": "VARCHAR"})
    spec = PartitionSpec.parse(["day(ts)", "TS_day"], schema)
    assert spec.normalise_filter({"ts_day": "2026-11-20"}) == [{"ts_day": {"2026-11-20"}}]
    assert spec.normalise_filter({"TS_day": "x"}) == [{"TS_day": {"x"}}]
    with pytest.raises(
        ledger.InvalidArgumentError, match=r"'Ts_Day'.*\['ts_day', 'TS_day'\] alike"
    ):
        spec.normalise_filter({"Ts_Day": "x"})


def test_one_field_named_twice_in_a_pick_is_refused() -> None:
    spec = PartitionSpec.parse(["Region"], TableSchema.parse(SCHEMA))
    with pytest.raises(ledger.InvalidArgumentError, match=r"'Region'.*twice"):
        spec.normalise_filter({"region": "eu", "REGION": "us"})


def test_every_call_matches_field_names_without_case(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "events", SCHEMA, primary_key="id", partition_by=["day(ts)", "Region"]
    )
    table.insert(
        [
            {"id": 1, "ts": dt.datetime(2026, 11, 20, 9), "Region": "eu"},
            {"id": 2, "ts": dt.datetime(2026, 11, 21, 9), "Region": "us"},
        ]
    )
    assert table.count(partitions={"region": "eu"}) == 1
    assert table.count(partitions=[{"REGION": "eu"}, {"TS_DAY": "2026-11-21"}]) == 2
    assert len(table.files(partitions={"region": "us"})) == 1
    assert views.visible(table, partitions={"rEgIoN": "us"}).fetchall()[0][0] == 2
    table.drop_partitions(partitions={"region": "eu"})
    assert table.to_arrow()["id"].to_pylist() == [2]
    root = Path(local_location.uri)
    run_ledger("-w", str(root), "drop-partitions", "events", "--partition", "REGION=us", cwd=root)
    assert table.refresh().count() == 0
