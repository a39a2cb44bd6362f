"""``Table.check(data)`` raises the error a write of ``data`` would raise for rows that do not
fit the table, and writes nothing; rows that fit pass. The example ingestion service uses it
(and only public names) to say which event of a batch is at fault."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ledger

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _table(tmp_path: Path) -> ledger.Table:
    return ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "amount": "DECIMAL(18,2)", "n": "INTEGER"}, primary_key="id"
    )


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([{"id": 1, "amount": "19.999"}], ledger.TypeMismatchError),
        ([{"id": 1, "n": 2**40}], ledger.TypeMismatchError),
        ([{"id": 1, "nope": 1}], ledger.UnknownColumnError),
        ([{"amount": 1}], ledger.MissingKeyError),
        ([{"id": None, "amount": 1}], ledger.MissingKeyError),
    ],
)
def test_check_raises_what_a_write_would_and_writes_nothing(tmp_path, rows, error):
    table = _table(tmp_path)
    with pytest.raises(error):
        table.check(rows)
    with pytest.raises(error):
        table.insert(rows)
    assert table.refresh().version == 0
    assert not list(table.store.list(table.prefix + "_data/"))


def test_rows_that_fit_pass_the_check_and_are_not_written(tmp_path):
    table = _table(tmp_path)
    table.check([{"id": 1, "amount": "19.99", "n": 7}, {"id": 2}])
    assert table.refresh().version == 0
    assert table.count() == 0


def test_the_examples_use_only_public_names():
    """Examples import ``ledger`` and its public front modules, never its internals."""
    public = {"ledger", "ledger.spark", "views"}
    for path in sorted(EXAMPLES.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            internal = [n for n in names if n.startswith("ledger.") and n not in public]
            if path.name == "spark_pipeline.py":  # starts the one Spark session of a run
                internal = [n for n in internal if n != "ledger.engines.spark.session"]
            assert not internal, f"{path.name} imports {internal}"


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([{"id": 5, "raw": "a"}], ledger.MissingKeyError),  # the transform makes the key NULL
        ([{"id": 1, "raw": None}], None),  # a source column the transform reads
        ([{"id": 1, "s": "a"}], ledger.errors.InsertTransformError),  # lacks the source column
    ],
)
def test_check_shapes_rows_by_the_insert_transform_as_insert_does(tmp_path, rows, error) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "s": "VARCHAR"},
        primary_key="id",
        insert_transform="select nullif(id, 5) as id, raw as s from rows",
    )
    if error is None:
        table.check(rows)
        table.insert(rows)
        assert table.count() == 1
        return
    with pytest.raises(error):
        table.check(rows)
    with pytest.raises(error):
        table.insert(rows)
    assert table.refresh().version == 0
