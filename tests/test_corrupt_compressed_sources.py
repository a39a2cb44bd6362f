"""A compressed CSV file whose bytes are no valid stream of its codec (truncated, corrupt, or
another format under a ``.gz``/``.bz2``/``.zst`` name) is bad input, as a malformed CSV line is:
``MalformedSourceError`` naming the file and the codec, before anything is written; not a
``StorageError`` (a store that failed)."""

from __future__ import annotations

import bz2
import gzip
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

import ledger
import views

ROWS = b"id,v\n" + b"".join(b"%d,%d\n" % (i, i * 7) for i in range(5000))
CODECS: dict[str, tuple[str, Callable[[bytes], bytes]]] = {
    ".gz": ("gzip", gzip.compress),
    ".bz2": ("bz2", bz2.compress),
    ".zst": ("zstd", lambda data: pa.compress(data, "zstd", asbytes=True)),
}
CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "truncated": lambda packed: packed[: len(packed) // 2],
    "garbled": lambda packed: packed[:4] + bytes(b ^ 0x5A for b in packed[4:40]) + packed[40:],
    "not compressed": lambda packed: ROWS,
}


def _table(tmp_path: Path) -> ledger.Table:
    return ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "v": "BIGINT"}, primary_key="id"
    )


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
@pytest.mark.parametrize("suffix", sorted(CODECS))
@pytest.mark.parametrize("operation", ["insert", "upsert"])
def test_a_corrupt_compressed_file_is_malformed_input(
    tmp_path: Path, suffix, corruption, operation
):
    codec, compress = CODECS[suffix]
    table = _table(tmp_path)
    path = tmp_path / f"rows.csv{suffix}"
    path.write_bytes(CORRUPTIONS[corruption](compress(ROWS)))
    with pytest.raises(ledger.MalformedSourceError) as raised:
        getattr(table, operation)(str(path))
    assert not isinstance(raised.value, ledger.StorageError)
    assert f"{str(path)!r}" in str(raised.value)
    assert f"decompressed as {codec}" in str(raised.value)
    assert table.version == 0
    assert not list(table.store.list(table.prefix + "_data/"))


def test_a_folder_with_one_corrupt_file_writes_nothing(tmp_path: Path):
    table = _table(tmp_path)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.csv.gz").write_bytes(gzip.compress(ROWS))
    (folder / "b.csv.gz").write_bytes(gzip.compress(ROWS)[:100])
    with pytest.raises(ledger.MalformedSourceError, match=r"b\.csv\.gz"):
        table.insert(str(folder))
    assert table.version == 0
    (folder / "b.csv.gz").unlink()
    table.insert(str(folder))  # the good file alone loads
    assert views.totals(table, sum="v").fetchall() == [(5000, sum(i * 7 for i in range(5000)))]


def test_ledger_load_reports_the_file(tmp_path: Path):
    from click.testing import CliRunner

    from ledger.cli.app import cli

    table = _table(tmp_path)
    path = tmp_path / "rows.csv.bz2"
    path.write_bytes(bz2.compress(ROWS)[:-30])
    loaded = CliRunner().invoke(cli, ["-w", str(tmp_path / "wh"), "load", "t", str(path)])
    assert loaded.exit_code != 0
    assert "could not be decompressed as bz2" in loaded.output and "rows.csv.bz2" in loaded.output
    assert table.version == 0


@pytest.mark.parametrize("suffix", sorted(CODECS))
@pytest.mark.parametrize("operation", ["insert", "upsert", "update", "delete", "check"])
def test_a_compressed_file_of_no_bytes_is_empty_data_as_a_zero_byte_file_is(
    tmp_path: Path, suffix: str, operation: str
) -> None:
    _, compress = CODECS[suffix]
    table = _table(tmp_path)
    keyed = operation in ("update", "delete")
    if keyed:
        table.insert([{"id": 1, "v": 0}])
    (tmp_path / "in").mkdir()
    empty = tmp_path / "in" / f"empty.csv{suffix}"
    empty.write_bytes(compress(b""))
    write = getattr(table, operation)
    info = write(str(empty))
    assert info is None or info.version is None
    # In a folder, beside a file with rows: the rows are written, the empty file adds none.
    (tmp_path / "in" / "rows.csv").write_text("id,v\n1,7\n")
    write(str(tmp_path / "in"))
    kept = [] if operation in ("delete", "check") else [{"id": 1, "v": 7}]
    assert table.to_arrow().to_pylist() == kept
    assert table.refresh().version == int(keyed) + (operation != "check")
