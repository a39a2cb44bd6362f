"""A list of dicts whose column mixes Python kinds (ints, floats, bools, text, bytes, Decimals)
stores each value as it would store it inserted alone: Arrow's inference must not convert a
value by its neighbours (16777217 beside 0.5 rounded into a FLOAT, True beside a float taken
as 1.0, text beside bytes taken as bytes). Also: pandas Timestamps keep their nanoseconds' rule,
zoned datetimes with offsets in seconds convert, and every row a buffered writer accepts
commits."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ledger
from ledger.schema import TableSchema, conform, dicts_to_arrow, to_arrow
from tests.conftest import examples
from tests.support.scratch import scratch_dir

COLUMN_TYPES = [
    "BOOLEAN",
    "INTEGER",
    "BIGINT",
    "FLOAT",
    "DOUBLE",
    "DECIMAL(10,2)",
    "DECIMAL(38,4)",
    "VARCHAR",
    "BLOB",
]
VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, 7, -3, 2**24, 2**24 + 1, 123456789, 2**31 - 1, 2**53 + 1, 2**63 + 5]),
    st.integers(-(2**40), 2**40),
    st.sampled_from([0.0, 1.0, 0.5, -2.25, 24.08, 1e-7, 16777216.0, 3e9, math.nan]),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.sampled_from(["7", "3.30", "abc", "true", "1e3", ""]),
    st.sampled_from([b"x", b"abc", b""]),
    st.sampled_from([Decimal("0.10"), Decimal("3"), Decimal("-19.999"), Decimal("1E+3")]),
)


def converted(sql_type: str, values: list[Any]) -> list[Any] | str:
    """What a list of dicts converts to (as every write converts it), or the refusal."""
    schema = TableSchema.parse({"x": sql_type})
    try:
        table, _ = dicts_to_arrow([{"x": v} for v in values], schema)
        out, _ = conform(table, schema)
    except ledger.LedgerError as e:
        assert isinstance(e, ledger.TypeMismatchError), e
        return f"refused: {e}"
    return out.column("x").to_pylist() if out.num_columns else [None] * len(values)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return type(a) is type(b) and a == b


@settings(max_examples=examples(400), deadline=None)
@given(sql_type=st.sampled_from(COLUMN_TYPES), values=st.lists(VALUES, min_size=1, max_size=6))
def test_each_value_of_a_mixed_column_converts_as_it_would_alone(
    sql_type: str, values: list[Any]
) -> None:
    alone = [converted(sql_type, [v]) for v in values]
    mixed = converted(sql_type, values)
    if any(isinstance(outcome, str) for outcome in alone):
        assert isinstance(mixed, str), (alone, mixed)
        return
    assert not isinstance(mixed, str), (alone, mixed)
    assert all(same(m, a[0]) for m, a in zip(mixed, alone, strict=True)), (alone, mixed)


# Numbers and the kinds a number column can hide among them: bools, numpy's bools (Arrow reads
# np.True_ beside ints as 1), numpy's ints and floats, ints beyond a FLOAT's exact range.
NUMBER_VALUES = st.one_of(
    st.none(),
    st.integers(-3, 3),
    st.sampled_from([0.0, 1.0, 0.5, -2.25, 16777216.0, 2**24 + 1, 2**40]),
    st.booleans(),
    st.sampled_from([np.True_, np.False_, np.int64(1), np.int64(5), np.float64(1.0)]),
)


@settings(max_examples=examples(150), deadline=None)
@given(
    sql_type=st.sampled_from(["INTEGER", "BIGINT", "FLOAT", "DOUBLE"]),
    values=st.lists(NUMBER_VALUES, min_size=1, max_size=6),
    rows=st.integers(65, 300),
)
def test_a_long_mixed_column_converts_each_value_as_alone(
    sql_type: str, values: list[Any], rows: int
) -> None:
    """The same rule for a number column of many rows (the values repeated), where the values
    a mix could hide behind are found in Arrow's column rather than one by one."""
    alone = [converted(sql_type, [v]) for v in values]
    long = [values[i % len(values)] for i in range(rows)]
    mixed = converted(sql_type, long)
    if any(isinstance(outcome, str) for outcome in alone):
        assert isinstance(mixed, str), (alone, mixed)
        return
    assert not isinstance(mixed, str), (alone, mixed)
    expected = [alone[i % len(values)][0] for i in range(rows)]
    assert all(same(m, a) for m, a in zip(mixed, expected, strict=True)), (alone, mixed)


