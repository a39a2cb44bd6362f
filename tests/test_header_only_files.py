"""A file read as holding no rows still has its columns checked: a CSV of one line is all
header (a row written without one becomes the header), so `7,a` names the columns `7` and `a`,
and a write of it is refused as a file of that header with rows would be, not taken as empty
data. A header naming the table's columns with no rows below is empty data."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import BUCKET, Location, examples

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "amount": "DECIMAL(10,2)"}
VALUES = {"id": "1", "name": "x", "amount": "2.50"}


def _table(root: Path) -> ledger.Table:
    return ledger.connect(str(root / "wh")).create_table("t", SCHEMA, primary_key="id")


def _outcome(write: Any, source: str) -> tuple[str, str]:
    try:
        info = write(source)
    except ledger.LedgerError as e:
        return type(e).__name__, str(e).replace(source, "<source>")
    return "written", "0" if info is None else str(info.inserted + info.deleted)


def test_a_one_row_csv_without_header_is_refused_naming_its_columns(tmp_path: Path) -> None:
    table = _table(tmp_path)
    (tmp_path / "one.csv").write_text("7,a\n")
    with pytest.raises(ledger.UnknownColumnError, match=r"unknown column\(s\) \['7', 'a'\]"):
        table.insert(str(tmp_path / "one.csv"))
    (tmp_path / "wrong.csv").write_text("ident,label\n")
    for write in (table.insert, table.upsert, table.update, table.check):
        with pytest.raises(ledger.UnknownColumnError, match=r"\['ident', 'label'\]"):
            write(str(tmp_path / "wrong.csv"))
    # Among other files of a folder, the file is refused and nothing is written.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("id,name,amount\n1,x,2.50\n")
    (tmp_path / "in" / "b.csv").write_text("7,a\n")
    with pytest.raises(ledger.UnknownColumnError, match=r"\['7', 'a'\]"):
        table.insert(str(tmp_path / "in"))
    assert table.version == 0 and table.count() == 0


def test_a_header_of_the_tables_columns_alone_is_empty_data(tmp_path: Path) -> None:
    table = _table(tmp_path)
    (tmp_path / "empty.csv").write_text("id,amount\n")
    pq.write_table(pa.table({"id": pa.array([], pa.int64())}), tmp_path / "empty.parquet")
    for source in ("empty.csv", "empty.parquet"):
        for write in (table.insert, table.upsert, table.update, table.delete):
            assert write(str(tmp_path / source)).version is None
    # A delete file holds keys: one without the key column says so, rows or none.
    (tmp_path / "nokey.csv").write_text("name\n")
    with pytest.raises(ledger.MissingKeyError):
        table.delete(str(tmp_path / "nokey.csv"))
    assert table.version == 0


def test_a_one_line_csv_on_s3_is_checked(s3_endpoint: Any, tmp_path: Path) -> None:
    location = Location("s3", f"s3://{BUCKET}/headers-{tmp_path.name}", s3_endpoint.options())
    table = location.connect().create_table("t", SCHEMA, primary_key="id")
    store = table.store
    with store.filesystem.open_output_stream(store.fs_path("in/a.csv")) as out:
        out.write(b"7,a\n")
    with pytest.raises(ledger.UnknownColumnError, match=r"\['7', 'a'\]"):
        table.insert(f"{location.uri}/in/")
    assert table.version == 0


_NAMES = st.lists(
    st.sampled_from(["id", "name", "amount", "ident", "Name", "7", "a", "label"]),
    min_size=1,
    max_size=4,
    unique=True,
)


@settings(max_examples=examples(15), deadline=None)
@given(names=_NAMES, operation=st.sampled_from(["insert", "upsert", "check"]))
def test_a_header_without_rows_is_checked_as_with_a_row(names: list[str], operation: str) -> None:
    """Oracle: the same header with one row of fitting values below it. Both are refused alike
    when a name is not the table's, and for an upsert when the key column is missing; both are
    accepted otherwise (the row file writes its row where it has the key, the header alone
    writes nothing)."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        table = _table(root)
        row = ",".join(VALUES.get(name, "1") for name in names)
        (root / "header.csv").write_text(",".join(names) + "\n")
        (root / "row.csv").write_text(",".join(names) + "\n" + row + "\n")
        header_only = _outcome(getattr(table, operation), str(root / "header.csv"))
        with_row = _outcome(getattr(table, operation), str(root / "row.csv"))
        if with_row[0] == "written" or (with_row[0] == "MissingKeyError" and operation != "upsert"):
            assert header_only == ("written", "0")
        else:
            assert header_only == with_row
