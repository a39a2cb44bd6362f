"""Merges copy some files as they are: under a policy that returns the entries of keys holding
no delete mark untouched (collapsing), a file of insertions only whose key range meets no range
of a merged file holding marks skips the policy's query (``merging.passing_files``).

For random ledgers (repeated keys and whole rows, hand-written marks, marks of absent rows, NaN
and -0.0, partitions) and random subsets of files, a merge that copies such files must write
exactly what a merge running every file through the query writes, on both ways of writing
(DuckDB's COPY and the streaming writer), and leave every view's answer unchanged.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.maintenance import merge as merging
from merge_policies import load_policy
from tests.conftest import examples
from tests.test_merge_copy_path import POLICIES, _local, _written
from tests.test_merge_invariance import (
    AGGREGATE_SCHEMA,
    ROW,
    SCHEMA,
    SCHEMA_WITH_V,
    _build,
    _every_transaction_settled,
    _files_in_commit_order,
    _operations,
    _scratch_warehouse,
)


def _merge_copy(
    source: Path, target: Path, files: list[str], *, passing: bool, streaming: bool
) -> tuple[list[tuple[Any, ...]], int, list[Any], list[Any]]:
    """Merge ``files`` in a copy of the table at ``source``; return what it wrote, how many
    files it copied as they are, and the visible rows and totals after the merge."""
    shutil.copytree(source, target / "t")
    table = ledger.connect(str(target)).table("t")
    before = {m.path for m in table.snapshot().markers()}
    copied_as_they_are = 0
    real_passing = merging.passing_files

    def counting_passing(*args: Any) -> Any:
        nonlocal copied_as_they_are
        found = real_passing(*args) if passing else []
        copied_as_they_are += len(found)
        return found

    with mock.patch.object(merging, "passing_files", counting_passing):
        if streaming:
            with mock.patch.object(merging, "copy_query_result", lambda *args: None):
                table.merge(files=files)
        else:
            table.merge(files=files)
    return (
        _written(table, before),
        copied_as_they_are,
        sorted(map(repr, views.visible(table).fetchall())),
        views.totals(table).fetchall(),
    )


@pytest.mark.parametrize("streaming", [False, True], ids=["copy", "streaming"])
@settings(max_examples=examples(14), deadline=None)
@given(data=st.data())
def test_files_copied_as_they_are_change_nothing_a_merge_writes(
    streaming: bool, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    partition_by = data.draw(st.sampled_from([None, "bucket(2, k)"]), label="partition_by")
    with _scratch_warehouse() as warehouse, _every_transaction_settled():
        table = warehouse.create_table("t", SCHEMA, primary_key="k", partition_by=partition_by)
        _build(table, data.draw(_operations(ROW, keyed=True), label="writes"))
        visible_before = sorted(map(repr, views.visible(table).fetchall()))
        totals_before = views.totals(table).fetchall()
        paths = _files_in_commit_order(table)
        chosen = data.draw(st.lists(st.booleans(), min_size=len(paths), max_size=len(paths)))
        files = [p for p, c in zip(paths, chosen, strict=True) if c] or paths[-1:]
        source = Path(_local(table.snapshot(), ""))
        work = tmp_path_factory.mktemp("passing")
        ours = _merge_copy(source, work / "ours", files, passing=True, streaming=streaming)
        every = _merge_copy(source, work / "every", files, passing=False, streaming=streaming)
        event("some files copied as they are" if ours[1] else "every file queried")
        assert ours[0] == every[0]
        assert ours[2] == every[2] == visible_before
        assert ours[3] == every[3] == totals_before
        shutil.rmtree(work)


def test_only_files_whose_keys_no_mark_can_share_are_copied(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "v": "VARCHAR"}, primary_key="k"
    )
    table.insert([{"k": k, "v": f"a{k}"} for k in range(10)])  # keys 0-9
    table.insert([{"k": k, "v": f"b{k}"} for k in range(20, 30)])  # keys 20-29: no mark
    table.insert([{"k": k, "v": f"c{k}"} for k in (2, 25)])  # keys 2-25: meets the mark
    table.delete([3])  # a mark of key 3
    markers = {m.path: m for m in table.snapshot().markers()}
    first, second, third, marks = (markers[p] for p in _files_in_commit_order(table))
    state = table.snapshot().state
    policy = load_policy(state.config.policy, state.schema, state.config)
    key_types = [state.schema.type_of("k")]
    assert merging.passing_files([first, second, third, marks], policy, key_types) == [second]
    # No file holds a mark: every file is copied as it is.
    assert merging.passing_files([first, second, third], policy, key_types) == [
        first,
        second,
        third,
    ]
    before = sorted(views.visible(table).fetchall())
    result = table.merge(min_files=1)
    assert result.entries_out == 10 + 10 + 2 - 1
    assert sorted(views.visible(table).fetchall()) == before
    assert table.count() == 21


@pytest.mark.parametrize("policy", sorted(set(POLICIES) - {"collapsing"}))
def test_other_policies_run_every_file_through_their_query(policy: str, tmp_path: Path) -> None:
    """Replacing, dedup and aggregating merges change keys that hold no mark (they keep the
    latest entry, drop repeats, sum groups); a custom query may do anything."""
    options = POLICIES[policy]
    if options["name"] == "aggregating":
        schema = AGGREGATE_SCHEMA
    elif "version_column" in options or options["name"] == "dedup":
        schema = SCHEMA_WITH_V
    else:
        schema = SCHEMA
    table = ledger.connect(str(tmp_path)).create_table("t", schema, primary_key="k", policy=options)
    table.insert([{"k": 1}])
    table.insert([{"k": 2}])
    state = table.snapshot().state
    loaded = load_policy(state.config.policy, state.schema, state.config)
    assert not loaded.unmarked_keys_pass_through
    assert (
        merging.passing_files(table.snapshot().markers(), loaded, [state.schema.type_of("k")]) == []
    )
