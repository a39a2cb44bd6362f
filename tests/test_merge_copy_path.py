"""Merges on local disk write their one output file with DuckDB's own Parquet writer
(``merging.copy_query_result``); every other merge streams through the Python writer
(``merging.stream_query_result``). For random ledgers and random subsets of files, under every
built-in policy and a custom query, both ways must write the same entries, in the order the
format requires, with the same file markers and the same file schema (every column nullable).
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.log.entries import FileMarker
from ledger.maintenance import merge as merging
from ledger.writer import file_schema, sort_columns
from tests.conftest import examples
from tests.test_merge_invariance import (
    AGGREGATE_ROWS,
    AGGREGATE_SCHEMA,
    ROW,
    ROW_WITH_V,
    SCHEMA,
    SCHEMA_WITH_V,
    A,
    V,
    _build,
    _every_transaction_settled,
    _files_in_commit_order,
    _operations,
    _quoted,
    _scratch_warehouse,
)

POLICIES: dict[str, dict[str, Any]] = {
    "collapsing": {"name": "collapsing"},
    "replacing": {"name": "replacing"},
    "replacing-versioned": {"name": "replacing", "version_column": V},
    "dedup": {"name": "dedup", "dedup_key": [V]},
    "aggregating": {
        "name": "aggregating",
        "measures": {"n": "count", "total": "sum", "amount": "sum", "score": "sum"},
    },
    # Drops some entries and changes values, keeping the data files' types.
    "custom": {
        "name": "custom",
        "sql": f"SELECT * REPLACE ({_quoted(A)} * 2 AS {_quoted(A)}) FROM entries "
        f"WHERE {_quoted(A)} IS NULL OR {_quoted(A)} <> 1",
    },
    # Returns a wider type than the table's: written by the streaming path, which converts it.
    "custom-wider-type": {
        "name": "custom",
        "sql": f"SELECT * REPLACE (CAST({_quoted(A)} AS DECIMAL(20,0)) AS {_quoted(A)}) "
        "FROM entries",
    },
}


def _marker_fields(marker: FileMarker) -> tuple[Any, ...]:
    """Everything a marker says about its file's rows (not its name, size or time)."""
    return (
        sorted(marker.partition.items(), key=str),
        marker.rows,
        marker.dml_sum,
        marker.trx_min,
        marker.trx_max,
        marker.key_min,
        marker.key_max,
        marker.unique_keys,
    )


def _comparable(value: Any) -> Any:
    if isinstance(value, float):
        return ("float", repr(value))  # NaN equals NaN, -0.0 differs from 0.0
    return value


def _written(table: ledger.Table, before: set[str]) -> list[tuple[Any, ...]]:
    """Per file the merge wrote: its marker's fields, its schema and its rows, which must be
    in the table's sort order."""
    snapshot = table.snapshot()
    order = sort_columns(snapshot.state.config)
    expected_schema = file_schema(snapshot.state.schema, snapshot.state.config)
    files = []
    for marker in snapshot.markers():
        if marker.path in before:
            continue
        data = pq.read_table(_local(snapshot, marker.path))
        fields = [(f.name, f.type, f.nullable) for f in data.schema]
        assert fields == [(f.name, f.type, True) for f in expected_schema]
        rows = data.to_pylist()
        keys = [tuple((r[c] is None, r[c]) for c in order) for r in rows]
        assert keys == sorted(keys), "a merged file is not in the table's sort order"
        entries = sorted(
            (tuple(_comparable(r[c]) for c in data.column_names) for r in rows), key=repr
        )
        files.append((_marker_fields(marker), entries))
    return sorted(files, key=repr)


def _local(snapshot: Any, path: str) -> str:
    local = snapshot.store.local_path(snapshot.prefix + path)
    assert local is not None
    return str(local)


