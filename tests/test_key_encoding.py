"""Integer, timestamp, date and time columns not dictionary-encoded are written
DELTA_BINARY_PACKED (docs/format.md): files are sorted by key, so the key steps by small amounts,
and value columns spanning less than their type step in fewer bits than they take. Keys and
values at the limits of their type (steps that overflow the type), and NULLs among values, read
back exactly, through every read a correction, a view and a merge make.
"""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.writer import delta_encoded
from tests.conftest import Location, examples

_LIMITS = {
    "TINYINT": (-(2**7), 2**7 - 1),
    "INTEGER": (-(2**31), 2**31 - 1),
    "BIGINT": (-(2**63), 2**63 - 1),
    "SMALLINT": (-(2**15), 2**15 - 1),
}


def _key_encodings(table: ledger.Table, column: str) -> set[str]:
    encodings: set[str] = set()
    for path in table.files():
        metadata = pq.read_metadata(path)
        index = metadata.schema.names.index(column)
        for group in range(metadata.num_row_groups):
            encodings |= set(metadata.row_group(group).column(index).encodings)
    return encodings


def test_integer_keys_are_delta_encoded(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "t", {"k": "BIGINT", "name": "VARCHAR"}, primary_key="k"
    )
    table.insert([{"k": k, "name": f"n{k}"} for k in range(1000)])
    assert "DELTA_BINARY_PACKED" in _key_encodings(table, "k")
    assert "DELTA_BINARY_PACKED" not in _key_encodings(table, "name")


def test_integer_and_time_columns_not_in_a_dictionary_are_delta_encoded() -> None:
    schema = pa.schema(
        [
            ("a", pa.int64()),
            ("b", pa.string()),
            ("c", pa.int8()),
            ("d", pa.float64()),
            ("e", pa.timestamp("us", tz="UTC")),
            ("f", pa.date32()),
            ("g", pa.decimal128(18, 2)),
            ("h", pa.bool_()),
            ("i", pa.time64("us")),
            ("trx_seq", pa.int32()),
        ]
    )
    delta = "DELTA_BINARY_PACKED"
    assert delta_encoded(schema, dictionary=["a", "c"]) == {
        "trx_seq": delta,
        "e": delta,
        "f": delta,
        "i": delta,
    }
    assert delta_encoded(schema, dictionary=[]) == {
        "trx_seq": delta,
        "a": delta,
        "c": delta,
        "e": delta,
        "f": delta,
        "i": delta,
    }


def test_value_columns_of_many_values_are_delta_encoded(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "t", {"k": "BIGINT", "v": "BIGINT", "ts": "TIMESTAMP", "x": "DOUBLE"}, primary_key="k"
    )
    start = datetime.datetime(2024, 1, 1)
    table.insert(
        [
            {"k": k, "v": k * 7919, "ts": start + datetime.timedelta(seconds=k), "x": k / 3}
            for k in range(1000)
        ]
    )
    assert "DELTA_BINARY_PACKED" in _key_encodings(table, "v")
    assert "DELTA_BINARY_PACKED" in _key_encodings(table, "ts")
    assert "DELTA_BINARY_PACKED" not in _key_encodings(table, "x")


@pytest.mark.parametrize("key_type", sorted(_LIMITS))
def test_keys_at_the_limits_of_their_type(local_location: Location, key_type: str) -> None:
    low, high = _LIMITS[key_type]
    keys = [low, low + 1, 0, 1, high - 1, high]
    table = local_location.connect().create_table(
        "t", {"k": key_type, "v": "BIGINT"}, primary_key="k", policy="collapsing"
    )
    table.insert([{"k": k, "v": i} for i, k in enumerate(keys)])
    table.insert([{"k": low + 2 if low < 0 else 2, "v": 99}])
    assert "DELTA_BINARY_PACKED" in _key_encodings(table, "k")
    assert table.update([{"k": high, "v": -1}, {"k": low, "v": -2}]).inserted == 2
    assert table.delete([high - 1]).deleted == 1
    expected = {k: i for i, k in enumerate(keys)} | {high: -1, low: -2}
    expected[low + 2 if low < 0 else 2] = 99
    del expected[high - 1]
    assert _visible(table) == expected
    assert table.merge(min_files=1).files_out == 1
    assert _visible(table) == expected
    assert table.update([{"k": high, "v": 7}]).inserted == 1
    assert _visible(table) == expected | {high: 7}


def _visible(table: ledger.Table) -> dict[int, int]:
    rows = views.visible(table).to_arrow_table().to_pylist()
    return {row["k"]: row["v"] for row in rows}


@settings(max_examples=examples(12), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.lists(
            st.tuples(
                st.integers(-(2**63), 2**63 - 1) | st.integers(-3, 3),
                st.integers(-5, 5),
            ),
            min_size=1,
            max_size=6,
            unique_by=lambda row: row[0],
        ),
        min_size=1,
        max_size=4,
    ),
    merge_after=st.integers(0, 4),
)
def test_upserts_of_any_bigint_keys_match_a_plain_dict(
    tmp_path_factory: Any, batches: list[list[tuple[int, int]]], merge_after: int
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("keys")))
    table = warehouse.create_table("t", {"k": "BIGINT", "v": "BIGINT"}, primary_key="k")
    oracle: dict[int, int] = {}
    for number, batch in enumerate(batches):
        table.upsert([{"k": k, "v": v} for k, v in batch])
        oracle.update(dict(batch))
        if number + 1 == merge_after:
            table.merge(min_files=1)
    assert _visible(table) == oracle
    found = table.transaction().lookup(list(oracle)).to_pylist()
    assert {row["k"]: row["v"] for row in found} == oracle


_VALUE_TYPES = {
    "BIGINT": st.integers(-(2**63), 2**63 - 1),
    "INTEGER": st.integers(-(2**31), 2**31 - 1),
    "SMALLINT": st.integers(-(2**15), 2**15 - 1),
    "DATE": st.dates(),
    "TIMESTAMP": st.datetimes(),
}


@settings(max_examples=examples(10), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    value_type=st.sampled_from(sorted(_VALUE_TYPES)),
    data=st.data(),
    merge_after=st.integers(0, 3),
)
def test_delta_encoded_values_at_any_value_match_a_plain_dict(
    tmp_path_factory: Any, value_type: str, data: st.DataObject, merge_after: int
) -> None:
    """Values anywhere in their type's range, NULL among them, through corrections, lookups, the
    visible view and a merge."""
    values = _VALUE_TYPES[value_type] | st.none()
    batches = data.draw(
        st.lists(
            st.dictionaries(st.integers(0, 40), values, min_size=1, max_size=40),
            min_size=1,
            max_size=3,
        )
    )
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("values")))
    table = warehouse.create_table("t", {"k": "BIGINT", "v": value_type}, primary_key="k")
    oracle: dict[int, Any] = {}
    for number, batch in enumerate(batches):
        table.upsert([{"k": k, "v": v} for k, v in batch.items()])
        oracle.update(batch)
        if number + 1 == merge_after:
            table.merge(min_files=1)
    assert _visible(table) == oracle
    found = table.transaction().lookup(list(oracle)).to_pylist()
    assert {row["k"]: row["v"] for row in found} == oracle
