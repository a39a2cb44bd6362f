"""Values converted into the table's column types: what is kept exactly, what is refused.

- A float goes into a DECIMAL column as its shortest text (``repr``): accepted when that text
  fits the column's scale and precision, stored as exactly that decimal; refused otherwise
  (it would be rounded or overflow), NaN and infinities included.
- A double goes into a FLOAT column when the FLOAT keeps it to within 2**-24 of itself;
  overflow to infinity, underflow to zero and subnormal results that lose the value are
  refused.
- A float goes into an integer column when it is a whole number in range.

The expected answers come from plain Python (``decimal``, ``struct``), never from the library.
Both engines follow the same rule (the Spark cases, and the writes run on every engine, are
at the end).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct
import tempfile
import time
from decimal import Context, Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.schema import TableSchema, conform
from tests.conftest import Location, examples
from tests.support.engines import Engine, sorted_rows

EXACT = Context(prec=80)  # the default context would round 34-digit decimals to 28 digits

# --- the plain-Python oracle -------------------------------------------------------------------


def decimal_fits(value: Decimal, precision: int, scale: int) -> bool:
    """Whether ``value`` is a DECIMAL(precision, scale) without rounding."""
    if not value.is_finite():
        return False
    # normalize() rounds to the context's precision (28 digits): widen it to the value's own
    # digits, or a 37-digit value that needs rounding would look as if it fitted.
    with decimal.localcontext() as context:
        context.prec = max(len(value.as_tuple().digits), 1)
        exponent = value.normalize().as_tuple().exponent
    assert isinstance(exponent, int)
    if exponent < -scale:
        return False
    return abs(value) < Decimal(10) ** (precision - scale)


def float_into_decimal(value: float, precision: int, scale: int) -> Decimal | None:
    """What a DECIMAL column stores for ``value``: its shortest text, or None if refused."""
    if not math.isfinite(value):
        return None
    text = Decimal(repr(value))
    return text if decimal_fits(text, precision, scale) else None


def double_into_float(value: float) -> float | None:
    """What a FLOAT column stores for a double, or None if refused."""
    if not math.isfinite(value):
        return value
    try:
        rounded: float = struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        return None
    return rounded if abs(rounded - value) <= abs(value) * 2.0**-24 else None


# --- helpers -----------------------------------------------------------------------------------


def _stored(table: ledger.Table, column: str) -> dict[int, Any]:
    return dict(table.scan().select(f"id, {column}").fetchall())


def _table_files(table: ledger.Table) -> list[str]:
    return table.files()


def _fresh(warehouse: ledger.Warehouse, column_type: str, name: str = "t") -> ledger.Table:
    return warehouse.create_table(name, {"id": "BIGINT", "v": column_type}, primary_key="id")


# --- floats into DECIMAL -----------------------------------------------------------------------

CENTS = [c / 100 for c in range(-1999, 2000)]


def test_every_float_with_cents_goes_into_a_decimal_as_written(location: Location) -> None:
    """``c / 100`` for every c: the float prints with two places, so it is stored as that
    decimal (Arrow's own float -> decimal cast refused about one in eight of them)."""
    table = _fresh(location.connect(), "DECIMAL(10,2)")
    table.insert([{"id": i, "v": f} for i, f in enumerate(CENTS)])
    assert _stored(table, "v") == {i: Decimal(repr(f)) for i, f in enumerate(CENTS)}


def test_float32_goes_into_a_decimal_as_its_own_shortest_text(tmp_path: Any) -> None:
    table = _fresh(ledger.connect(str(tmp_path)), "DECIMAL(10,2)")
    values = [0.1, 24.08, 19.99, -3.3]
    table.insert(pa.table({"id": range(4), "v": pa.array(values, pa.float32())}))
    assert _stored(table, "v") == {i: Decimal(repr(v)) for i, v in enumerate(values)}


FLOATS_CHANGED_IN_A_DECIMAL = [
    (1.234, "DECIMAL(10,2)", "1.234"),  # would round
    (0.125, "DECIMAL(12,2)", "0.125"),
    (1e-7, "DECIMAL(10,2)", "1e-7"),
    (5e-324, "DECIMAL(38,10)", "5e-324"),
    (1e9, "DECIMAL(10,2)", "1000000000"),  # overflows the precision
    (1e22, "DECIMAL(38,20)", "1e+22"),
    (float("nan"), "DECIMAL(10,2)", "nan"),
    (float("inf"), "DECIMAL(10,2)", "inf"),
    (float("-inf"), "DECIMAL(10,2)", "-inf"),
]


def on_local_disk_and_first_on_s3(cases: list[tuple[Any, ...]], on_s3: int = 1) -> list[Any]:
    """Every case on a local disk and the first ``on_s3`` on S3 as well: the conversion is
    checked before any storage call, so S3 only has to show that nothing is written there."""
    return [
        pytest.param(backend, *case, id=f"{backend}-{'-'.join(map(str, case))}")
        for position, case in enumerate(cases)
        for backend in ("local", "s3")
        if backend == "local" or position < on_s3
    ]


@pytest.mark.parametrize(
    ("location", "value", "column_type", "named"),
    on_local_disk_and_first_on_s3(FLOATS_CHANGED_IN_A_DECIMAL),
    indirect=["location"],
)
def test_a_float_that_would_change_in_a_decimal_is_refused_before_anything_is_written(
    location: Location, value: float, column_type: str, named: str
) -> None:
    table = _fresh(location.connect(), column_type)
    table.insert([{"id": 1, "v": 0}])
    before = (table.refresh().version, _table_files(table))
    with pytest.raises(ledger.TypeMismatchError, match=r"column 'v'") as raised:
        table.insert([{"id": 2, "v": 1.0}, {"id": 3, "v": value}])
    assert f"the float {named} does not fit" in str(raised.value)
    assert (table.refresh().version, _table_files(table)) == before
    assert _stored(table, "v") == {1: Decimal(0)}


@settings(max_examples=examples(60))
@given(st.data())
def test_random_floats_go_into_random_decimals_by_their_shortest_text(data: Any) -> None:
    """Random decimals of a random DECIMAL(p, s), and neighbours with more places, converted
    to float: accepted exactly when the float's shortest text fits, and stored as that text."""
    precision = data.draw(st.integers(1, 38), label="precision")
    scale = data.draw(st.integers(0, precision), label="scale")
    places = data.draw(st.integers(0, min(scale + 3, 40)), label="places")
    limit = Decimal(10) ** (precision - scale) - Decimal(1).scaleb(-places)
    decimals = st.decimals(
        min_value=-limit, max_value=limit, places=places, allow_nan=False, allow_infinity=False
    )
    extras = st.sampled_from([float("nan"), float("inf"), -0.0, 5e-324, 1e300, 2.0**60])
    values = data.draw(st.lists(decimals.map(float) | extras, min_size=1, max_size=20))
    schema = TableSchema.parse({"v": f"DECIMAL({precision},{scale})"})
    for value in values:
        want = float_into_decimal(value, precision, scale)
        try:
            got, _ = conform(pa.table({"v": pa.array([value], pa.float64())}), schema)
        except ledger.TypeMismatchError:
            assert want is None, (value, precision, scale)
            continue
        assert want is not None, (value, precision, scale)
        assert got.column("v")[0].as_py() == want, (value, precision, scale)


@settings(max_examples=examples(40))
@given(
    st.integers(1, 38).flatmap(lambda p: st.tuples(st.just(p), st.integers(0, min(p, 20)))),
    st.data(),
)
def test_decimals_of_up_to_15_digits_read_back_exactly_through_a_float(
    precision_scale: tuple[int, int], data: Any
) -> None:
    """Every decimal a double carries (15 significant digits or fewer) that fits the column is
    accepted from its float and stored as the very same decimal."""
    precision, scale = precision_scale
    digits = min(precision, 15)
    whole = data.draw(st.integers(-(10**digits) + 1, 10**digits - 1))
    value = Decimal(whole).scaleb(-min(scale, digits))
    schema = TableSchema.parse({"v": f"DECIMAL({precision},{scale})"})
    got, _ = conform(pa.table({"v": [float(value)]}), schema)
    assert got.column("v")[0].as_py() == value


def test_a_million_floats_convert_fast_and_one_bad_value_is_named(tmp_path: Any) -> None:
    """Vectorised: a million floats convert in well under the time a per-row loop takes, and
    a single bad value among them is found and named without one."""
    schema = TableSchema.parse({"v": "DECIMAL(18,2)"})
    values = pa.array([(i % 100_000) / 100 for i in range(1_000_000)], pa.float64())
    started = time.perf_counter()
    got, _ = conform(pa.table({"v": values}), schema)
    assert time.perf_counter() - started < 5
    assert got.column("v")[123_456].as_py() == Decimal("234.56")
    bad = pa.concat_arrays([values.slice(0, 765_432), pa.array([7.125]), values.slice(765_432)])
    started = time.perf_counter()
    with pytest.raises(ledger.TypeMismatchError, match=r"7\.125"):
        conform(pa.table({"v": bad}), schema)
    assert time.perf_counter() - started < 5


# --- doubles into FLOAT ------------------------------------------------------------------------


# The first two (one accepted, one refused) run on S3 as well.
DOUBLES_INTO_A_FLOAT = [
    (0.1, True),  # rounded to the nearest FLOAT, as always
    (1e-50, False),  # underflows to zero
    (3.4e38, True),
    (1.17549435e-38, True),  # the smallest normal FLOAT
    (-0.0, True),
    (2.0**-149, True),  # a subnormal FLOAT held exactly
    (-1e-50, False),
    (1e-40, False),  # a subnormal FLOAT that keeps only some of its digits
    (1e300, False),  # overflows to infinity
    (-3.5e38, False),
]


@pytest.mark.parametrize(
    ("location", "value", "accepted"),
    on_local_disk_and_first_on_s3(DOUBLES_INTO_A_FLOAT, on_s3=2),
    indirect=["location"],
)
def test_a_double_goes_into_a_float_only_within_the_floats_precision(
    location: Location, value: float, accepted: bool
) -> None:
    table = _fresh(location.connect(), "FLOAT")
    if not accepted:
        before = table.refresh().version
        with pytest.raises(ledger.TypeMismatchError, match=r"column 'v' \(FLOAT\)"):
            table.insert([{"id": 1, "v": value}])
        assert table.refresh().version == before
        assert _stored(table, "v") == {}
        return
    table.insert([{"id": 1, "v": value}])
    stored = _stored(table, "v")[1]
    assert stored == double_into_float(value)
    assert math.copysign(1, stored) == math.copysign(1, value)


def test_nan_and_infinities_stay_what_they_are_in_a_float(tmp_path: Any) -> None:
    table = _fresh(ledger.connect(str(tmp_path)), "FLOAT")
    table.insert([{"id": 1, "v": float("nan")}, {"id": 2, "v": float("-inf")}])
    stored = _stored(table, "v")
    assert math.isnan(stored[1]) and stored[2] == float("-inf")


@settings(max_examples=examples(100))
@given(
    st.floats(allow_nan=True, allow_infinity=True)
    | st.floats(min_value=-1e-36, max_value=1e-36)
    | st.floats(min_value=3e38, max_value=4e38)
)
def test_random_doubles_go_into_a_float_as_plain_python_rounds_them(value: float) -> None:
    schema = TableSchema.parse({"v": "FLOAT"})
    want = double_into_float(value)
    try:
        got, _ = conform(pa.table({"v": pa.array([value], pa.float64())}), schema)
    except ledger.TypeMismatchError:
        assert want is None, value
        return
    assert want is not None, value
    stored = got.column("v")[0].as_py()
    assert stored == want or (math.isnan(stored) and math.isnan(want))


# --- floats into integers ----------------------------------------------------------------------


def test_whole_floats_go_into_integer_columns(location: Location) -> None:
    table = location.connect().create_table(
        "t", {"id": "BIGINT", "n": "INTEGER", "big": "BIGINT"}, primary_key="id"
    )
    table.insert(
        pa.table(
            {
                "id": pa.array([1.0, 2.0, 3.0]),
                "n": pa.array([1.0, None, -2147483648.0]),
                "big": pa.array([2.0**53 - 1, -0.0, None]),
            }
        )
    )
    assert sorted(table.scan().select("id, n, big").fetchall()) == [
        (1, 1, 2**53 - 1),
        (2, None, 0),
        (3, -(2**31), None),
    ]


@pytest.mark.parametrize("value", [1.5, -0.25, float("nan"), float("inf"), 2.0**31, 1e300])
def test_a_float_that_is_not_a_whole_number_in_range_is_refused_by_an_integer_column(
    tmp_path: Any, value: float
) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "n": "INTEGER"}, primary_key="id"
    )
    refused = r"column 'n' \(INTEGER\).*(whole numbers|out of its range)"
    with pytest.raises(ledger.TypeMismatchError, match=refused):
        table.insert(pa.table({"id": [1, 2], "n": pa.array([1.0, value])}))
    assert table.refresh().version == 0
    assert _stored(table, "n") == {}


