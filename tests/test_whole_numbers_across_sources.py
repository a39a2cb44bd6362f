"""A number into an integer column follows one rule from dicts, pandas, CSV and JSON lines: an
integer (plain digits) goes in when it is in the column's range; a float (a Python or numpy
float, or a number written with a point or an exponent: ``3.0``, ``3e0``) goes in when it is a
whole number in range and below 2**53 in magnitude, where a float still tells neighbouring
integers apart (docs/concepts.md section 3), and is refused otherwise, before anything is
written."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

RANGES = {"INTEGER": 2**31, "BIGINT": 2**63}
LIMIT = 2**53
SPELLINGS = ["{}", "{}.0", "{}.00", "{}e0", "{}.5"]


def _expected(kind: str, value: int, spelling: str, form: str) -> int | None:
    """The stored value, or None when refused. Dicts and pandas hold a float, which is the
    number it rounds to (``9007199254740989.5`` is the whole float 9007199254740990); a file
    holds the text as written."""
    bound = RANGES[kind]
    if form in ("dicts", "pandas") and spelling != "{}":
        number = float(spelling.format(value))
        if not number.is_integer():
            return None
        value = int(number)
    elif spelling == "{}.5":
        return None
    if not -bound <= value < bound:
        return None
    if spelling != "{}" and abs(value) >= LIMIT:
        return None
    return value


def _source(form: str, folder: Path, value: int, spelling: str) -> Any:
    text = spelling.format(value)
    number: Any = int(text) if spelling == "{}" else float(text)
    if form == "dicts":
        return [{"id": 1, "n": number}]
    if form == "pandas":
        return pd.DataFrame({"id": [1], "n": [number]})
    if form == "csv":
        (folder / "n.csv").write_text(f"id,n\n1,{text}\n")
        return str(folder / "n.csv")
    (folder / "n.jsonl").write_text(f'{{"id": 1, "n": {text}}}\n')
    return str(folder / "n.jsonl")


VALUES = st.one_of(
    st.integers(-(2**31) - 2, 2**31 + 1),
    st.integers(LIMIT - 3, LIMIT + 3).map(lambda v: v * (1 if v % 2 else -1)),
    st.integers(2**63 - 2, 2**63 + 1),
)


def test_a_float_is_the_whole_number_it_rounds_to_while_its_text_is_a_fraction(
    tmp_path: Path,
) -> None:
    stored = {}
    for form in ("dicts", "json"):
        folder = tmp_path / form
        table = ledger.connect(str(folder / "wh")).create_table(
            "t", {"id": "BIGINT", "n": "BIGINT"}, primary_key="id"
        )
        try:
            table.insert(_source(form, folder, 9007199254740989, "{}.5"))
            stored[form] = table.to_arrow().column("n").to_pylist()
        except ledger.LedgerError:  # a file's value is refused naming its line
            stored[form] = None
    assert stored == {"dicts": [9007199254740990], "json": None}


@settings(max_examples=examples(12), deadline=None)
@given(kind=st.sampled_from(sorted(RANGES)), value=VALUES, spelling=st.sampled_from(SPELLINGS))
def test_every_source_takes_a_number_into_an_integer_column_by_one_rule(
    tmp_path_factory: pytest.TempPathFactory, kind: str, value: int, spelling: str
) -> None:
    for form in ("dicts", "pandas", "csv", "json"):
        expected = _expected(kind, value, spelling, form)
        if form == "pandas" and spelling == "{}" and not -(2**63) <= value < 2**64:
            continue  # pandas cannot hold the integer at all
        folder = tmp_path_factory.mktemp(form)
        table = ledger.connect(str(folder / "wh")).create_table(
            "t", {"id": "BIGINT", "n": kind}, primary_key="id"
        )
        data = _source(form, folder, value, spelling)
        if expected is None:
            with pytest.raises(ledger.LedgerError):
                table.insert(data)
            assert table.refresh().version == 0, form
        else:
            table.insert(data)
            assert table.to_arrow().column("n").to_pylist() == [expected], form


@pytest.mark.parametrize("text", ["1.0", "3e0", "-2.00"])
def test_a_whole_json_number_with_a_point_goes_into_an_integer_column(
    tmp_path: Path, text: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "n": "INTEGER"}, primary_key="id"
    )
    (tmp_path / "n.jsonl").write_text(f'{{"id": 1, "n": 7}}\n{{"id": 2, "n": {text}}}\n')
    table.insert(str(tmp_path / "n.jsonl"))
    assert sorted(table.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "n": 7},
        {"id": 2, "n": int(float(text))},
    ]


@pytest.mark.parametrize(
    ("form", "says"),
    [("json", r"n\.jsonl.*line 2"), ("csv", r"n\.csv.*row 2")],
)
def test_a_big_float_written_in_a_file_is_refused_naming_where(
    tmp_path: Path, form: str, says: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "n": "BIGINT"}, primary_key="id"
    )
    if form == "json":
        rows = [{"id": 1, "n": 9007199254740993}, {"id": 2, "n": 9007199254740993.0}]
        (tmp_path / "n.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        data = str(tmp_path / "n.jsonl")
    else:
        (tmp_path / "n.csv").write_text("id,n\n1,9007199254740993\n2,9007199254740992.0\n")
        data = str(tmp_path / "n.csv")
    with pytest.raises(ledger.TypeMismatchError, match=r"9007199254740992\.0.*2\*\*53") as caught:
        table.insert(data)
    assert re.search(says, str(caught.value))
    assert table.version == 0
