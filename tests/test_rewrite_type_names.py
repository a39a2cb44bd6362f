"""A rewrite query whose result column does not convert to the table's column is refused naming
both types by the table's SQL names (INTEGER, VARCHAR), as every other message names them, never
by Arrow's (int32, string)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

# Column type -> a DuckDB expression of that type.
EXPRESSIONS = {
    "INTEGER": "7::INTEGER",
    "BIGINT": "7::BIGINT",
    "DOUBLE": "1.5::DOUBLE",
    "BOOLEAN": "true",
    "DATE": "DATE '2024-01-02'",
    "TIMESTAMP": "TIMESTAMP '2024-01-02 03:04:05'",
    "VARCHAR": "'x'",
    "DECIMAL(10,2)": "1.25::DECIMAL(10,2)",
}
ARROW_NAMES = re.compile(r"\b(int(8|16|32|64)|string|double|bool|date32|timestamp\[|decimal128)\b")


@settings(max_examples=examples(10), deadline=None)
@given(column=st.sampled_from(sorted(EXPRESSIONS)), result=st.sampled_from(sorted(EXPRESSIONS)))
def test_a_refused_result_type_is_named_by_sql_names(
    tmp_path_factory: pytest.TempPathFactory, column: str, result: str
) -> None:
    root: Path = tmp_path_factory.mktemp("rewrite")
    table = ledger.connect(str(root)).create_table(
        "t", {"id": "BIGINT", "g": "VARCHAR", "v": column}, primary_key="id", partition_by=["g"]
    )
    table.insert([{"id": 1, "g": "a", "v": None}])
    sql = f"SELECT * REPLACE ({EXPRESSIONS[result]} AS v) FROM entries"
    try:
        table.rewrite_partitions({"g": "a"}, sql)
    except ledger.TypeMismatchError as refused:
        message = str(refused)
        if "does not convert to the table's" in message:
            assert f"as {result.replace(',', ', ')}" in message or f"as {result}" in message
            assert f"table's {column}" in message.replace(", ", ",")
            assert ARROW_NAMES.search(message) is None, message
    except ledger.LedgerError:
        pass  # refused for another reason (a value that does not convert), named otherwise


def test_the_reported_rewrite_names_integer_and_varchar(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"id": "BIGINT", "g": "VARCHAR", "s": "VARCHAR"}, primary_key="id", partition_by=["g"]
    )
    table.insert([{"id": 1, "g": "a", "s": "x"}])
    with pytest.raises(
        ledger.TypeMismatchError,
        match=r"column 's' as INTEGER, which does not convert to the "
        r"table's VARCHAR",
    ):
        table.rewrite_partitions({"g": "a"}, "SELECT * REPLACE (1::INTEGER AS s) FROM entries")
    assert table.refresh().version == 1