@pytest.mark.parametrize(
    ("sql_type", "value", "neighbour"),
    [
        ("FLOAT", 16777217, 0.5),
        ("FLOAT", 123456789, 0.5),
        ("FLOAT", 2**31 - 1, 0.5),
        ("DOUBLE", True, 0.5),
        ("BIGINT", True, 2.0),
        ("DECIMAL(10,2)", True, 0.5),
        ("BLOB", "abc", b"x"),
        ("FLOAT", 16777217, Decimal("0.5")),
        ("DECIMAL(10,2)", np.float32(0.1), 0.5),
    ],
)
def test_a_value_refused_alone_is_refused_beside_any_neighbour(
    sql_type: str, value: Any, neighbour: Any
) -> None:
    """Refused alone, refused beside a neighbour in either order, by insert, upsert, a dict of
    lists and the buffered writer; a numpy float32 (accepted alone) is stored as alone."""
    accepted_alone = isinstance(value, np.floating)
    with scratch_dir("mixed-kinds") as folder:
        table = ledger.connect(f"{folder}/wh").create_table(
            "m", {"id": "BIGINT", "x": sql_type}, primary_key="id"
        )
        pair = [{"id": 1, "x": value}, {"id": 2, "x": neighbour}]
        writes = [
            *(
                lambda w=w, rows=rows: getattr(table, w)(rows)
                for w in ("insert", "upsert")
                for rows in (pair, pair[::-1])
            ),
            lambda: table.insert({"id": [1, 2], "x": [value, neighbour]}),
        ]
        for write in writes:
            if accepted_alone:
                write()
                continue
            with pytest.raises(ledger.TypeMismatchError, match="'x'"):
                write()
        if accepted_alone:
            stored = {v for (v,) in table.scan().project("x").fetchall()}
            assert stored == {Decimal("0.10"), Decimal("0.50")}
            return
        with pytest.raises(ledger.TypeMismatchError, match="'x'"):
            table.insert([{"id": 1, "x": value}])
        with table.writer() as writer, pytest.raises(ledger.TypeMismatchError, match="'x'"):
            writer.write(pair)
        assert table.refresh().version == 0 and table.count() == 0


# Floats into an integer column, each judged by its own width: a float32 holds whole numbers
# exactly below 2**24 and a double below 2**53, so from there one may already have been rounded
# and is refused, beside any neighbour (a float32 among doubles or ints is not a double).
# Whole numbers of each width near those limits, beside ints, floats and numpy scalars.
FLOAT_INTO_INTEGER = st.one_of(
    st.none(),
    st.integers(-(2**40), 2**40),
    st.sampled_from([0, 1, 7, 2**11 + 1, 2**24 + 1, 2**53 + 1, -(2**31)]),
    st.sampled_from([0.0, 1.0, 2.5, 2048.0, 16777216.0, 16777218.0, 2.0**53, -3e9]),
    st.builds(np.float32, st.sampled_from([1, 2.5, 2047, 2048, 16777215, 16777217, -3e9])),
    st.builds(np.float64, st.sampled_from([7, 2.0**24 + 1, 2.0**53, 2.0**53 - 2])),
    st.builds(np.int64, st.sampled_from([0, 1, 5, 2**24 + 1, 2**62])),
)


@settings(max_examples=examples(80), deadline=None)
@given(
    sql_type=st.sampled_from(["INTEGER", "BIGINT"]),
    values=st.lists(FLOAT_INTO_INTEGER, min_size=1, max_size=6),
    rows=st.sampled_from([0, 70]),
)
def test_a_float_into_an_integer_column_converts_as_alone(
    sql_type: str, values: list[Any], rows: int
) -> None:
    """Stored or refused as alone, among few values (read back one by one) and, repeated to
    ``rows`` values, among many (the suspects found in Arrow's column)."""
    alone = [converted(sql_type, [v]) for v in values]
    long = [values[i % len(values)] for i in range(max(rows, len(values)))]
    mixed = converted(sql_type, long)
    # A DataFrame's object column holding the same values converts as the dicts do.
    schema = TableSchema.parse({"x": sql_type})
    try:
        frame = pd.DataFrame({"x": pd.Series(long, dtype=object)})
        framed: Any = conform(to_arrow(frame, schema), schema)[0].column("x").to_pylist()
    except ledger.TypeMismatchError as e:
        framed = f"refused: {e}"
    assert isinstance(framed, str) == isinstance(mixed, str), (framed, mixed)
    assert isinstance(mixed, str) or all(same(f, m) for f, m in zip(framed, mixed, strict=True)), (
        framed,
        mixed,
    )
    if any(isinstance(outcome, str) for outcome in alone):
        assert isinstance(mixed, str), (alone, mixed)
        return
    assert not isinstance(mixed, str), (alone, mixed)
    expected = [alone[i % len(values)][0] for i in range(len(long))]
    assert all(same(m, a) for m, a in zip(mixed, expected, strict=True)), (alone, mixed)