INTEGER_TYPES = {"TINYINT": 8, "SMALLINT": 16, "INTEGER": 32, "BIGINT": 64}
# Each float width's type and the bound below which it holds every whole number exactly (a
# larger whole float may already have been rounded, and is refused).
FLOAT_WIDTHS = {16: (pa.float16(), 2**11), 32: (pa.float32(), 2**24), 64: (pa.float64(), 2**53)}


@settings(max_examples=examples(40), deadline=None)
@given(
    column=st.sampled_from(sorted(INTEGER_TYPES)),
    width=st.sampled_from(sorted(FLOAT_WIDTHS)),
    values=st.lists(
        st.floats(width=16) | st.integers(-3000, 3000).map(float), min_size=1, max_size=4
    ),
    source=st.sampled_from(["arrow", "dicts"]),
)
def test_any_float_goes_into_an_integer_column_exactly_or_is_refused_in_the_products_words(
    column: str, width: int, values: list[float], source: str
) -> None:
    """Half, single and double floats: a whole value within the column's range (and below the
    float's exact whole numbers) is stored as that integer; any other is refused naming the
    column, never in Arrow's words (which name a half float by its bits)."""
    import numpy as np

    kind, exact_below = FLOAT_WIDTHS[width]
    exact = [float(np.array(v, dtype=kind.to_pandas_dtype())) for v in values]
    bits = INTEGER_TYPES[column]
    fits = all(
        math.isfinite(v)
        and v.is_integer()
        and -(2 ** (bits - 1)) <= v < 2 ** (bits - 1)
        and abs(v) < exact_below
        for v in exact
    )
    table = ledger.connect(tempfile.mkdtemp()).create_table(
        "t", {"id": "BIGINT", "n": column}, primary_key="id"
    )
    ids = list(range(len(values)))
    typed = np.array(exact, dtype=kind.to_pandas_dtype())
    rows: Any = (
        pa.table({"id": ids, "n": pa.array(typed, kind)})
        if source == "arrow"
        else [{"id": i, "n": v} for i, v in zip(ids, typed, strict=True)]
    )
    if fits:
        table.insert(rows)
        assert _stored(table, "n") == {i: int(v) for i, v in zip(ids, exact, strict=True)}
        return
    with pytest.raises(ledger.TypeMismatchError) as refused:
        table.insert(rows)
    message = str(refused.value)
    assert f"column 'n' ({column})" in message
    assert "truncated" not in message and "Float value" not in message, message
    assert table.refresh().version == 0


