"""An insert transform is checked when it is set, as far as it can be without data: it is bound
over no rows of the table's columns, so a misspelt function or type is refused then, with a
typed error naming it and nothing changed. A name it reads that the table lacks is a source
column writers pass (docs/concepts.md 3.2), so a misspelt column cannot be refused by its name:
it is logged when set, naming the closest column of the table, and the first write that lacks
it is refused naming it, with nothing written."""

from __future__ import annotations

import logging
import tempfile

import pytest

import ledger
import views
from ledger import errors

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "n": "BIGINT"}


def _table() -> ledger.Table:
    return ledger.connect(tempfile.mkdtemp()).create_table("t", SCHEMA, primary_key="id")


@pytest.mark.parametrize(
    ("sql", "error", "named"),
    [
        ("select id, uper(name) as name, n from rows", errors.UnsafeSqlError, "uper()"),
        ("select id, name, n::BIGNT as n from rows", errors.InsertTransformError, "BIGNT"),
        ("select id, name, n from rows where n > 'x'::DATEE", errors.InsertTransformError, "DATEE"),
    ],
)
def test_a_misspelt_function_or_type_is_refused_when_set(sql, error, named):
    table = _table()
    with pytest.raises(error, match=f"{named}") as raised:
        table.set_insert_transform(sql)
    assert "rows written" not in str(raised.value)  # no write ran
    assert table.version == 0 and table.snapshot().state.config.insert_transform is None


def test_a_misspelt_type_names_the_columns_it_was_bound_over():
    table = _table()
    with pytest.raises(errors.InsertTransformError) as raised:
        table.set_insert_transform("select id, name, payload::BIGNT as n from rows")
    message = str(raised.value)
    assert "does not run over the table's columns" in message
    assert "id BIGINT, name VARCHAR" in message and "payload (a source column)" in message
    assert table.version == 0


def test_a_column_close_to_a_table_column_is_logged_when_set(caplog):
    table = _table()
    with caplog.at_level(logging.WARNING, logger="ledger.insert_transform"):
        table.set_insert_transform("select id, nmae as name, n from rows")
    [record] = caplog.records
    assert "'nmae'" in record.getMessage() and "did you mean 'name'" in record.getMessage()
    with pytest.raises(errors.InsertTransformError, match='"nmae"'):
        table.insert([{"id": 1, "name": "a", "n": 1}])
    assert table.version == 1 and views.visible(table).fetchall() == []


def test_source_columns_keep_working_and_are_not_logged(caplog):
    table = _table()
    with caplog.at_level(logging.WARNING, logger="ledger.insert_transform"):
        table.set_insert_transform(
            "select id, payload->>'$.name' as name, strlen(payload) as n from rows"
        )
    assert caplog.records == []
    table.insert([{"id": 1, "payload": '{"name": "Zoë"}'}])
    assert [row[:3] for row in views.visible(table).fetchall()] == [(1, "Zoë", 16)]


@pytest.mark.parametrize(
    ("source", "warned"),
    [
        ("nmae", True),  # two letters swapped
        ("nam", True),  # one dropped
        ("namee", True),  # one added
        ("name_raw", False),  # a name built on the column's: a source column
        ("names_json", False),
        ("renamed_at", False),
    ],
)
def test_only_names_close_in_letters_and_length_are_logged(caplog, source, warned):
    table = _table()
    with caplog.at_level(logging.WARNING, logger="ledger.insert_transform"):
        table.set_insert_transform(f"select id, {source} as name, n from rows")
    assert bool(caplog.records) == warned, [r.getMessage() for r in caplog.records]
