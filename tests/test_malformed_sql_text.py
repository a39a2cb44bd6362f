"""Predicates and caller SQL that do not tokenize (an open quote or comment) or nest deeper than
any query a person writes get the typed errors of any unparsable text, with nothing written."""

from __future__ import annotations

import pytest

import ledger
from tests.conftest import Location

PREDICATES = ["id = 1 /*", "s = 'a", 'id = "x', "(" * 500 + "id = 1" + ")" * 500]


@pytest.mark.parametrize("predicate", PREDICATES, ids=["comment", "quote", "dquote", "deep"])
def test_a_predicate_that_does_not_parse_is_a_typed_error(
    local_location: Location, predicate: str
) -> None:
    table = local_location.connect().create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id"
    )
    table.insert([{"id": 1, "s": "a"}])
    with pytest.raises(ledger.InvalidPredicateError):
        table.to_arrow(where=predicate)
    with pytest.raises(ledger.InvalidPredicateError):
        table.delete_where(predicate)
    assert table.refresh().version == 1 and table.count() == 1


@pytest.mark.parametrize(
    "sql",
    ["select * from rows where s = 'a", "select " + "(" * 500 + "1" + ")" * 500 + " from rows"],
)
def test_caller_sql_that_does_not_parse_is_a_typed_error(
    local_location: Location, sql: str
) -> None:
    table = local_location.connect().create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id"
    )
    with pytest.raises(ledger.UnsafeSqlError):
        table.set_insert_transform(sql)
    assert table.refresh().version == 0


@pytest.mark.parametrize("predicate", ["id >", "id = 1 and", "s in ("])
def test_an_unfinished_predicate_is_explained_in_the_users_terms(
    local_location: Location, predicate: str
) -> None:
    table = local_location.connect().create_table(
        "t", {"id": "BIGINT", "s": "VARCHAR"}, primary_key="id"
    )
    with pytest.raises(ledger.InvalidPredicateError) as refused:
        table.to_arrow(where=predicate)
    message = str(refused.value)
    assert predicate in message and "sqlglot" not in message and "<class" not in message