# --- integers and decimals into DECIMAL ----------------------------------------------------------


@settings(max_examples=examples(60))
@given(st.data())
def test_integers_and_decimals_go_into_random_decimals_exactly_or_are_refused(data: Any) -> None:
    """Arrow's rescaling wraps around on overflow (2**60 into DECIMAL(38,34) read back as
    461.51...); every value must instead be stored unchanged or refused."""
    precision = data.draw(st.integers(1, 38), label="precision")
    scale = data.draw(st.integers(0, precision), label="scale")
    source_precision = data.draw(st.integers(1, 38), label="source precision")
    source_scale = data.draw(st.integers(0, source_precision), label="source scale")
    if data.draw(st.booleans(), label="integers"):
        arrow_type: pa.DataType = pa.int64()
        values: list[Any] = data.draw(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1))
    else:
        arrow_type = pa.decimal128(source_precision, source_scale)
        whole = 10**source_precision - 1
        values = [
            Decimal(v).scaleb(-source_scale, context=EXACT)
            for v in data.draw(st.lists(st.integers(-whole, whole), min_size=1))
        ]
    schema = TableSchema.parse({"v": f"DECIMAL({precision},{scale})"})
    for value in values:
        want = Decimal(value) if decimal_fits(Decimal(value), precision, scale) else None
        try:
            got, _ = conform(pa.table({"v": pa.array([value], arrow_type)}), schema)
        except ledger.TypeMismatchError:
            assert want is None, (value, arrow_type, precision, scale)
            continue
        assert got.column("v")[0].as_py() == want, (value, arrow_type, precision, scale)


