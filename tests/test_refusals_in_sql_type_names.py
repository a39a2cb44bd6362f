"""Refusals speak of the table's SQL types and say what is wrong, never in Arrow's words:
text holding a lone surrogate is refused as no valid Unicode (naming row, column and SQL type)
from every in-memory source; totals asked to sum a column that is no number name its SQL
type."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import ledger
import views

ARROW_WORDS = re.compile(r"\(string\)|date32|codec|do not form one type|utf-8")


@pytest.fixture
def table(tmp_path: Path) -> ledger.Table:
    return ledger.connect(str(tmp_path / "wh")).create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR", "d": "DATE", "n": "INTEGER"}
    )


@pytest.mark.parametrize("source", ["dicts", "pandas", "writer"])
@pytest.mark.parametrize("text", ["\ud800", "ok\udfff", "\udc80abc"])
def test_a_lone_surrogate_is_refused_as_no_valid_unicode(table, source, text):
    rows = [{"id": 1, "s": "fine"}, {"id": 2, "s": text}]
    with pytest.raises(ledger.TypeMismatchError) as refused:
        if source == "dicts":
            table.insert(rows)
        elif source == "pandas":
            table.insert(pd.DataFrame(rows).astype({"s": object}))
        else:
            with table.writer(max_seconds=None) as writer:
                writer.write(rows)
    message = str(refused.value)
    assert "column 's' (VARCHAR)" in message and "not valid Unicode" in message, message
    if source != "writer":
        assert "row 1 of" in message, message
    assert not ARROW_WORDS.search(message), message
    assert table.refresh().version == 0


@pytest.mark.parametrize(("column", "sql_type"), [("s", "VARCHAR"), ("d", "DATE")])
def test_totals_name_the_sql_type_of_a_column_they_cannot_sum(table, column, sql_type):
    for ask in ({"sum": column}, {"avg": column}):
        with pytest.raises(ledger.InvalidArgumentError, match=rf"'{column}' \({sql_type}\)"):
            views.totals(table, **ask)
