"""`ledger load --mode delete` refuses a file holding a column the table lacks, as every other
mode does: a delete file holds the keys (and may hold the table's other columns), so a column
the table lacks is most likely a mistake (another table's file, a misspelt key). Nothing is
deleted. Python's `delete` keeps ignoring such columns, as documented."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples
from tests.test_cli import run_ledger

SCHEMA = "id BIGINT, name VARCHAR, amount BIGINT"
VALUES = {"id": "1", "name": "x", "amount": "10", "reason": "typo", "ident": "1", "Amount": "10"}


def _warehouse(root: Path) -> Path:
    run_ledger("-w", "wh", "init", cwd=root)
    run_ledger("-w", "wh", "create", "t", "--schema", SCHEMA, "--key", "id", cwd=root)
    (root / "rows.csv").write_text("id,name,amount\n1,x,10\n2,y,20\n")
    run_ledger("-w", "wh", "load", "t", "rows.csv", cwd=root)
    return root


def test_a_delete_file_with_a_column_the_table_lacks_is_refused(tmp_path: Path) -> None:
    cwd = _warehouse(tmp_path)
    (cwd / "cancel.csv").write_text("id,reason\n1,typo\n")
    refused = run_ledger(
        "-w", "wh", "load", "t", "cancel.csv", "--mode", "delete", cwd=cwd, expect=1
    )
    assert "UnknownColumnError" in refused.stderr and "'reason'" in refused.stderr
    assert "nothing was written" in refused.stderr.lower()
    # One sentence ends before the next begins.
    assert "table. Nothing was written." in refused.stderr
    (cwd / "header.csv").write_text("id,reason\n")
    refused = run_ledger(
        "-w", "wh", "load", "t", "header.csv", "--mode", "delete", cwd=cwd, expect=1
    )
    assert "'reason'" in refused.stderr
    table = ledger.connect(str(cwd / "wh")).table("t")
    assert table.count() == 2
    # The table's own columns beside the key are fine; Python's delete ignores unknown ones.
    (cwd / "rows1.csv").write_text("id,name\n1,x\n")
    run_ledger("-w", "wh", "load", "t", "rows1.csv", "--mode", "delete", cwd=cwd)
    assert table.delete(str(cwd / "cancel.csv")).deleted == 0 and table.count() == 1
    (cwd / "cancel2.csv").write_text("id,reason\n2,typo\n")
    assert table.delete(str(cwd / "cancel2.csv")).deleted == 1


@settings(max_examples=examples(5), deadline=None)
@given(columns=st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=4, unique=True))
def test_a_delete_file_is_refused_exactly_when_it_names_a_column_the_table_lacks(
    columns: list[str],
) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        cwd = _warehouse(Path(scratch))
        (cwd / "keys.csv").write_text(
            ",".join(columns) + "\n" + ",".join(VALUES[c] for c in columns) + "\n"
        )
        result = run_ledger(
            "-w", "wh", "load", "t", "keys.csv", "--mode", "delete", cwd=cwd, expect=None
        )
        unknown = [c for c in columns if c not in ("id", "name", "amount")]
        table = ledger.connect(str(cwd / "wh")).table("t")
        if unknown:
            assert result.returncode == 1 and "UnknownColumnError" in result.stderr
            assert all(repr(c) in result.stderr for c in unknown)
            assert table.count() == 2
        elif "id" not in columns:
            assert result.returncode == 1 and "MissingKeyError" in result.stderr
        else:
            assert result.returncode == 0 and table.count() == 1