@pytest.mark.parametrize(
    "neighbour", [7, 7.0, np.int64(7), np.float64(7.0)], ids=["int", "float", "int64", "float64"]
)
def test_a_float32_beyond_its_exact_integers_is_refused_by_every_write(neighbour: Any) -> None:
    """np.float32(16777217) is 16777216.0, which may be a rounded 16777217: an integer column
    refuses it alone, beside any neighbour, from insert, the buffered writer, pandas and Arrow."""
    value = np.float32(16777217)
    with scratch_dir("mixed-kinds") as folder:
        table = ledger.connect(f"{folder}/wh").create_table(
            "b", {"id": "BIGINT", "x": "BIGINT"}, primary_key="id"
        )
        pair = [{"id": 1, "x": value}, {"id": 2, "x": neighbour}]
        writes = [
            lambda: table.insert(pair[:1]),
            lambda: table.insert(pair),
            lambda: table.insert(pair[::-1]),
            lambda: table.insert({"id": [1, 2], "x": [value, neighbour]}),
            lambda: table.insert(pd.DataFrame({"id": [1], "x": np.array([value])})),
            lambda: table.insert(
                pd.DataFrame({"id": [1, 2], "x": pd.Series([value, neighbour], dtype=object)})
            ),
            lambda: table.insert(pa.table({"id": [1], "x": pa.array([value], pa.float32())})),
        ]
        for write in writes:
            with pytest.raises(ledger.TypeMismatchError, match="may already have been rounded"):
                write()
        with table.writer() as writer:
            for rows in (pair, pair[::-1], pair[0]):
                with pytest.raises(ledger.TypeMismatchError, match="already have been rounded"):
                    writer.write(rows)
            writer.write(pair[1])  # the neighbour alone is stored
        table.insert([{"id": 3, "x": np.float32(16777215)}, {"id": 4, "x": neighbour}])
        assert table.refresh().scan().project("id, x").order("id").fetchall() == [
            (2, 7),
            (3, 16777215),
            (4, 7),
        ]


NANOS = pd.Timestamp("2024-01-02 03:04:05.123456789")
WHOLE_MICROS = pd.Timestamp("2024-01-02 03:04:05.123456000")


@pytest.mark.parametrize("sql_type", ["TIMESTAMP", "TIMESTAMPTZ"])
def test_a_pandas_timestamp_with_nanoseconds_in_a_dict_is_refused(sql_type: str) -> None:
    zone = "UTC" if sql_type == "TIMESTAMPTZ" else None
    nanos, micros = NANOS.tz_localize(zone), WHOLE_MICROS.tz_localize(zone)
    with scratch_dir("mixed-kinds") as folder:
        table = ledger.connect(f"{folder}/wh").create_table(
            "t", {"id": "BIGINT", "x": sql_type}, primary_key="id"
        )
        for write in (table.insert, table.upsert):
            with pytest.raises(ledger.TypeMismatchError, match="nanoseconds"):
                write([{"id": 1, "x": nanos}])
            with pytest.raises(ledger.TypeMismatchError, match="nanoseconds"):
                write([{"id": 1, "x": micros.to_pydatetime()}, {"id": 2, "x": nanos}])
        with table.writer() as writer, pytest.raises(ledger.TypeMismatchError):
            writer.write({"id": 1, "x": nanos})
        assert table.count() == 0
        table.insert([{"id": 1, "x": micros}])
        [(stored,)] = table.scan().project("x").fetchall()
        assert stored.microsecond == 123456


def test_offsets_with_seconds_convert_to_their_instant_in_any_order() -> None:
    old = dt.datetime.fromisoformat(
        dt.datetime(1930, 6, 1, 12, tzinfo=ZoneInfo("Europe/Amsterdam")).isoformat()
    )
    good = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    instant = old.astimezone(dt.UTC)
    with scratch_dir("mixed-kinds") as folder:
        table = ledger.connect(f"{folder}/wh").create_table(
            "t", {"id": "BIGINT", "at": "TIMESTAMPTZ"}, primary_key="id"
        )
        table.insert([{"id": 1, "at": old}])
        table.insert([{"id": 2, "at": good}, {"id": 3, "at": old}])
        table.insert([{"id": 4, "at": old}, {"id": 5, "at": good}])
        with table.writer() as writer:
            writer.write({"id": 6, "at": old})
            writer.write({"id": 7, "at": good})
        got = dict(table.scan().project('id, "at"').fetchall())
        assert {got[i] for i in (1, 3, 4, 6)} == {instant}
        assert {got[i] for i in (2, 5, 7)} == {good}


