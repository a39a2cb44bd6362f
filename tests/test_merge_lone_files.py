"""A merge leaves alone a partition whose one candidate file has nothing to merge: no delete mark
and no key twice (under the default collapsing policy, no delete mark at all), where every
built-in policy's query would return the file as it is. A lone file holding marks is still
rewritten (its marks collapse), and the answers never change."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import Location, examples

SCHEMA = {"id": "BIGINT", "region": "VARCHAR", "amount": "BIGINT"}
POLICIES: list[Any] = [
    "collapsing",
    "replacing",
    {"name": "dedup"},
    {"name": "dedup", "dedup_key": ["id", "amount"]},
]


def _visible(table: ledger.Table) -> list[Any]:
    return sorted(views.visible(table).fetchall())


@pytest.mark.parametrize("policy", POLICIES, ids=str)
def test_a_lone_file_with_nothing_to_merge_is_left_alone(
    local_location: Location, policy: Any
) -> None:
    table = local_location.connect().create_table(
        "t", SCHEMA, "id", partition_by="region", policy=policy
    )
    table.insert([{"id": k, "region": "eu" if k % 2 else "us", "amount": k} for k in range(6)])
    before, files = table.version, table.files()
    result = table.merge(min_files=1)
    assert result.version is None and result.merged == ()
    assert table.refresh().version == before and table.files() == files


def test_a_lone_file_holding_marks_is_still_rewritten(local_location: Location) -> None:
    table = local_location.connect().create_table("t", SCHEMA, "id", partition_by="region")
    row = {"id": 1, "region": "eu", "amount": 5}
    table.append_entries(
        [{**row, "dml_type": 1}, {**row, "dml_type": -1}, {**row, "id": 2, "dml_type": 1}]
    )
    result = table.merge(min_files=1)
    assert result.version is not None and result.files_in == 1
    assert _visible(table.refresh()) == [(2, "eu", 5)]


@settings(
    max_examples=examples(10),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    policy=st.sampled_from(POLICIES),
    ids=st.lists(st.integers(0, 6), min_size=1, max_size=8),
    deleted=st.lists(st.integers(0, 6), max_size=3),
)
def test_a_merge_of_lone_files_rewrites_exactly_those_with_something_to_merge(
    tmp_path_factory: pytest.TempPathFactory, policy: Any, ids: list[int], deleted: list[int]
) -> None:
    warehouse = ledger.connect(str(tmp_path_factory.mktemp("wh")))
    table = warehouse.create_table("t", SCHEMA, "id", partition_by="region", policy=policy)
    table.insert([{"id": k, "region": f"r{k % 2}", "amount": k} for k in ids])
    if deleted:
        table.delete(deleted)  # marks in a second file of a partition: two files, or none
    markers = {m.path: m for m in table.snapshot().markers()}
    lone = {
        path
        for path, m in markers.items()
        if sum(1 for o in markers.values() if o.partition == m.partition) == 1
    }
    expected_kept = {p for p in lone if markers[p].dml_sum == markers[p].rows}
    if policy != "collapsing":
        expected_kept = {p for p in expected_kept if markers[p].unique_keys}
    answer = _visible(table)
    table.merge(min_files=1)
    after = {m.path for m in table.refresh().snapshot().markers()}
    assert expected_kept <= after
    assert not (lone - expected_kept) & after  # the others were rewritten
    assert _visible(table) == answer


def test_files_are_named_for_a_merge_as_the_table_lists_them(location: Location) -> None:
    """``merge(files=...)`` takes the paths or URIs ``table.files()`` gives (local and S3) as
    well as the paths relative to the table its markers hold."""
    table = location.connect().create_table("t", SCHEMA, "id", partition_by="region")
    for i in range(3):
        table.insert([{"id": i, "region": "eu", "amount": i}])
    first, second, third = table.files()
    result = table.merge(files=[first, second])
    assert result.files_in == 2
    assert third in table.refresh().files() and first not in table.files()
    relative = [m.path for m in table.snapshot().markers()]
    assert table.merge(files=relative).files_in == 2
    assert _visible(table.refresh()) == [(0, "eu", 0), (1, "eu", 1), (2, "eu", 2)]
    with pytest.raises(ledger.InvalidArgumentError, match="not alive data files"):
        table.merge(files=[first])
