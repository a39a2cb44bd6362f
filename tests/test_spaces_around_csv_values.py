"""Spaces around a value in a CSV field are ignored for every column type but VARCHAR, as they
are for the same text given as dicts or JSON lines (docs/concepts.md section 3): the CSV file
stores what the dicts store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

VALUES = {
    "TINYINT": ["4", "-128"],
    "SMALLINT": ["5", "007"],
    "INTEGER": ["7", "-2147483648", "7.0"],
    "BIGINT": ["-3", "+12"],
    "FLOAT": ["2.25", "-0.5"],
    "DOUBLE": ["1.5", "1e3"],
    "DECIMAL(10,2)": ["3.50", "-0.07"],
    "BOOLEAN": ["true", "False", "1", "0", "TRUE"],
    "DATE": ["2024-01-02", "2024-02-29 00:00:00"],
    "TIMESTAMP": ["2024-01-01 10:00:00", "2024-01-01T10:00:00.123456"],
    "TIMESTAMPTZ": ["2024-01-01T10:00:00Z", "2024-01-01 10:00:00+02:00"],
    "VARCHAR": ["ab", "a b"],
}
PADDING = st.sampled_from(["", " ", "  ", "\t"])


def _stored(folder: Path, kind: str, text: str, form: str) -> Any:
    folder.mkdir()
    table = ledger.connect(str(folder / "wh")).create_table(
        "t", {"id": "BIGINT", "v": kind}, primary_key="id"
    )
    data: Any = [{"id": 1, "v": text}]
    if form == "csv":
        (folder / "v.csv").write_text(f"id,v\n1,{text}\n")
        data = str(folder / "v.csv")
    elif form == "json":
        (folder / "v.jsonl").write_text(json.dumps({"id": 1, "v": text}) + "\n")
        data = str(folder / "v.jsonl")
    table.insert(data)
    return table.to_arrow().column("v").to_pylist()


@settings(max_examples=examples(15), deadline=None)
@given(data=st.data(), kind=st.sampled_from(sorted(VALUES)), before=PADDING, after=PADDING)
def test_a_csv_value_with_spaces_around_it_is_stored_as_the_same_dict_value_is(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    kind: str,
    before: str,
    after: str,
) -> None:
    text = before + data.draw(st.sampled_from(VALUES[kind])) + after
    folder = tmp_path_factory.mktemp("spaces")
    stored = {form: _stored(folder / form, kind, text, form) for form in ("dicts", "csv", "json")}
    assert stored["csv"] == stored["dicts"] == stored["json"], (kind, text)
    if kind == "VARCHAR":
        assert stored["csv"] == [text]


def test_the_reported_csv_rows_with_padded_booleans_and_timestamps_load(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "b": "BOOLEAN", "ts": "TIMESTAMPTZ", "tn": "TIMESTAMP"}
    )
    (tmp_path / "x.csv").write_text(
        "id,b,ts,tn\n1, true,,\n2,,2024-01-01T10:00:00Z ,\n3,,, 2024-01-01 10:00:00\n"
    )
    table.insert(str(tmp_path / "x.csv"))
    rows = sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"])
    assert [r["b"] for r in rows] == [True, None, None]
    assert str(rows[1]["ts"]) == "2024-01-01 10:00:00+00:00"
    assert str(rows[2]["tn"]) == "2024-01-01 10:00:00"


@pytest.mark.parametrize("field", ['""', "  ", '" "'])
def test_a_csv_boolean_field_of_spaces_alone_is_refused_naming_its_row(
    tmp_path: Path, field: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", {"id": "BIGINT", "b": "BOOLEAN"})
    (tmp_path / "x.csv").write_text(f"id,b\n1,true\n2,{field}\n")
    with pytest.raises(ledger.MalformedSourceError, match=r"column 'b' \(BOOLEAN\), row 2"):
        table.insert(str(tmp_path / "x.csv"))
    assert table.refresh().version == 0