# --- the same rules on Spark ---------------------------------------------------------------------

SPARK_FLOATS = [
    *CENTS[::7],
    1.234,
    0.125,
    1e-7,
    5e-324,
    1e-50,
    1e-40,
    2.0**-149,
    1e9,
    1e16,
    1e17,
    2.0**60,
    2.0**53 + 2,
    2.0**53,
    2.0**53 - 1,
    -(2.0**53),
    2.0**24,
    123456789012345.67,
    -4.948866469017321e18,  # Java's digits 4.9488664690173215E18 round to 17 digits at 16
    9.999999999999999e22,
    1e300,
    -0.0,
    1.5,
    -2.5,
    2.0**31,
    2.0**63,
    float("nan"),
    float("inf"),
    float("-inf"),
]
SPARK_TARGETS = ["DECIMAL(10,2)", "DECIMAL(38,2)", "DECIMAL(38,20)", "DECIMAL(18,6)", "FLOAT"]
SPARK_TARGETS += ["INTEGER", "BIGINT"]
# Integer text, in the same job: only plain decimal digits are read (tests/test_integer_text.py
# covers the embedded engine), never Arrow's or Java's other spellings.
SPARK_INTEGER_TEXTS = [
    "0x1F",
    "0xFFFFFFFFFFFFFFFF",
    "0X10",
    "0b11",
    "0o17",
    "1_000",
    "31",
    "-7",
    "+7",
    "007",
    "7.0",
    "7.5",
    "7e0",
    "1e3",
    " 7",
    "2147483648",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775809",
    "",
]
SPARK_TEXT_TARGETS = ["INTEGER", "BIGINT"]