WRITER_COLUMNS = {
    "id": "BIGINT",
    "n": "INTEGER",
    "f": "DOUBLE",
    "d": "DECIMAL(12,2)",
    "s": "VARCHAR",
    "b": "BOOLEAN",
    "day": "DATE",
    "ts": "TIMESTAMP",
    "tz": "TIMESTAMPTZ",
}
ZONES = st.sampled_from(
    [
        dt.UTC,
        dt.timezone(dt.timedelta(hours=5, minutes=30)),
        dt.timezone(dt.timedelta(hours=1, minutes=19, seconds=32)),
        ZoneInfo("Europe/Amsterdam"),
        ZoneInfo("America/New_York"),
    ]
)
WRITER_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "n": st.integers(-(2**31), 2**31 - 1),
    "f": st.floats(allow_infinity=False, allow_nan=False) | st.integers(-10, 10) | st.booleans(),
    "d": st.decimals(-(10**9), 10**9, places=2)
    | st.integers(-(10**9), 10**9)
    | st.sampled_from([0.5, 24.08, 1.0, 1e9, 0.1]),
    "s": st.text(max_size=5),
    "b": st.booleans(),
    "day": st.dates(),
    "ts": st.datetimes(),
    "tz": st.datetimes(dt.datetime(1850, 1, 1), dt.datetime(2100, 1, 1), timezones=ZONES)
    | st.sampled_from(["2026-01-01T10:30:15.25+05:30", "1930-06-01 12:00Z"]),
}


@settings(max_examples=examples(15), deadline=None)
@given(
    rows=st.lists(
        st.fixed_dictionaries(
            {}, optional={name: st.none() | values for name, values in WRITER_VALUES.items()}
        ),
        min_size=1,
        max_size=12,
    )
)
@example(rows=[{"tz": dt.datetime.fromisoformat("1930-06-01T12:00:00+01:19:32")}, {"n": 1}])
@example(rows=[{"f": True}, {"f": 0.5}, {"d": 1e9}, {"d": 10**9}, {"d": 0.1}])
def test_every_row_a_writer_accepts_commits(rows: list[dict[str, Any]]) -> None:
    with scratch_dir("mixed-kinds") as folder:
        table = ledger.connect(f"{folder}/wh").create_table("w", WRITER_COLUMNS, primary_key="id")
        accepted = []
        with table.writer(max_seconds=None) as writer:
            for number, row in enumerate(rows):
                try:
                    writer.write({"id": number, **row})
                except ledger.TypeMismatchError:
                    continue
                accepted.append(number)
            writer.flush()
        assert writer.pending_rows == 0
        ids = sorted(i for (i,) in table.scan().project("id").fetchall())
        assert ids == accepted


@pytest.mark.parametrize("float_type", [pa.float16(), pa.float32(), pa.float64()])
@pytest.mark.parametrize(
    ("value", "stored"),
    [(1e-4, Decimal("0.0001")), (5e-4, Decimal("0.0005")), (0.1, Decimal("0.1")), (1.5, None)],
)
def test_a_float_of_any_width_at_the_smallest_step_of_a_decimal_fits(
    float_type: pa.DataType, value: float, stored: Decimal | None
) -> None:
    schema = TableSchema.parse({"x": "DECIMAL(18,4)"})
    data = pa.table({"x": pa.array([value, None], pa.float64()).cast(float_type)})
    out, _ = conform(data, schema)
    assert out.column("x").to_pylist()[0] == (stored if stored is not None else Decimal(value))


@pytest.mark.parametrize("float_type", [pa.float16(), pa.float32()])
def test_a_float_below_the_smallest_step_of_a_decimal_is_refused(float_type: pa.DataType) -> None:
    schema = TableSchema.parse({"x": "DECIMAL(18,4)"})
    data = pa.table({"x": pa.array([4e-5]).cast(float_type)})
    with pytest.raises(ledger.TypeMismatchError, match="does not fit exactly"):
        conform(data, schema)
