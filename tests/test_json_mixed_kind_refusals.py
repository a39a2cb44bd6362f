"""A JSON-lines column whose lines mix numbers (or booleans) and text takes a value only if the
same line alone is taken, and a refusal names the refused value itself: its own line, its text
as written and its JSON kind (a number is not called text, nor text a number), in the words of
the column's type (an integer's range, a BOOLEAN or DATE taking no number). A BOOLEAN column
takes no JSON number, as a dict's BOOLEAN takes no int; a number beyond a double goes into a
VARCHAR column as its JSON text, as every other number does."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

COLUMN_TYPES = ["BOOLEAN", "BIGINT", "INTEGER", "DOUBLE", "FLOAT", "DECIMAL(10,2)", "DATE"]
NOT_TEXT = [
    "7",
    "0",
    "1",
    "-0.0",
    "2.2",
    "1.005",
    "1e39",
    "1e400",
    "9007199254740993",
    "12345678901234567890",
    "true",
]
TEXT = ['"x"', '"3.30"', '"1"', '"true"', '"2024-01-02"', '"1e400"', '"7"']
NUMBERS = itertools.count()


def _outcome(table: ledger.Table, folder: Path, values: list[str]) -> str | None:
    """None when ``table.check`` takes the file of ``values`` (one line each), else its
    refusal's message."""
    path = folder / f"f{next(NUMBERS)}.jsonl"
    path.write_text("".join(f'{{"id":{i},"x":{v}}}\n' for i, v in enumerate(values)))
    try:
        table.check(str(path))
    except ledger.LedgerError as refused:
        return str(refused)
    return None


@settings(max_examples=examples(25), deadline=None)
@given(
    sql_type=st.sampled_from(COLUMN_TYPES),
    other=st.sampled_from(NOT_TEXT),
    text=st.sampled_from(TEXT),
    text_first=st.booleans(),
)
@example(sql_type="DATE", other="7", text='"x"', text_first=False)
@example(sql_type="DATE", other="true", text='"x"', text_first=False)
@example(sql_type="DATE", other="-0.0", text='"x"', text_first=False)
@example(sql_type="BOOLEAN", other="2.2", text='"3.30"', text_first=False)
@example(sql_type="BIGINT", other="12345678901234567890", text='"1"', text_first=False)
@example(sql_type="BIGINT", other="2.2", text='"3.30"', text_first=False)
@example(sql_type="DOUBLE", other="9007199254740993", text='"1"', text_first=True)
def test_a_mixed_column_refuses_the_value_refused_alone_naming_it(
    tmp_path: Path, sql_type: str, other: str, text: str, text_first: bool
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        f"t{next(NUMBERS)}", {"id": "BIGINT", "x": sql_type}, primary_key="id"
    )
    values = [text, other] if text_first else [other, text]
    alone = [_outcome(table, tmp_path, [v]) for v in values]
    mixed = _outcome(table, tmp_path, values)
    refused = [i for i, outcome in enumerate(alone) if outcome is not None]
    if not refused:
        assert mixed is None, (values, mixed)
        return
    assert mixed is not None, (values, alone)
    # The refusal names a value refused alone, on that value's own line.
    named = [i for i in refused if f"(line {i + 1}: " in mixed]
    assert len(named) == 1, (values, alone, mixed)
    value = values[named[0]]
    shown = value.strip('"')
    if value.startswith('"'):  # text: named as text, never as a number
        assert shown in mixed and "JSON number" not in mixed, (values, mixed)
    else:  # a number or boolean, named as what it is
        assert not re.search(rf"text '{re.escape(shown)}'", mixed), (values, mixed)
        assert "JSON string" not in mixed and "Failed to parse" not in mixed, (values, mixed)
        assert shown in mixed, (values, mixed)
        if "JSON boolean" in mixed or "JSON number" in mixed:
            kind = "boolean" if value in ("true", "false") else "number"
            assert f"JSON {kind}" in mixed, (values, mixed)


@pytest.mark.parametrize("lines", [["1", "0"], ["true", "1"], ["1.0"], ['"true"', "2"]])
def test_a_boolean_column_takes_no_json_number(tmp_path: Path, lines: list[str]) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "b": "BOOLEAN"}, primary_key="id"
    )
    path = tmp_path / "b.jsonl"
    path.write_text("".join(f'{{"id":{i},"b":{v}}}\n' for i, v in enumerate(lines)))
    number = next(i for i, v in enumerate(lines) if v[0].isdigit())
    with pytest.raises(ledger.TypeMismatchError, match=r"is a JSON number") as refused:
        table.insert(str(path))
    assert f"value {lines[number]} is a JSON number" in str(refused.value)
    assert f"(line {number + 1}: " in str(refused.value)
    with pytest.raises(ledger.TypeMismatchError):
        table.insert([{"id": 0, "b": 1}])  # as a dict's number is refused
    assert table.count() == 0


@pytest.mark.parametrize(
    ("sql_type", "says"),
    [
        ("DECIMAL(10,2)", "a DECIMAL(10,2) holds numbers of up to 8 whole digit(s)"),
        ("BOOLEAN", "value 1e400 is a JSON number, and a BOOLEAN column takes true or false"),
        ("DATE", "value 1e400 is a JSON number, and a DATE column is read from date text"),
        ("BIGINT", "a BIGINT holds whole numbers from"),
        ("DOUBLE", "a DOUBLE holds magnitudes up to about 1.8e308"),
    ],
)
def test_a_number_beyond_a_double_is_refused_in_its_column_s_words(
    tmp_path: Path, sql_type: str, says: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR", "x": sql_type}, primary_key="id"
    )
    path = tmp_path / "big.jsonl"
    path.write_text('{"id":1,"s":1e400,"x":null}\n{"id":2,"s":"a","x":1e400}\n')
    with pytest.raises(ledger.TypeMismatchError) as refused:
        table.insert(str(path))
    assert says in str(refused.value) and "(line 2: " in str(refused.value), refused.value


def test_a_number_beyond_a_double_goes_into_varchar_as_written(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id"
    )
    for number, lines in enumerate(
        [["1e400"], ['"a"', "-1E400"], ["1e308", "1e400"], ["1", "2", "1e400"]]
    ):
        path = tmp_path / f"v{number}.jsonl"
        path.write_text("".join(f'{{"id":{i},"s":{v}}}\n' for i, v in enumerate(lines)))
        table.insert(str(path))
        stored = table.to_arrow().sort_by("id").column("s").to_pylist()
        assert stored == [v.strip('"') for v in lines], (lines, stored)
        table.delete(list(range(len(lines))))
