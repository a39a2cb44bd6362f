"""Each dict of a list is a row, whatever its neighbours: ``{}`` is a row that names no column.
On a table without a key it is an all-NULL row (as a JSON-lines ``{}`` line is), from
``insert`` and from the buffered writer; on a keyed table it is a row without its key, refused
with MissingKeyError by every write (insert, upsert, update, delete) before anything is
written, alone or beside rows that have their key."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

# The key is not the first column, so the refusal does not hang on the columns' order.
KEYED = {"s": "VARCHAR", "id": "BIGINT", "n": "INTEGER"}
KEYLESS = {"s": "VARCHAR", "n": "INTEGER"}
_names = itertools.count()

ROWS = st.lists(
    st.one_of(
        st.just({}),
        st.fixed_dictionaries(
            {}, optional={"s": st.sampled_from(["a", "b"]), "n": st.integers(0, 9)}
        ),
    ),
    min_size=1,
    max_size=5,
)


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> ledger.Warehouse:
    return ledger.connect(str(tmp_path_factory.mktemp("empty-dicts") / "wh"))


def _stored(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(table.refresh().scan().select("s, n").fetchall(), key=repr)


def _expected(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return sorted(((row.get("s"), row.get("n")) for row in rows), key=repr)


@settings(max_examples=examples(15), deadline=None)
@given(rows=ROWS, through_writer=st.booleans())
def test_every_dict_is_a_row_of_a_table_without_a_key(
    warehouse: ledger.Warehouse, rows: list[dict[str, Any]], through_writer: bool
) -> None:
    table = warehouse.create_table(f"keyless{next(_names)}", KEYLESS)
    if through_writer:
        with table.writer(max_seconds=None) as writer:
            for row in rows:
                writer.write(row)
    else:
        table.insert(rows)
    assert _stored(table) == _expected(rows)


def test_a_json_lines_empty_object_is_the_same_row(warehouse: ledger.Warehouse, tmp_path: Path):
    from_dicts = warehouse.create_table(f"keyless{next(_names)}", KEYLESS)
    from_file = warehouse.create_table(f"keyless{next(_names)}", KEYLESS)
    (tmp_path / "rows.jsonl").write_text('{}\n{"s": "a"}\n{}\n')
    from_dicts.insert([{}, {"s": "a"}, {}])
    from_file.insert(str(tmp_path / "rows.jsonl"))
    assert _stored(from_dicts) == _stored(from_file) == [("a", None), (None, None), (None, None)]


WRITES = ["insert", "upsert", "update", "delete", "writer"]


@settings(max_examples=examples(20), deadline=None)
@given(
    write=st.sampled_from(WRITES),
    keyed_rows=st.lists(st.integers(1, 3), max_size=3),
    empty_at=st.integers(0, 3),
)
def test_a_dict_without_its_key_is_refused_by_every_keyed_write(
    warehouse: ledger.Warehouse, write: str, keyed_rows: list[int], empty_at: int
) -> None:
    table = warehouse.create_table(f"keyed{next(_names)}", KEYED, primary_key="id")
    table.insert([{"id": k, "s": "old"} for k in (1, 2, 3)])
    rows: list[dict[str, Any]] = [{"id": k, "s": "new"} for k in dict.fromkeys(keyed_rows)]
    rows.insert(min(empty_at, len(rows)), {})
    before = table.refresh().version
    with pytest.raises(ledger.MissingKeyError, match="'id'"):
        if write == "writer":
            with table.writer(max_seconds=None) as writer:
                writer.write(rows)
        else:
            getattr(table, write)(rows)
    assert table.refresh().version == before