def _embedded_outcome(value: Any, column_type: str) -> Any:
    try:
        got, _ = conform(pa.table({"v": [value]}), TableSchema.parse({"v": column_type}))
    except ledger.TypeMismatchError:
        return "refused"
    return got.column("v")[0].as_py()


@pytest.mark.spark
def test_spark_converts_doubles_like_the_embedded_engine(spark: Any) -> None:
    """Per value and target type, in one Spark job for every target (a job costs about a
    second): refused by ``lossy`` exactly when the embedded engine refuses it, and otherwise
    converted to the same value."""
    from ledger.engines.spark import convert as engine
    from ledger.schema import sql_to_arrow

    texts = SPARK_INTEGER_TEXTS + [None] * (len(SPARK_FLOATS) - len(SPARK_INTEGER_TEXTS))
    frame = spark.createDataFrame(
        [(i, v, texts[i]) for i, v in enumerate(SPARK_FLOATS)], "i int, v double, t string"
    )
    source, text = frame.schema["v"].dataType, frame.schema["t"].dataType
    columns = []
    for n, column_type in enumerate(SPARK_TARGETS):
        target = engine.spark_schema(pa.schema([pa.field("v", sql_to_arrow(column_type))]))["v"]
        columns.append(engine.lossy("v", source, target.dataType).alias(f"lossy{n}"))
        columns.append(engine.converted("v", source, target.dataType).alias(f"value{n}"))
    for n, column_type in enumerate(SPARK_TEXT_TARGETS):
        target = engine.spark_schema(pa.schema([pa.field("t", sql_to_arrow(column_type))]))["t"]
        columns.append(engine.lossy("t", text, target.dataType).alias(f"text_lossy{n}"))
        columns.append(engine.converted("t", text, target.dataType).alias(f"text_value{n}"))
    rows = frame.select("i", *columns).collect()  # one job for every value and target
    assert sorted(row["i"] for row in rows) == list(range(len(SPARK_FLOATS)))
    for row in rows:
        value = SPARK_FLOATS[row["i"]]
        for n, column_type in enumerate(SPARK_TARGETS):
            want = _embedded_outcome(value, column_type)
            got = "refused" if row[f"lossy{n}"] else row[f"value{n}"]
            nan = isinstance(got, float) and math.isnan(got) and math.isnan(want)
            assert got == want or nan, (value, column_type, got, want)
        if texts[row["i"]] is None:
            continue
        for n, column_type in enumerate(SPARK_TEXT_TARGETS):
            want = _embedded_outcome(texts[row["i"]], column_type)
            got = "refused" if row[f"text_lossy{n}"] else row[f"text_value{n}"]
            assert got == want, (texts[row["i"]], column_type, got, want)
    hexadecimal = [SPARK_INTEGER_TEXTS.index(t) for t in ("0x1F", "0xFFFFFFFFFFFFFFFF")]
    assert all(
        row[f"text_lossy{n}"]
        for row in rows
        if row["i"] in hexadecimal
        for n in range(len(SPARK_TEXT_TARGETS))
    )


