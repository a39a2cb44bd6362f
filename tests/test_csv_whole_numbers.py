"""Integer columns from CSV files: a whole number is that number however it is written (``7``,
``7.0`` as pandas writes an integer column holding NaN, `` 7 ``, ``7e0``; written as a float,
below 2**53), as it is from every other source; a value with a fractional part, text, or a
number out of the column's range is refused with the column, the row and the value named, and
nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples

RANGES = {"SMALLINT": 2**15, "INTEGER": 2**31, "BIGINT": 2**63}
SPELLINGS = ["{}", "{}.0", "{}.00", " {} ", "{}e0"]


@st.composite
def columns(draw: st.DrawFn) -> tuple[str, list[int | None], list[str]]:
    kind = draw(st.sampled_from(sorted(RANGES)))
    bound = RANGES[kind]
    values = draw(st.lists(st.none() | st.integers(-bound, bound - 1), min_size=1, max_size=30))
    # Written as a float (a point or an exponent), a number is a float: whole ones go in below
    # 2**53 (tests/test_whole_numbers_across_sources.py refuses the larger ones).
    texts = [
        ""
        if v is None
        else draw(st.sampled_from(SPELLINGS if abs(v) < 2**53 else SPELLINGS[::3])).format(v)
        for v in values
    ]
    return kind, values, texts


@settings(max_examples=examples(40), deadline=None)
@given(column=columns())
def test_whole_numbers_however_written_load_as_those_numbers(tmp_path_factory, column):
    kind, values, texts = column
    folder = tmp_path_factory.mktemp("csv")
    table = ledger.connect(folder / "wh").create_table(
        "t", {"id": "BIGINT", "n": kind}, primary_key="id"
    )
    path = folder / "n.csv"
    path.write_text("id,n\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)))
    table.insert(str(path))
    assert sorted(views.visible(table).fetchall()) == list(enumerate(values))


@pytest.mark.parametrize(
    ("kind", "text", "message"),
    [
        ("INTEGER", "1.5", "'1.5' is not a whole number"),
        ("INTEGER", "abc", "'abc' is not a whole number"),
        ("INTEGER", "NaN", "'NaN' is not a whole number"),
        ("BIGINT", "1_000", "'1_000' is not a whole number"),
        ("BIGINT", "\uff11\uff12", "'\uff11\uff12' is not a whole number"),  # fullwidth 12
    ],
)
def test_other_values_are_refused_naming_column_and_row(tmp_path: Path, kind, text, message):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "n": kind}, primary_key="id"
    )
    path = tmp_path / "n.csv"
    path.write_text(f"id,n\n1,1\n2,2.0\n3,{text}\n")
    with pytest.raises(ledger.MalformedSourceError, match=rf"column 'n', row 3: {message}"):
        table.insert(str(path))
    assert table.version == 0
    assert not list(table.store.list(table.prefix + "_data/"))


@pytest.mark.parametrize(
    ("kind", "text", "shown"),
    [
        ("INTEGER", "3000000000", "3000000000"),
        ("SMALLINT", "40000.0", "40000"),
        ("BIGINT", "1e999999999", "1e999999999"),
        ("BIGINT", "1180591620717411303424", "1180591620717411303424"),
    ],
)
def test_a_number_out_of_range_is_refused_as_from_a_dict(tmp_path: Path, kind, text, shown):
    """The same error a list of dicts gets (TypeMismatchError, the column in the table's
    type), with the file and the row."""
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "n": kind}, primary_key="id"
    )
    path = tmp_path / "n.csv"
    path.write_text(f"id,n\n1,1\n2,2.0\n3,{text}\n")
    expected = rf"n\.csv': column 'n' \({kind}\), row 3: value {shown} is out of its range"
    with pytest.raises(ledger.TypeMismatchError, match=expected):
        table.insert(str(path))
    assert table.version == 0
    assert not list(table.store.list(table.prefix + "_data/"))
