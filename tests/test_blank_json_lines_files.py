"""A JSON-lines file of blank lines alone (newlines, spaces, tabs) holds no rows, as a file of
zero bytes holds none: empty data, alone or in a folder beside files with rows, for every
write."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

BLANK = st.lists(st.sampled_from([" ", "\t", "\n", "\r\n"]), min_size=1, max_size=12).map("".join)


@settings(max_examples=examples(10), deadline=None)
@given(
    blank=BLANK,
    bom=st.booleans(),
    operation=st.sampled_from(["insert", "upsert", "update", "delete", "check"]),
)
def test_a_file_of_blank_lines_is_empty_data_as_a_file_of_zero_bytes_is(
    blank: str, bom: bool, operation: str
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        table = ledger.connect(str(root / "wh")).create_table(
            "t", {"id": "BIGINT", "name": "VARCHAR"}, primary_key="id"
        )
        (root / "blank.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"") + blank.encode())
        (root / "zero.jsonl").write_bytes(b"")
        write = getattr(table, operation)
        for name in ("zero.jsonl", "blank.jsonl"):
            info = write(str(root / name))
            assert info is None or info.version is None, name
        # In a folder, beside a file with rows: the rows are written, the blank file adds none.
        (root / "in").mkdir()
        (root / "in" / "a.jsonl").write_bytes((b"\xef\xbb\xbf" if bom else b"") + blank.encode())
        (root / "in" / "b.jsonl").write_text('{"id": 1, "name": "x"}\n')
        if operation in ("insert", "upsert"):
            write(str(root / "in"))
            assert table.to_arrow().to_pylist() == [{"id": 1, "name": "x"}]
        assert table.refresh().version == (1 if operation in ("insert", "upsert") else 0)


def test_a_file_of_text_that_is_no_json_is_still_refused(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", {"id": "BIGINT"})
    (tmp_path / "a.jsonl").write_text("\n \nnot json\n")
    with pytest.raises(ledger.MalformedSourceError, match="line 3"):
        table.insert(str(tmp_path / "a.jsonl"))
    assert table.version == 0