@pytest.mark.spark
def test_spark_writes_floats_into_decimals_and_floats_like_the_embedded_engine(
    spark: Any, tmp_path: Any
) -> None:
    import ledger.spark as ls

    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "d": "DECIMAL(10,2)", "f": "FLOAT"}, primary_key="id"
    )
    rows = [(i, f, 0.1) for i, f in enumerate(CENTS)]
    ls.insert(table, spark.createDataFrame(rows, "id bigint, d double, f double"))
    assert _stored(table, "d") == {i: Decimal(repr(f)) for i, f in enumerate(CENTS)}
    version = table.refresh().version
    for bad in [(9000, 1.234, 0.5), (9001, 1.0, 1e-50)]:
        with pytest.raises(ledger.TypeMismatchError):
            ls.insert(table, spark.createDataFrame([bad], "id bigint, d double, f double"))
    assert table.refresh().version == version


def test_a_column_of_only_nulls_goes_into_a_decimal_column(tmp_path: Any) -> None:
    table = _fresh(ledger.connect(str(tmp_path)), "DECIMAL(10,2)")
    table.insert(pa.table({"id": [1, 2], "v": pa.nulls(2)}))
    assert _stored(table, "v") == {1: None, 2: None}


@pytest.mark.spark
def test_spark_converts_float32_into_decimals_like_the_embedded_engine(spark: Any) -> None:
    from pyspark.sql import types as T

    from ledger.engines.spark import convert as engine

    values = [0.1, 24.08, 19.99, -3.3, 1.234, 16777216.0, 3.4e38, 1e-45, float("nan")]
    frame = spark.createDataFrame([(i, v) for i, v in enumerate(values)], "i int, v float")
    source, target = frame.schema["v"].dataType, T.DecimalType(10, 2)
    rows = frame.select(
        "i",
        engine.lossy("v", source, target).alias("lossy"),
        engine.converted("v", source, target).alias("value"),
    ).collect()
    for row in sorted(rows):
        column = pa.table({"v": pa.array([values[row["i"]]], pa.float32())})
        try:
            got, _ = conform(column, TableSchema.parse({"v": "DECIMAL(10,2)"}))
            want: Any = got.column("v")[0].as_py()
        except ledger.TypeMismatchError:
            want = "refused"
        assert ("refused" if row["lossy"] else row["value"]) == want, (values[row["i"]], want)


