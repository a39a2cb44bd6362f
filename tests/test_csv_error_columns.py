"""A CSV value that does not parse into its column is named by the column's name in the header
and its row counted from 1 after the header, whatever its type and place in the file: never by
Arrow's column numbers, which count from 0."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger import inputs
from tests.conftest import examples

# Per column type: a value it takes and one it refuses.
VALUES = {
    "DOUBLE": ("2.5", "abc"),
    "DATE": ("2024-01-01", "2024-13-01"),
    "BOOLEAN": ("true", "maybe"),
    "TIMESTAMP": ("2024-01-01 00:00:00", "yesterday"),
    "TIMESTAMPTZ": ("2024-01-01 00:00:00Z", "2024-01-01 00:00:00"),
    "DECIMAL(18,2)": ("1.25", "1.255"),
    "BIGINT": ("7", "7.5"),
    "INTEGER": ("7", "9999999999"),
    "BLOB": ("00ff", "zz"),
}


@settings(max_examples=examples(30), deadline=None)
@given(
    types=st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=5),
    data=st.data(),
)
def test_a_refused_value_names_its_column_and_row(types, data):
    bad_column = data.draw(st.integers(0, len(types) - 1), label="bad column")
    rows = data.draw(st.integers(1, 5), label="rows")
    bad_row = data.draw(st.integers(1, rows), label="bad row")
    names = [f"c{i}" for i in range(len(types))]
    lines = [
        ",".join(
            [str(row)]
            + [
                VALUES[kind][1 if (i, row) == (bad_column, bad_row) else 0]
                for i, kind in enumerate(types)
            ]
        )
        for row in range(1, rows + 1)
    ]
    folder = Path(tempfile.mkdtemp())
    table = ledger.connect(folder / "wh").create_table(
        "t", {"id": "BIGINT", **dict(zip(names, types, strict=True))}, primary_key="id"
    )
    path = folder / "in.csv"
    path.write_text(",".join(["id", *names]) + "\n" + "\n".join(lines) + "\n")
    # A value out of its column's range is a TypeMismatchError, as from every other source.
    with pytest.raises((ledger.MalformedSourceError, ledger.TypeMismatchError)) as raised:
        table.insert(str(path))
    message = str(raised.value)
    kind = re.escape(f" ({types[bad_column]})")
    assert re.search(rf"column {names[bad_column]!r}({kind})?, row {bad_row}\b", message)
    assert "#" not in message.replace(str(path), "")  # no column or row numbers of Arrow's
    assert table.version == 0


def test_a_value_not_found_again_still_names_its_column(tmp_path: Path):
    path = tmp_path / "in.csv"
    path.write_text("id,amount\n1,2.5\n")
    refusal = inputs._csv_refusal(
        pafs.LocalFileSystem(),
        str(path),
        "In CSV column #1: CSV conversion error to double: invalid value 'gone'",
        {},
    )
    assert refusal == "column 'amount': CSV conversion error to double: invalid value 'gone'"


def test_an_unreadable_header_names_the_column_counted_from_one(tmp_path: Path):
    refusal = inputs._csv_refusal(
        pafs.LocalFileSystem(),
        str(tmp_path / "gone.csv"),
        "In CSV column #0: Row #3: CSV conversion error to double: invalid value 'x'",
        {},
    )
    assert refusal is not None
    assert re.fullmatch(r"column 1 of the file: CSV conversion error to double: .*", refusal)
