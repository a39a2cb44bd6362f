"""Integer key columns are written DELTA_BINARY_PACKED (docs/format.md): files are sorted by key,
so the key steps by small amounts. Keys at the limits of their type (steps that overflow the
type) read back exactly, through every read a correction, a view and a merge make.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.writer import delta_encoded
from tests.conftest import Location

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


def test_text_keys_and_dictionary_keys_are_not_delta_encoded() -> None:
    schema = pa.schema([("a", pa.int64()), ("b", pa.string()), ("trx_seq", pa.int32())])
    chosen = delta_encoded(schema, ["a", "b"], dictionary=["a"])
    assert chosen == {"trx_seq": "DELTA_BINARY_PACKED"}
    assert delta_encoded(schema, ["a", "b"], dictionary=[]) == {
        "trx_seq": "DELTA_BINARY_PACKED",
        "a": "DELTA_BINARY_PACKED",
    }


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


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