# --- a write gets the same answer on every engine ---------------------------------------------

NUMBERS = {"k": "BIGINT", "d": "DECIMAL(12,2)", "f": "FLOAT", "n": "BIGINT", "x": "DOUBLE"}
SEED = [{"k": 1, "d": Decimal("1.00"), "f": 1.0, "n": 1, "x": 1.0}]
ONE = ("ok", (1, 0))
REFUSED = ("error", "TypeMismatchError")


def _outcome(call: Any) -> tuple[str, Any]:
    try:
        info = call()
    except ledger.LedgerError as e:
        return ("error", type(e).__name__)
    return ("ok", (info.inserted, info.deleted))


WRITES_ALIKE = [
    # (id, data, operation, the answer: accepted with (inserted, deleted), or the error)
    # A key named twice in a delete: the embedded engine deletes it once.
    ("delete-repeated-key", pa.table({"k": [1, 1]}), "delete", ("ok", (0, 1))),
    # Values that do not fit the column are refused, never rounded or overflowed.
    (
        "double-rounds-in-decimal",
        pa.table({"k": [2], "d": [0.125]}),
        "insert",
        REFUSED,
    ),
    (
        "double-with-cents-in-decimal",  # accepted by both as 24.08 (its shortest text)
        pa.table({"k": [2], "d": [24.08]}),
        "insert",
        ONE,
    ),
    (
        "double-underflows-float",
        pa.table({"k": [2], "f": [1e-50]}),
        "insert",
        REFUSED,
    ),
    (
        "decimal-scale-rounds",
        pa.table({"k": [2], "d": pa.array([Decimal("0.125")], pa.decimal128(10, 3))}),
        "insert",
        REFUSED,
    ),
    (
        "double-overflows-float",
        pa.table({"k": [2], "f": [1e300]}),
        "insert",
        REFUSED,
    ),
    (
        "bigint-rounds-in-float",
        pa.table({"k": [2], "f": [2**24 + 1]}),
        "insert",
        REFUSED,
    ),
    (
        "double-rounds-in-float",  # accepted by both: a FLOAT holds the nearest float
        pa.table({"k": [2], "f": [0.1]}),
        "insert",
        ONE,
    ),
    # Integers into floats: refused beyond the integers the float holds exactly (2**53, 2**24),
    # the Long maximum included (Spark's cast clamps it); accepted up to there.
    (
        "bigint-beyond-2**53-in-double",
        pa.table({"k": [2], "x": [2**53 + 2]}),
        "insert",
        REFUSED,
    ),
    (
        "bigint-max-in-double",
        pa.table({"k": [2], "x": [2**63 - 1]}),
        "insert",
        REFUSED,
    ),
    (
        "int-max-in-float",
        pa.table({"k": [2], "f": pa.array([2**31 - 1], pa.int32())}),
        "insert",
        REFUSED,
    ),
    (
        "2**53-in-double",
        pa.table({"k": [2], "x": [2**53]}),
        "insert",
        ONE,
    ),
    # Decimals into a DOUBLE are rounded by both, never refused.
    (
        "decimal-rounds-into-double",
        pa.table(
            {"k": [2], "x": pa.array([Decimal("0.333333333333333333")], pa.decimal128(38, 18))}
        ),
        "insert",
        ONE,
    ),
    (
        "17-digit-decimal-into-double",
        pa.table({"k": [2], "x": pa.array([Decimal("99999999999999999")], pa.decimal128(17, 0))}),
        "insert",
        ONE,
    ),
    # Controls: what both engines already agree on.
    (
        "string-for-number",
        pa.table({"k": [2], "n": ["12"]}),
        "insert",
        ONE,
    ),
    ("upsert-repeated-key", pa.table({"k": [2, 2]}), "upsert", ("error", "DuplicateKeyError")),
]


# What the accepted ones docs/concepts.md promises ("Integers into floats") read back as: (k, f, x).
PROMISED_ROWS = {"2**53-in-double": (2, None, float(2**53))}
PROMISED = {
    "bigint-beyond-2**53-in-double",
    "bigint-max-in-double",
    "bigint-rounds-in-float",
    "int-max-in-float",
    "2**53-in-double",
}


