"""Time zones and pandas frames as users build them, converted into the table's types.

- A time-zone-aware timestamp (Arrow, Python ``datetime`` with ``tzinfo``, pandas
  ``datetime64[ns, tz]``, Spark's default ``timestamp``) goes into a TIMESTAMP column as its
  UTC time; a TIMESTAMP without zone is never taken for an instant in a TIMESTAMPTZ column.
- pandas: a key held in the index (named like the key column, MultiIndex included) is used;
  integer columns with missing values (float64 with NaN, or nullable ``Int64``) go into integer
  columns as NULLs, a non-integral value is refused by name; NaT is NULL; object columns of
  ``Decimal``, the ``string`` dtype and categoricals convert.

Expected values are computed with plain Python (``datetime.astimezone``), never the library.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
import textwrap
import zoneinfo
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import Location
from tests.support.ledger_reads import visible_rows

UTC = dt.UTC
NEW_YORK = zoneinfo.ZoneInfo("America/New_York")


def _rows(table: ledger.Table, columns: str) -> list[tuple[Any, ...]]:
    return sorted(table.scan().select(columns).fetchall(), key=repr)


def _utc_wall_time(value: dt.datetime) -> dt.datetime:
    return value.astimezone(UTC).replace(tzinfo=None)


# --- time zones --------------------------------------------------------------------------------

AWARE = [
    dt.datetime(2024, 3, 10, 1, 30, tzinfo=NEW_YORK),  # the night clocks go forward
    dt.datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK),  # the second 01:30 of the night
    dt.datetime(2024, 6, 1, 23, 59, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=5))),
    dt.datetime(2024, 1, 1, 0, 0, tzinfo=dt.timezone(dt.timedelta(hours=-9, minutes=-30))),
]


def test_aware_python_datetimes_go_into_a_timestamp_column_as_utc(location: Location) -> None:
    table = location.connect().create_table(
        "t", {"id": "BIGINT", "ts": "TIMESTAMP"}, primary_key="id"
    )
    table.insert([{"id": i, "ts": v} for i, v in enumerate(AWARE)])
    assert _rows(table, "id, ts") == [(i, _utc_wall_time(v)) for i, v in enumerate(AWARE)]


@pytest.mark.parametrize("unit", ["s", "ms", "us", "ns"])
def test_aware_arrow_timestamps_of_any_unit_go_into_a_timestamp_column_as_utc(
    tmp_path: Any, unit: str
) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "ts": "TIMESTAMP"}, primary_key="id"
    )
    values = [v.replace(microsecond=0) for v in AWARE]
    column = pa.array(values, pa.timestamp(unit, tz="Asia/Kolkata"))
    table.insert(pa.table({"id": range(len(values)), "ts": column}))
    assert _rows(table, "id, ts") == [(i, _utc_wall_time(v)) for i, v in enumerate(values)]


@settings(max_examples=60)
@given(
    st.lists(
        st.datetimes(
            min_value=dt.datetime(1900, 1, 2),
            max_value=dt.datetime(2200, 1, 1),
            timezones=st.timezones(),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_random_aware_datetimes_are_stored_as_their_utc_time(values: list[dt.datetime]) -> None:
    from ledger.schema import TableSchema, conform

    got, _ = conform(pa.table({"ts": pa.array(values)}), TableSchema.parse({"ts": "TIMESTAMP"}))
    assert got.column("ts").to_pylist() == [_utc_wall_time(v) for v in values]


def test_a_naive_timestamp_is_not_taken_for_an_instant(location: Location) -> None:
    table = location.connect().create_table(
        "t", {"id": "BIGINT", "ts": "TIMESTAMPTZ"}, primary_key="id"
    )
    with pytest.raises(ledger.TypeMismatchError, match="'ts' is TIMESTAMPTZ"):
        table.insert([{"id": 1, "ts": dt.datetime(2024, 1, 1, 12)}])
    assert table.refresh().version == 0
    assert _rows(table, "id") == []


# --- pandas frames -----------------------------------------------------------------------------

PAYMENTS = {
    "id": "BIGINT",
    "account": "VARCHAR",
    "amount": "DECIMAL(10,2)",
    "items": "INTEGER",
    "booked_at": "TIMESTAMP",
    "settled_at": "TIMESTAMPTZ",
}
CSV = """id,account,amount,items,booked_at,settled_at
1,alice,24.08,3,2024-03-10 01:30:00-05:00,2024-03-11 09:00:00+01:00
2,bob,,,2024-03-10 12:00:00+00:00,
3,,-0.5,12,,2024-07-01 00:00:00-07:00
"""


def _read_payments() -> pd.DataFrame:
    frame = pd.read_csv(io.StringIO(CSV))
    frame["booked_at"] = pd.to_datetime(frame["booked_at"], utc=True).dt.tz_convert(NEW_YORK)
    frame["settled_at"] = pd.to_datetime(frame["settled_at"], utc=True)
    return frame


def test_a_csv_read_with_pandas_is_stored_with_nulls_and_utc_times(location: Location) -> None:
    """read_csv gives float64 with NaN for the integer column, NaN for missing text and
    amounts, NaT for missing times, and zone-aware times."""
    frame = _read_payments()
    assert frame["items"].dtype == "float64"
    table = location.connect().create_table("payments", PAYMENTS, primary_key="id")
    table.insert(frame)
    assert _rows(table, ", ".join(PAYMENTS)) == [
        (
            1,
            "alice",
            Decimal("24.08"),
            3,
            dt.datetime(2024, 3, 10, 6, 30),
            dt.datetime(2024, 3, 11, 8, 0, tzinfo=UTC),
        ),
        (2, "bob", None, None, dt.datetime(2024, 3, 10, 12, 0), None),
        (3, None, Decimal("-0.50"), 12, None, dt.datetime(2024, 7, 1, 7, 0, tzinfo=UTC)),
    ]


def test_a_non_integral_value_in_a_pandas_integer_column_is_refused_by_name(
    location: Location,
) -> None:
    table = location.connect().create_table("payments", PAYMENTS, primary_key="id")
    frame = pd.read_csv(io.StringIO("id,items\n1,3\n2,\n3,2.5\n"))
    with pytest.raises(ledger.TypeMismatchError, match=r"column 'items' \(INTEGER\): value 2\.5"):
        table.insert(frame)
    assert table.refresh().version == 0
    assert _rows(table, "id") == []


def test_pandas_nullable_dtypes_convert(tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "n": "INTEGER", "x": "DOUBLE", "ok": "BOOLEAN", "s": "VARCHAR"},
        primary_key="id",
    )
    frame = pd.DataFrame(
        {
            "id": pd.array([1, 2, 3], dtype="Int64"),
            "n": pd.array([7, None, -1], dtype="Int64"),
            "x": pd.array([0.5, None, 2.0], dtype="Float64"),
            "ok": pd.array([True, None, False], dtype="boolean"),
            "s": pd.array(["a", None, "c"], dtype="string"),
        }
    )
    table.insert(frame)
    assert _rows(table, "id, n, x, ok, s") == [
        (1, 7, 0.5, True, "a"),
        (2, None, None, None, None),
        (3, -1, 2.0, False, "c"),
    ]


def test_pandas_decimals_categoricals_and_nat_convert(tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "d": "DECIMAL(10,2)", "kind": "VARCHAR", "ts": "TIMESTAMPTZ"},
        primary_key="id",
    )
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "d": [Decimal("1.5"), None, Decimal("-2.25")],
            "kind": pd.Categorical(["card", "cash", "card"]),
            "ts": pd.to_datetime(["2024-01-01 10:00", None, "2024-06-01 10:00"]).tz_localize(
                "Europe/Paris"
            ),
        }
    )
    table.insert(frame)
    assert _rows(table, "id, d, kind, ts") == [
        (1, Decimal("1.50"), "card", dt.datetime(2024, 1, 1, 9, 0, tzinfo=UTC)),
        (2, None, "cash", None),
        (3, Decimal("-2.25"), "card", dt.datetime(2024, 6, 1, 8, 0, tzinfo=UTC)),
    ]


def test_a_new_categorical_column_evolves_the_schema_as_varchar(tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert(pd.DataFrame({"id": [1], "kind": pd.Categorical(["card"])}), evolve_schema=True)
    assert table.refresh().schema == {"id": "BIGINT", "kind": "VARCHAR"}
    assert _rows(table, "id, kind") == [(1, "card")]


def test_a_key_held_in_the_pandas_index_is_used(location: Location) -> None:
    table = location.connect().create_table("payments", PAYMENTS, primary_key="id")
    frame = _read_payments().set_index("id")
    table.insert(frame[["account"]])
    table.upsert(pd.DataFrame({"items": [9]}, index=pd.Index([2], name="id")))
    assert [(r[0], r[1], r[3]) for r in visible_rows(table)] == [
        (1, "alice", None),
        (2, "bob", 9),
        (3, None, None),
    ]


@pytest.mark.parametrize(
    ("levels", "misspelt"),
    [(["ID"], "ID"), ([" id"], " id"), (["Account", "ID"], "Account"), (["account", "Id"], "Id")],
)
def test_an_index_named_like_a_column_but_for_case_says_so(
    tmp_path: Any, levels: list[str], misspelt: str
) -> None:
    """An index level that differs from a column only in case or spaces is no data: refused
    saying the index's name did not match, with the table's spelling and the rename that
    fixes it (which then goes in)."""
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "account": "VARCHAR", "n": "BIGINT"}, primary_key="id"
    )
    arrays = [[1, 2] if "id" in name.lower() else ["a", "b"] for name in levels]
    frame = pd.DataFrame({"n": [5, 6]}, index=pd.MultiIndex.from_arrays(arrays, names=levels))
    if len(levels) == 1:
        frame.index = frame.index.get_level_values(0)
    with pytest.raises(ledger.UnknownColumnError) as raised:
        table.insert(frame)
    message = str(raised.value)
    spelling = misspelt.strip().lower()
    assert f"index is named {misspelt!r}" in message, message
    assert f"the table has {spelling!r}" in message, message
    table.insert(frame.rename_axis(index={name: name.strip().lower() for name in levels}))
    assert sorted(r[0] for r in visible_rows(table)) == [1, 2]


def test_a_multi_index_key_is_used_and_an_unnamed_index_is_not_data(tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"account": "VARCHAR", "day": "DATE", "total": "BIGINT"},
        primary_key=["account", "day"],
    )
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    frame = pd.DataFrame(
        {"total": [10, 20]},
        index=pd.MultiIndex.from_arrays([["alice", "bob"], days], names=["account", "day"]),
    )
    table.insert(frame)
    # An unnamed index (here 5 and 9 after filtering) is row numbering, not a column.
    more = pd.DataFrame({"account": ["x", "carol"], "day": days, "total": [0, 30]}, index=[4, 5])
    table.insert(more[more["account"] != "x"].rename(index={5: 9}))
    assert _rows(table, "account, day, total") == [
        ("alice", days[0], 10),
        ("bob", days[1], 20),
        ("carol", days[1], 30),
    ]


def test_a_key_given_as_index_and_column_must_agree(tmp_path: Any) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "cat": "VARCHAR"}, primary_key="id"
    )
    with pytest.raises(ledger.SchemaError, match="'id' is given twice"):
        table.upsert(pd.DataFrame({"id": [1], "cat": ["x"]}, index=pd.Index([2], name="id")))
    assert table.version == 0 and table.files() == []
    # set_index(..., drop=False) keeps an equal copy beside the level: that is one key.
    table.upsert(pd.DataFrame({"id": [1, 2], "cat": ["x", "y"]}).set_index("id", drop=False))
    assert _rows(table, "id, cat") == [(1, "x"), (2, "y")]


# --- Spark -------------------------------------------------------------------------------------


@pytest.mark.spark
def test_a_spark_timestamp_goes_into_a_timestamp_column_as_utc(spark: Any, tmp_path: Any) -> None:
    """Spark's default ``timestamp`` is an instant: stored as its UTC time whatever the
    session's time zone, as the embedded engine stores the same values."""
    import ledger.spark as ls

    warehouse = ledger.connect(str(tmp_path))
    schema = {"id": "BIGINT", "ts": "TIMESTAMP"}
    on_spark = warehouse.create_table("on_spark", schema, primary_key="id")
    embedded = warehouse.create_table("embedded", schema, primary_key="id")
    rows = [(i, v) for i, v in enumerate(AWARE)]
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        ls.insert(on_spark, spark.createDataFrame(rows, "id bigint, ts timestamp"))
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
    embedded.insert([{"id": i, "ts": v} for i, v in rows])
    want = [(i, _utc_wall_time(v)) for i, v in rows]
    assert _rows(on_spark, "id, ts") == want
    assert _rows(embedded, "id, ts") == want


def test_conflicts_on_timestamptz_keys_do_not_depend_on_the_machine_time_zone(tmp_path):
    script = textwrap.dedent(
        f"""
        import datetime as dt, ledger
        wh = ledger.connect({str(tmp_path)!r})
        t = wh.create_table("ev", {{"at": "TIMESTAMPTZ", "v": "BIGINT"}}, primary_key="at")
        k = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        t.insert([{{"at": k, "v": 0}}])
        tx = t.transaction()
        tx.delete_where("v = 0")
        tx.delete([k])
        t.update([{{"at": k, "v": 5}}])
        try:
            tx.commit()
        except ledger.ConflictError:
            print("conflict")
        """
    )
    env = {**os.environ, "TZ": "America/New_York"}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "conflict"
