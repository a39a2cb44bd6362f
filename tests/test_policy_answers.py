"""What each built-in merge policy answers to the questions readers ask of it (merge_policies/
base.py): the views, totals, rollups and merges choose their paths by these answers alone, so a
changed answer changes which path runs, and this table pins them."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.log.entries import TableConfig
from ledger.schema import TableSchema
from merge_policies import load_policy
from merge_policies.base import AGGREGATED, LATEST_VERSION, SIGNED

SCHEMA = TableSchema.parse({"id": "BIGINT", "event": "VARCHAR", "n": "BIGINT", "ver": "BIGINT"})
ROLLUP_SCHEMA = TableSchema.parse({"id": "BIGINT", "n": "BIGINT", "ver": "BIGINT"})
CONFIG = TableConfig(table_uuid="00000000-0000-0000-0000-000000000000", primary_key=("id",))
KEYS = ("id",)

# policy -> (visible_rows, signs_consistent, files_isolatable, keys_independent,
#            repeat_columns(KEYS), latest_order(), aggregates())
ANSWERS: list[tuple[dict[str, Any], tuple[Any, ...]]] = [
    ({"name": "collapsing"}, (SIGNED, True, True, True, None, None, ())),
    (
        {"name": "custom", "sql": "SELECT * FROM entries"},
        (SIGNED, True, True, True, None, None, ()),
    ),
    (
        {"name": "replacing", "version_column": "ver"},
        (LATEST_VERSION, False, True, True, None, ["ver", "trx_id", "trx_seq"], ()),
    ),
    (
        {"name": "replacing"},
        (LATEST_VERSION, False, True, True, None, ["trx_id", "trx_seq"], ()),
    ),
    (
        {"name": "dedup"},
        (SIGNED, False, True, True, ["id", "trx_id", "trx_seq", "dml_type"], None, ()),
    ),
    (
        {"name": "dedup", "dedup_key": ["event"]},
        (SIGNED, False, False, False, ["event", "dml_type"], None, ()),
    ),
    (
        {"name": "aggregating", "measures": {"n": "sum", "ver": "count"}},
        (AGGREGATED, False, False, True, None, None, "measures"),
    ),
]


@pytest.mark.parametrize(("spec", "expected"), ANSWERS, ids=[str(s) for s, _ in ANSWERS])
def test_each_policy_answers_as_its_documented_meaning(
    spec: dict[str, Any], expected: tuple[Any, ...]
) -> None:
    schema = ROLLUP_SCHEMA if spec["name"] == "aggregating" else SCHEMA
    policy = load_policy(spec, schema, CONFIG)
    if expected[-1] == "measures":  # one (column, function, SQL type) per measure
        assert {(c, f) for c, f, _ in policy.aggregates()} == {("n", "sum"), ("ver", "count")}
        expected = (*expected[:-1], tuple(tuple(m) for m in policy.aggregates()))
    answers = (
        policy.visible_rows,
        policy.signs_consistent,
        policy.files_isolatable,
        policy.keys_independent,
        policy.repeat_columns(KEYS),
        policy.latest_order(),
        tuple(tuple(m) for m in policy.aggregates()),
    )
    assert answers == expected