@pytest.mark.engines
@pytest.mark.parametrize(
    ("case", "data", "operation", "answer"), WRITES_ALIKE, ids=[w[0] for w in WRITES_ALIKE]
)
def test_a_write_gets_the_same_answer_on_every_engine(
    engine: Engine, tmp_path: Any, case: str, data: pa.Table, operation: str, answer: Any
) -> None:
    """Values that do not fit the column are refused, never rounded or overflowed; the integers
    a float holds exactly are accepted, any other integer is refused (docs/concepts.md). The
    embedded API on a twin table is the reference for what is visible afterwards."""
    wh = ledger.connect(str(tmp_path))
    reference = wh.create_table("reference", NUMBERS, primary_key="k")
    table = wh.create_table("t", NUMBERS, primary_key="k")
    reference.insert(SEED)
    table.insert(SEED)
    assert _outcome(lambda: getattr(reference, operation)(data)) == answer, case
    assert _outcome(lambda: engine.write(table, operation, data)) == answer, case
    assert sorted_rows(views.visible(table).fetchall()) == sorted_rows(
        views.visible(reference).fetchall()
    )
    if case in PROMISED:
        stored = table.scan().project("k, f, x").fetchall()
        expected = [(1, 1.0, 1.0)] + ([PROMISED_ROWS[case]] if case in PROMISED_ROWS else [])
        assert sorted(stored, key=repr) == sorted(expected, key=repr), case


# --- one dict column, values of several Python kinds ------------------------------------------

_CENTS = st.integers(-(10**8), 10**8)
_AMOUNT_KINDS = st.one_of(
    st.none(),
    _CENTS.map(lambda c: c / 100),  # a float with two decimals, as users type them
    _CENTS.map(lambda c: Decimal(c).scaleb(-2)),
    _CENTS.map(lambda c: str(Decimal(c).scaleb(-2))),
    st.integers(-(10**6), 10**6),
)


@settings(max_examples=examples(15), deadline=None)
@given(st.lists(_AMOUNT_KINDS, min_size=1, max_size=12))
def test_a_dict_column_of_mixed_kinds_stores_what_each_value_stores_alone(
    values: list[Any],
) -> None:
    """Floats, Decimals, text and ints for one DECIMAL column, mixed in one list of dicts: each
    row stores what it would store inserted alone (the buffered writer's rule too)."""
    with tempfile.TemporaryDirectory() as folder:
        warehouse = ledger.connect(folder)
        mixed = _fresh(warehouse, "DECIMAL(12,2)", "mixed")
        mixed.insert([{"id": i, "v": v} for i, v in enumerate(values)])
        alone = _fresh(warehouse, "DECIMAL(12,2)", "alone")
        for i, v in enumerate(values):
            alone.insert([{"id": i, "v": v}])
        assert _stored(mixed, "v") == _stored(alone, "v")


def test_datetimes_and_iso_text_mix_in_one_dict_column(tmp_path: Any) -> None:
    table = _fresh(ledger.connect(str(tmp_path)), "TIMESTAMPTZ")
    table.insert(
        [
            {"id": 1, "v": dt.datetime(2026, 3, 1, tzinfo=dt.UTC)},
            {"id": 2, "v": "2026-03-02 08:00+00:00"},
            {"id": 3, "v": None},
        ]
    )
    stored = _stored(table, "v")
    assert stored[1] == dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
    assert stored[2] == dt.datetime(2026, 3, 2, 8, tzinfo=dt.UTC)
    assert stored[3] is None


def test_a_mixed_dict_column_with_one_value_that_would_round_is_refused(tmp_path: Any) -> None:
    table = _fresh(ledger.connect(str(tmp_path)), "DECIMAL(10,2)")
    with pytest.raises(ledger.TypeMismatchError, match=r"1\.234"):
        table.insert([{"id": 1, "v": Decimal("1.00")}, {"id": 2, "v": 1.234}])
    assert table.count() == 0 and not _table_files(table)
