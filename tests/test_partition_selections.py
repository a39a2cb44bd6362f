"""What a ``partitions=`` selection selects: a list of selections ORs them, so an empty list
selects nothing; an empty mapping (a selection naming no field, alone or in a list) is refused
rather than read as every partition; partition text of a time field (``day(ts)``: ``YYYY-MM-DD``)
or a bucket that no partition can have is refused with ``InvalidArgumentError`` before anything
is read or written."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.partitioning import PartitionSpec
from ledger.schema import TableSchema
from tests.conftest import Location, examples

SCHEMA = {"id": "BIGINT", "ts": "TIMESTAMP", "region": "VARCHAR"}


def _events(location: Location) -> ledger.Table:
    table = location.connect().create_table(
        "events", SCHEMA, "id", partition_by=["day(ts)", "region"]
    )
    table.insert(
        [
            {"id": 1, "ts": dt.datetime(2026, 11, 20, 9), "region": "eu"},
            {"id": 2, "ts": dt.datetime(2026, 11, 21, 9), "region": "us"},
        ]
    )
    return table


def test_an_empty_list_selects_no_partition(local_location: Location) -> None:
    table = _events(local_location)
    assert table.count(partitions=[]) == 0
    assert table.files(partitions=[]) == []
    assert views.visible(table, partitions=[]).fetchall() == []
    assert views.rows(table, partitions=[]).num_rows == 0


@pytest.mark.parametrize("selection", [{}, [{}], [{"region": "eu"}, {}]])
def test_an_empty_mapping_is_refused_not_read_as_every_partition(
    local_location: Location, selection: Any
) -> None:
    table = _events(local_location)
    for read in (
        table.count,
        table.files,
        lambda partitions: views.visible(table, partitions=partitions),
    ):
        with pytest.raises(ledger.InvalidArgumentError, match="names no partition field"):
            read(partitions=selection)
    with pytest.raises(ledger.InvalidArgumentError, match="names no partition field"):
        table.drop_partitions(partitions=selection)
    assert table.count() == 2  # nothing was dropped


@pytest.mark.parametrize(
    "text", ["2026-13-01", "2026-11-31", "2026-11-2", "20261120", "2026-11-20T00:00", "day", ""]
)
def test_malformed_day_text_is_refused(local_location: Location, text: str) -> None:
    table = _events(local_location)
    with pytest.raises(ledger.InvalidArgumentError, match=re.escape(repr(text))):
        table.count(partitions={"ts_day": text})
    with pytest.raises(ledger.InvalidArgumentError, match="YYYY-MM-DD"):
        table.drop_partitions(partitions={"ts_day": [text, "2026-11-20"]})
    assert table.count() == 2
    assert table.count(partitions={"ts_day": "2026-11-20"}) == 1


FORMATS = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d", "hour": "%Y-%m-%d-%H"}
SHAPES = {
    "year": r"\d{4}",
    "month": r"\d{4}-\d{2}",
    "day": r"\d{4}-\d{2}-\d{2}",
    "hour": r"\d{4}-\d{2}-\d{2}-\d{2}",
}


def _oracle(transform: str, text: str) -> bool:
    """Whether ``text`` is a value the transform gives some timestamp."""
    if not re.fullmatch(SHAPES[transform], text, flags=re.ASCII):
        return False
    try:
        dt.datetime.strptime(text, FORMATS[transform])
    except ValueError:
        return False
    return True


_TIME_TEXT = st.one_of(
    st.builds(
        lambda d, cut: d.strftime("%Y-%m-%d-%H")[:cut],
        st.datetimes(min_value=dt.datetime(1000, 1, 1)),
        st.sampled_from([4, 7, 10, 13]),
    ),
    st.from_regex(r"\A[0-9]{1,4}(-[0-9]{1,2}){0,3}\Z"),
    st.text(alphabet="0123456789-T: ", max_size=14),
)


@settings(max_examples=examples(60))
@given(transform=st.sampled_from(sorted(FORMATS)), text=_TIME_TEXT)
def test_time_field_text_is_taken_exactly_when_a_partition_can_have_it(
    transform: str, text: str
) -> None:
    spec = PartitionSpec.parse([f"{transform}(ts)"], TableSchema.parse(SCHEMA))
    if _oracle(transform, text):
        assert spec.normalise_filter({f"ts_{transform}": text}) == [{f"ts_{transform}": {text}}]
    else:
        with pytest.raises(ledger.InvalidArgumentError, match=re.escape(repr(text))):
            spec.normalise_filter({f"ts_{transform}": text})


def test_a_bucket_no_partition_can_have_is_refused() -> None:
    spec = PartitionSpec.parse(["bucket(4, id)"], TableSchema.parse(SCHEMA))
    assert spec.normalise_filter({"id_bucket": ["3", 0]}) == [{"id_bucket": {"3", "0"}}]
    for wrong in ["4", "-1", "x", "03", 7]:
        with pytest.raises(ledger.InvalidArgumentError, match="bucket"):
            spec.normalise_filter({"id_bucket": wrong})


IDENTITY_SCHEMA = {"id": "BIGINT", "day": "DATE", "region_id": "INTEGER", "amount": "DOUBLE"}


def _identity_table(location: Location) -> ledger.Table:
    table = location.connect().create_table(
        "by_value", IDENTITY_SCHEMA, "id", partition_by=["day", "region_id"]
    )
    table.insert(
        [
            {"id": 1, "day": dt.date(2026, 1, 5), "region_id": 3, "amount": 1.0},
            {"id": 2, "day": dt.date(2026, 1, 6), "region_id": 4, "amount": 2.0},
        ]
    )
    return table


@pytest.mark.parametrize(
    ("selection", "type_name"),
    [
        ({"day": "2026-1-05"}, "DATE"),
        ({"day": "2026-01-05T00:00:00"}, "DATE"),
        ({"day": dt.datetime(2026, 1, 5, 12)}, "DATE"),
        ({"region_id": "03"}, "INTEGER"),
        ({"region_id": "x"}, "INTEGER"),
        ({"region_id": 3.5}, "INTEGER"),
        ({"region_id": True}, "INTEGER"),
        ({"region_id": 2**40}, "INTEGER"),
    ],
)
def test_an_identity_value_no_partition_can_have_is_refused(
    local_location: Location, selection: dict[str, Any], type_name: str
) -> None:
    table = _identity_table(local_location)
    [(name, value)] = selection.items()
    message = rf"{name!r}.*{type_name}.*{re.escape(repr(value))}"
    for call in (
        lambda: table.count(partitions=selection),
        lambda: table.files(partitions=selection),
        lambda: views.visible(table, partitions=selection),
        lambda: table.merge(partitions=selection),
        lambda: table.drop_partitions(partitions=selection),
        lambda: table.rewrite_partitions(selection, "SELECT * FROM entries"),
    ):
        with pytest.raises(ledger.InvalidArgumentError, match=message):
            call()
    assert table.count() == 2  # nothing was dropped


def test_an_identity_value_that_converts_exactly_selects_its_partition(
    local_location: Location,
) -> None:
    table = _identity_table(local_location)
    for selection in (
        {"region_id": 3},
        {"region_id": "3"},
        {"day": dt.date(2026, 1, 5)},
        {"day": "2026-01-05"},
        {"day": "2026-01-05", "region_id": [3, "4"]},
    ):
        assert table.count(partitions=selection) == 1, selection


_INTEGER_TEXT = st.one_of(
    st.integers(min_value=-(2**33), max_value=2**33).map(str),
    st.from_regex(r"\A[-+ 0]?[0-9]{1,3}\Z"),
    st.text(alphabet="0123456789-+. xe", max_size=6),
)


@settings(max_examples=examples(60))
@given(text=_INTEGER_TEXT)
def test_integer_field_text_is_taken_exactly_when_a_partition_can_have_it(text: str) -> None:
    spec = PartitionSpec.parse(["region_id"], TableSchema.parse(IDENTITY_SCHEMA))
    canonical = re.fullmatch(r"-?(0|[1-9][0-9]*)", text, flags=re.ASCII) is not None and (
        -(2**31) <= int(text) < 2**31
    )
    if canonical and text != "-0":
        assert spec.normalise_filter({"region_id": text}) == [{"region_id": {text}}]
    else:
        with pytest.raises(ledger.InvalidArgumentError, match=re.escape(repr(text))):
            spec.normalise_filter({"region_id": text})


@settings(max_examples=examples(60))
@given(
    text=st.one_of(
        st.dates().map(lambda d: d.isoformat()),
        st.dates().map(lambda d: f"{d.year}-{d.month}-{d.day}"),
        st.from_regex(r"\A[0-9]{4}-[0-9]{2}-[0-9]{2}\Z"),
    )
)
def test_date_field_text_is_taken_exactly_when_a_partition_can_have_it(text: str) -> None:
    spec = PartitionSpec.parse(["day"], TableSchema.parse(IDENTITY_SCHEMA))
    try:
        canonical = dt.date.fromisoformat(text).isoformat() == text
    except ValueError:
        canonical = False
    if canonical:
        assert spec.normalise_filter({"day": text}) == [{"day": {text}}]
    else:
        with pytest.raises(ledger.InvalidArgumentError, match=re.escape(repr(text))):
            spec.normalise_filter({"day": text})


@pytest.mark.parametrize("where", ["", "   ", 5])
def test_an_empty_partition_predicate_is_refused_in_the_callers_words(
    local_location: Location, where: Any
) -> None:
    table = _events(local_location)
    with pytest.raises(ledger.InvalidPredicateError) as dropping:
        table.drop_partitions(where=where)
    assert "drop_partitions" in str(dropping.value) and "delete_where" not in str(dropping.value)
    with pytest.raises(ledger.InvalidPredicateError) as rewriting:
        table.rewrite_partitions(sql="SELECT * FROM entries", where=where)
    assert "rewrite_partitions" in str(rewriting.value), rewriting.value
    assert "delete_where" not in str(rewriting.value)
    assert table.count() == 2
