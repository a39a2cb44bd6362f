"""CSV sources: compressed files load like plain ones; integer columns take plain decimal
digits only (Arrow's cast also reads ``0x10``, which no CSV writer means as sixteen)."""

from __future__ import annotations

import bz2
import gzip
import re
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import ledger
import views
from tests.test_cli import as_json, run_ledger

TEXT = 'k,amount,note\n1,10.50,a\n2,-3.25,"b, with a comma"\n3,,\n'
COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    ".csv.gz": gzip.compress,
    ".csv.bz2": bz2.compress,
    ".csv.zst": lambda data: pa.compress(data, "zstd", asbytes=True),
}


def _table(root: Path) -> ledger.Table:
    return ledger.connect(str(root)).create_table(
        "t", {"k": "BIGINT", "amount": "DECIMAL(12,2)", "note": "VARCHAR"}, primary_key="k"
    )


def _decompressed_rows(table: ledger.Table) -> list[tuple[object, ...]]:
    return sorted(views.visible(table).fetchall())


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_compressed_csv_loads_like_the_plain_one(tmp_path: Path, suffix: str) -> None:
    plain, compressed = tmp_path / "plain.csv", tmp_path / f"rows{suffix}"
    plain.write_text(TEXT)
    compressed.write_bytes(COMPRESSORS[suffix](TEXT.encode()))
    want_table, got_table = _table(tmp_path / "a"), _table(tmp_path / "b")
    want_table.insert(str(plain))
    got_table.insert(str(compressed))
    assert _decompressed_rows(got_table) == _decompressed_rows(want_table)
    assert len(_decompressed_rows(got_table)) == 3


def test_a_folder_of_compressed_csv_files_loads_and_the_command_line_loads_one(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "one.csv.gz").write_bytes(gzip.compress(b"k,amount,note\n1,1.00,x\n"))
    (folder / "two.csv").write_text("k,amount,note\n2,2.00,y\n")
    table = _table(tmp_path / "wh")
    table.insert(str(folder))
    assert [r[0] for r in _decompressed_rows(table)] == [1, 2]

    run_ledger("-w", "cli", "init", cwd=tmp_path)
    run_ledger("-w", "cli", "create", "t", "--schema", "k BIGINT, note VARCHAR", cwd=tmp_path)
    (tmp_path / "rows.csv.gz").write_bytes(gzip.compress(b"k,note\n7,seven\n8,eight\n"))
    loaded = run_ledger("-w", "cli", "load", "t", "rows.csv.gz", "--json", cwd=tmp_path)
    assert as_json(loaded)["inserted"] == 2


@pytest.mark.parametrize("text", ["0x10", "0X1F", "0b11", "0o7", "1_000", "+0x1"])
def test_an_integer_column_refuses_what_is_not_plain_decimal_digits(
    tmp_path: Path, text: str
) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"k": "BIGINT", "n": "INTEGER"})
    path = tmp_path / "rows.csv"
    path.write_text(f"k,n\n1,5\n2,{text}\n")
    with pytest.raises(
        ledger.SchemaError, match=re.escape(f"'n', row 2: '{text}' is not a whole number")
    ):
        table.insert(str(path))
    assert table.count() == 0


@pytest.mark.parametrize(
    ("text", "value"), [("16", 16), ("-16", -16), ("+16", 16), (" 16 ", 16), ("1.6e1", 16)]
)
def test_an_integer_column_keeps_taking_decimal_spellings(
    tmp_path: Path, text: str, value: int
) -> None:
    table = ledger.connect(str(tmp_path)).create_table("t", {"n": "INTEGER"})
    path = tmp_path / "rows.csv"
    path.write_text(f"n\n{text}\n")
    table.insert(str(path))
    assert views.visible(table).fetchall() == [(value,)]


def test_the_command_line_refuses_a_hexadecimal_integer_and_writes_nothing(tmp_path: Path) -> None:
    run_ledger("-w", "wh", "init", cwd=tmp_path)
    run_ledger("-w", "wh", "create", "t", "--schema", "k BIGINT", cwd=tmp_path)
    (tmp_path / "rows.csv").write_text("k\n1\n0x10\n")
    refused = run_ledger("-w", "wh", "load", "t", "rows.csv", cwd=tmp_path, expect=None)
    assert refused.returncode != 0
    assert "'0x10' is not a whole number" in refused.stderr
    assert "Traceback" not in refused.stderr
    counted = run_ledger("-w", "wh", "sql", "SELECT count(*) AS n FROM t", "--json", cwd=tmp_path)
    assert as_json(counted)[0]["n"] == 0


@pytest.mark.parametrize("suffix", [".CSV.GZ", ".Csv.Bz2", ".csv.ZST"])
def test_a_compressed_csv_named_in_any_case_is_decompressed(tmp_path: Path, suffix: str) -> None:
    compress = COMPRESSORS[suffix.lower()]
    (tmp_path / f"rows{suffix}").write_bytes(compress(TEXT.encode()))
    table = _table(tmp_path / "t")
    table.insert(str(tmp_path / f"rows{suffix}"))
    assert len(_decompressed_rows(table)) == 3


def test_padded_hex_in_a_blob_column_loads_like_padded_numbers(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text('k,b\n1, 00ff\n2,"48656c6c6f "\n3,\n')
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"k": "BIGINT", "b": "BLOB"}, primary_key="k"
    )
    table.insert(str(tmp_path / "rows.csv"))
    assert _decompressed_rows(table) == [(1, b"\x00\xff"), (2, b"Hello"), (3, None)]


def test_a_blank_blob_cell_is_refused_not_read_as_empty_bytes(tmp_path: Path) -> None:
    (tmp_path / "rows.csv").write_text('k,b\n1,00ff\n2,"   "\n')
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"k": "BIGINT", "b": "BLOB"}, primary_key="k"
    )
    with pytest.raises(ledger.LedgerError, match="not hex"):
        table.insert(str(tmp_path / "rows.csv"))
    assert table.refresh().version == 0 and table.count() == 0


@pytest.mark.parametrize("name", ["d[1]", "d?", "d*"])
def test_a_folder_or_file_whose_name_holds_glob_characters_is_read_as_itself(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).mkdir()
    (tmp_path / name / "a.csv").write_text("k,amount,note\n1,1.00,mine\n")
    (tmp_path / "d1").mkdir()
    (tmp_path / "d1" / "a.csv").write_text("k,amount,note\n2,2.00,another folder\n")
    by_folder, by_file = _table(tmp_path / "a"), _table(tmp_path / "b")
    by_folder.insert(str(tmp_path / name))
    by_file.insert(str(tmp_path / name / "a.csv"))
    assert [r[2] for r in _decompressed_rows(by_folder)] == ["mine"]
    assert _decompressed_rows(by_file) == _decompressed_rows(by_folder)


@pytest.mark.parametrize("separator", [";", "\t", "|"])
def test_a_header_separated_otherwise_than_by_commas_is_named_so(tmp_path, separator):
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "o", {"order_id": "VARCHAR", "customer": "VARCHAR", "amount": "DOUBLE"}, "order_id"
    )
    path = tmp_path / "orders.csv"
    path.write_text(separator.join(["order_id", "customer", "amount"]) + "\nE;x;1.5\n")
    with pytest.raises(ledger.UnknownColumnError) as refused:
        table.insert(str(path))
    message = str(refused.value)
    assert "not commas" in message and f"sep={separator!r}" in message
    assert "evolve_schema" not in message
    assert table.version == 0
