"""An integer written in a CSV or JSON-lines file beyond the integers its FLOAT or DOUBLE column
holds exactly (2**24, 2**53) is refused naming file, column, value and row or line, as the same
int from a dict is; within them, and written as a decimal number, it is read as ever."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

LIMITS = {"DOUBLE": 2**53, "FLOAT": 2**24}


def _write(folder: Path, source: str, value: str) -> Path:
    if source == "csv":
        path = folder / "in.csv"
        path.write_text(f"id,x\n1,1.5\n2,{value}\n")
    else:
        path = folder / "in.jsonl"
        path.write_text(f'{{"id": 1, "x": 1.5}}\n{{"id": 2, "x": {value}}}\n')
    return path


@settings(max_examples=examples(30), deadline=None)
@given(
    column_type=st.sampled_from(sorted(LIMITS)),
    source=st.sampled_from(["csv", "json"]),
    offset=st.integers(min_value=-3, max_value=3),
    sign=st.sampled_from([1, -1]),
)
def test_integer_text_beyond_a_float_is_refused_as_a_dict_int_is(
    tmp_path_factory: pytest.TempPathFactory, column_type: str, source: str, offset: int, sign: int
) -> None:
    value = sign * (LIMITS[column_type] + offset)
    folder = tmp_path_factory.mktemp("t")
    table = ledger.connect(str(folder / "wh")).create_table(
        "t", {"id": "BIGINT", "x": column_type}, primary_key="id"
    )
    path = _write(folder, source, str(value))
    try:
        table.insert([{"id": 2, "x": value}])
        alone = "stored"
    except ledger.TypeMismatchError:
        alone = "refused"
    fresh = ledger.connect(str(folder / "wh2")).create_table(
        "t", {"id": "BIGINT", "x": column_type}, primary_key="id"
    )
    if alone == "refused":
        with pytest.raises(ledger.TypeMismatchError, match=rf"{path.name}.*'x'.*{value}"):
            fresh.insert(str(path))
        assert fresh.refresh().version == 0
    else:
        fresh.insert(str(path))
        assert dict(fresh.scan().select("id, x").fetchall())[2] == float(value)


@pytest.mark.parametrize("source", ["csv", "json"])
def test_a_large_number_written_with_a_point_is_a_float_as_ever(
    tmp_path: Path, source: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "x": "DOUBLE"}, primary_key="id"
    )
    table.insert(str(_write(tmp_path, source, "9007199254740993.0")))
    assert dict(table.scan().select("id, x").fetchall())[2] == 9007199254740992.0
