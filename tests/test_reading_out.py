"""Reading a table out in one call: Table.to_arrow, to_pandas and to_polars, with version,
timestamp, where and columns; DECIMAL stays exact and time zones stay UTC; views take rollups."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import Location, examples

SCHEMA = {
    "payment_id": "VARCHAR",
    "account": "VARCHAR",
    "amount": "DECIMAL(18,2)",
    "paid_at": "TIMESTAMPTZ",
}


def _payments(warehouse: ledger.Warehouse) -> ledger.Table:
    table = warehouse.create_table("payments", SCHEMA, primary_key="payment_id")
    paris = dt.timezone(dt.timedelta(hours=2))
    table.insert(
        [
            {
                "payment_id": "P-1",
                "account": "alice",
                "amount": Decimal("0.10"),
                "paid_at": dt.datetime(2026, 5, 1, 10, 0, tzinfo=paris),
            },
            {"payment_id": "P-2", "account": "bob", "amount": Decimal("0.20"), "paid_at": None},
            {"payment_id": "P-3", "account": "čaj ☕", "amount": Decimal("1.05"), "paid_at": None},
        ]
    )
    table.update([{"payment_id": "P-2", "amount": Decimal("0.25")}])
    table.delete(["P-3"])
    return table


def _by_id(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {r["payment_id"]: r for r in rows}


def test_to_arrow_reads_the_visible_rows_on_each_backend(location: Location) -> None:
    table = _payments(location.connect())
    arrow = table.to_arrow()
    assert arrow.schema.field("amount").type == pa.decimal128(18, 2)
    assert arrow.schema.field("paid_at").type == pa.timestamp("us", tz="UTC")
    rows = _by_id(arrow.to_pylist())
    assert set(rows) == {"P-1", "P-2"}
    assert rows["P-2"]["amount"] == Decimal("0.25")
    assert rows["P-1"]["paid_at"] == dt.datetime(2026, 5, 1, 8, 0, tzinfo=dt.UTC)


def test_to_pandas_keeps_decimals_exact_and_times_in_utc(location: Location) -> None:
    table = _payments(location.connect())
    frame = table.to_pandas().set_index("payment_id").sort_index()
    assert frame["amount"].dtype == object
    assert all(isinstance(v, Decimal) for v in frame["amount"])
    # 0.1 + 0.25 is exactly 0.35 in decimal, never 0.35000000000000003.
    assert frame["amount"].sum() == Decimal("0.35")
    assert str(frame["paid_at"].dtype) == "datetime64[us, UTC]"
    assert frame.loc["P-1", "paid_at"] == pd.Timestamp("2026-05-01 08:00", tz="UTC")
    assert pd.isna(frame.loc["P-2", "paid_at"])


def test_to_polars_reads_the_same_rows(local_location: Location) -> None:
    polars = pytest.importorskip("polars")
    table = _payments(local_location.connect())
    frame = table.to_polars(columns=["payment_id", "amount"]).sort("payment_id")
    assert isinstance(frame, polars.DataFrame)
    assert frame.columns == ["payment_id", "amount"]
    assert frame.schema["amount"] == polars.Decimal(18, 2)
    assert frame.rows() == [("P-1", Decimal("0.10")), ("P-2", Decimal("0.25"))]


def test_version_timestamp_where_and_columns(location: Location) -> None:
    table = _payments(location.connect())
    first = table.to_pandas(version=1).set_index("payment_id")
    assert sorted(first.index) == ["P-1", "P-2", "P-3"]
    assert first.loc["P-2", "amount"] == Decimal("0.20")
    after_update = table.history()[2].timestamp
    at_time = table.to_arrow(timestamp=after_update, columns="payment_id")
    assert at_time.column_names == ["payment_id"]
    assert sorted(at_time.column("payment_id").to_pylist()) == ["P-1", "P-2", "P-3"]
    picked = table.to_arrow(where="amount > 0.2 AND account <> 'alice'", columns=["account"])
    assert picked.to_pylist() == [{"account": "bob"}]
    assert table.to_arrow(where="account = 'nobody'").num_rows == 0


def test_an_empty_table_reads_as_no_rows_with_its_schema(local_location: Location) -> None:
    table = local_location.connect().create_table("empty", SCHEMA, primary_key="payment_id")
    arrow = table.to_arrow()
    assert arrow.num_rows == 0
    assert arrow.column_names == list(SCHEMA)
    assert table.to_pandas().empty


@pytest.mark.parametrize(
    ("arguments", "error", "said"),
    [
        ({"where": "amont > 1"}, ledger.UnknownColumnError, "amont"),
        ({"where": "amount >> and ("}, ledger.InvalidPredicateError, "cannot parse"),
        ({"where": "amount + 1"}, ledger.InvalidPredicateError, "not a condition"),
        ({"where": ""}, ledger.InvalidPredicateError, "non-empty"),
        ({"columns": ["nope"]}, ledger.UnknownColumnError, "nope"),
        ({"columns": []}, ledger.InvalidArgumentError, "no column"),
        ({"columns": ["account", "account"]}, ledger.InvalidArgumentError, "repeats"),
        ({"columns": 3}, ledger.InvalidArgumentError, "list of column names"),
        ({"version": 99}, ledger.SnapshotNotFoundError, "99"),
        ({"version": 1, "timestamp": 5}, ledger.InvalidArgumentError, "not both"),
    ],
)
def test_bad_read_arguments_are_typed_errors(
    local_location: Location, arguments: dict[str, Any], error: type[Exception], said: str
) -> None:
    table = _payments(local_location.connect())
    with pytest.raises(error, match=said) as caught:
        table.to_arrow(**arguments)
    assert "\x1b[" not in str(caught.value)


def test_predicate_errors_quote_the_users_predicate_not_generated_sql(
    local_location: Location,
) -> None:
    table = _payments(local_location.connect())
    with pytest.raises(ledger.InvalidPredicateError) as caught:
        table.delete_where("amount + 'x' > 1")
    message = str(caught.value)
    assert "amount + 'x' > 1" in message
    assert "SELECT" not in message and "ledger_entries" not in message
    with pytest.raises(ledger.InvalidPredicateError) as caught:
        views.totals(table, where="account + 1 > 0")
    assert "account + 1 > 0" in str(caught.value)
    assert "SELECT" not in str(caught.value) and "checked_rows" not in str(caught.value)
    with pytest.raises(ledger.InvalidPredicateError) as caught:
        table.delete_where("amount >> and (")
    assert "\x1b[" not in str(caught.value)
    assert table.count() == 2  # nothing was deleted


# Each example writes a table: 25 lists of up to 30 amounts each (hypothesis tries the bounds and
# repeated values among them first; `make test-deep` runs hundreds).
@settings(max_examples=examples(25))
@given(cents=st.lists(st.integers(min_value=-(10**6), max_value=10**6), min_size=1, max_size=30))
def test_pandas_sums_of_two_decimal_amounts_are_exact(
    tmp_path_factory: Any, cents: list[int]
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    table = warehouse.create_table("t", {"id": "BIGINT", "amount": "DECIMAL(18,2)"}, "id")
    amounts = [Decimal(c).scaleb(-2) for c in cents]
    table.insert([{"id": i, "amount": a} for i, a in enumerate(amounts)])
    assert table.to_pandas()["amount"].sum() == sum(amounts)


def test_views_take_a_rollup_as_they_take_a_table(local_location: Location) -> None:
    warehouse = local_location.connect()
    events = warehouse.create_table(
        "events", {"id": "BIGINT", "user": "VARCHAR", "secs": "BIGINT"}, "id"
    )
    events.insert([{"id": 1, "user": "a", "secs": 5}, {"id": 2, "user": "a", "secs": 7}])
    rollup = events.create_rollup("per_user", by="user", measures={"secs": "sum(secs)"})
    assert views.visible(rollup).fetchall() == views.visible(rollup.table).fetchall()
    assert views.totals(rollup, by="user", sum="secs").fetchall() == [("a", 1, 12)]
    events.insert([{"id": 3, "user": "b", "secs": 1}])
    rollup.refresh()
    changed = views.changes(rollup, since_version=rollup.table.version - 1).fetchall()
    assert len(changed) == 1
    assert sorted(views.rows(rollup, columns=["user"]).column("user").to_pylist()) == ["a", "b"]


def test_changes_past_the_latest_version_names_since_version(local_location: Location) -> None:
    table = _payments(local_location.connect())
    with pytest.raises(ledger.InvalidArgumentError) as caught:
        views.changes(table, since_version=table.version + 5)
    message = str(caught.value)
    assert "since_version" in message and "until" not in message
    assert str(table.version) in message


def test_timestamps_before_the_first_commit_are_shown_as_iso_times(
    local_location: Location,
) -> None:
    table = _payments(local_location.connect())
    long_ago = dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    with pytest.raises(ledger.SnapshotNotFoundError) as caught:
        table.to_arrow(timestamp=long_ago)
    assert "2001-02-03T04:05:06" in str(caught.value)
    assert str(int(long_ago.timestamp() * 1000)) not in str(caught.value)


_OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete"]),
        st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=4, unique=True),
        st.integers(min_value=-500, max_value=500),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=examples(15))
@given(operations=_OPERATIONS, threshold=st.integers(min_value=-300, max_value=300))
def test_to_arrow_matches_a_plain_dict_model(
    tmp_path_factory: Any, operations: list[tuple[str, list[int], int]], threshold: int
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    table = warehouse.create_table("t", {"id": "BIGINT", "amount": "DECIMAL(9,2)"}, "id")
    model: dict[int, Decimal] = {}
    at_version: dict[int, dict[int, Decimal]] = {}
    for operation, keys, cents in operations:
        if operation == "upsert":
            rows = [{"id": k, "amount": Decimal(cents + k).scaleb(-2)} for k in keys]
            info = table.upsert(rows)
            model.update({r["id"]: r["amount"] for r in rows})
        else:
            info = table.delete(keys)
            for k in keys:
                model.pop(k, None)
        if info.version is not None:
            at_version[info.version] = dict(model)
    limit = Decimal(threshold).scaleb(-2)
    read = table.to_arrow(where=f"amount >= {limit}", columns=["amount", "id"])
    assert read.column_names == ["amount", "id"]
    assert sorted((r["id"], r["amount"]) for r in read.to_pylist()) == sorted(
        (k, v) for k, v in model.items() if v >= limit
    )
    # Time travel: every committed version reads as the model did right after that write.
    for version, expected in at_version.items():
        frame = table.to_pandas(version=version)
        assert dict(zip(frame["id"], frame["amount"], strict=True)) == expected


_INTEGER_TYPES = {"SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}


@settings(max_examples=examples(10))
@given(
    kind=st.sampled_from(sorted(_INTEGER_TYPES)),
    data=st.data(),
)
def test_integer_columns_with_nulls_read_into_pandas_exactly(
    tmp_path_factory: Any, kind: str, data: st.DataObject
) -> None:
    """An integer column holding NULL comes out in pandas' nullable integer dtype (``Int64``),
    never as float64, which would round values beyond 2**53; one without NULL stays int64."""
    bound = _INTEGER_TYPES[kind]
    big = st.integers(min_value=2**53 - 2, max_value=bound - 1) if kind == "BIGINT" else st.none()
    value = st.none() | st.integers(min_value=-bound, max_value=bound - 1) | big
    values = data.draw(st.lists(value, min_size=1, max_size=12))
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    table = warehouse.create_table("t", {"id": "BIGINT", "n": kind}, "id")
    table.insert([{"id": i, "n": v} for i, v in enumerate(values)])
    frame = table.to_pandas().sort_values("id")
    assert [None if v is pd.NA else int(v) for v in frame["n"]] == values
    expected = {"SMALLINT": "int16", "INTEGER": "int32", "BIGINT": "int64"}[kind]
    if None in values:
        expected = expected.capitalize()
    assert str(frame["n"].dtype) == expected
    assert str(frame["id"].dtype) == "int64"


def test_a_big_id_beside_a_null_reads_into_pandas_exactly(local_location: Location) -> None:
    table = local_location.connect().create_table("t", {"id": "BIGINT", "n": "BIGINT"}, "id")
    table.insert([{"id": 1, "n": 2**53 + 1}, {"id": 2, "n": None}])
    frame = table.to_pandas(columns=["n", "id"]).sort_values("id")
    assert list(frame.columns) == ["n", "id"]
    assert frame["n"].iloc[0] == 2**53 + 1
    assert frame["n"].iloc[1] is pd.NA