def _merge_copy(
    source: Path, target: Path, files: list[str], streaming_only: bool
) -> tuple[list[tuple[Any, ...]], int]:
    """Merge ``files`` in a copy of the table at ``source``; return what it wrote and how many
    partitions the copy path wrote."""
    shutil.copytree(source, target / "t")
    table = ledger.connect(str(target)).table("t")
    before = {m.path for m in table.snapshot().markers()}
    copied = 0
    real_copy = merging.copy_query_result

    def counting_copy(*args: Any) -> Any:
        nonlocal copied
        result = real_copy(*args)
        copied += result is not None
        return result

    replacement: Callable[..., Any] = (lambda *args: None) if streaming_only else counting_copy
    with mock.patch.object(merging, "copy_query_result", replacement):
        table.merge(files=files)
    return _written(table, before), copied


def _build_aggregating(table: ledger.Table, data: st.DataObject) -> None:
    for _ in range(data.draw(st.integers(1, 4), label="inserts")):
        table.insert(data.draw(AGGREGATE_ROWS))
        if data.draw(st.booleans(), label="delete"):
            table.delete([data.draw(st.sampled_from([0, 1, 2, 3]))])


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(max_examples=examples(6), deadline=None)
@given(data=st.data())
def test_the_copy_path_writes_what_the_streaming_path_writes(
    policy: str, data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    options = POLICIES[policy]
    partition_by = data.draw(st.sampled_from([None, "bucket(2, k)"]), label="partition_by")
    with _scratch_warehouse() as warehouse, _every_transaction_settled():
        if options["name"] == "aggregating":
            table = warehouse.create_table(
                "t", AGGREGATE_SCHEMA, primary_key="k", partition_by=partition_by, policy=options
            )
            _build_aggregating(table, data)
        else:
            versioned = "version_column" in options or options["name"] == "dedup"
            table = warehouse.create_table(
                "t",
                SCHEMA_WITH_V if versioned else SCHEMA,
                primary_key="k",
                partition_by=partition_by,
                policy=options,
            )
            row = ROW_WITH_V if versioned else ROW
            _build(table, data.draw(_operations(row, keyed=True), label="writes"))
        paths = _files_in_commit_order(table)
        chosen = data.draw(st.lists(st.booleans(), min_size=len(paths), max_size=len(paths)))
        files = [p for p, c in zip(paths, chosen, strict=True) if c] or paths[-1:]
        source = Path(_local(table.snapshot(), ""))
        work = tmp_path_factory.mktemp("copy-path")
        copied, copies = _merge_copy(source, work / "copied", files, streaming_only=False)
        streamed, _ = _merge_copy(source, work / "streamed", files, streaming_only=True)
        assert copied == streamed
        if policy == "custom-wider-type":
            assert copies == 0  # converting is the streaming path's
        else:
            assert copies >= 1 or not copied
        shutil.rmtree(work)


def test_nan_and_negative_zero_survive_a_copied_merge_and_stay_findable(tmp_path: Path) -> None:
    """Row groups DuckDB writes carry min/max for floats only when they hold no NaN, so a
    filter on NaN (or on values above every number, where NaN sorts) still finds it."""
    table = ledger.connect(str(tmp_path)).create_table(
        "f", {"k": "BIGINT", "x": "DOUBLE"}, primary_key="k"
    )
    table.insert([{"k": 1, "x": math.nan}, {"k": 2, "x": -0.0}, {"k": 3, "x": 1.5}])
    table.insert([{"k": 4, "x": 2.5}])
    table.update([{"k": 3, "x": 0.0}])
    assert table.merge(min_files=1).files_out == 1
    assert table.scan().filter("isnan(x)").aggregate("count(*)").fetchall() == [(1,)]
    assert table.scan().filter("x > 1e300").aggregate("count(*)").fetchall() == [(1,)]
    rows = sorted(table.scan().filter("dml_type = 1").project("k, x").fetchall())
    assert [k for k, _ in rows] == [1, 2, 3, 4]
    assert math.isnan(rows[0][1]) and math.copysign(1.0, rows[1][1]) < 0 and rows[2][1] == 0.0
