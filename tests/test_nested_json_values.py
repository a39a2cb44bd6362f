"""JSON objects and lists (nested values) have no column type: a load naming a new column that
holds them is not told to add it with --evolve-schema (that could only fail), but what to do,
and the advice given for new scalar columns works when followed. An insert transform reading a
nested field the rows do not have fails with InsertTransformError naming the field and column."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
from ledger.cli import cli
from ledger.errors import InsertTransformError
from tests.conftest import examples

VALUES = {
    "number": 7,
    "text": "x",
    "object": {"a": 1},
    "list": [1, 2],
    "list of objects": [{"a": 1}],
}


@settings(
    max_examples=examples(8),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(kinds=st.lists(st.sampled_from(sorted(VALUES)), min_size=1, max_size=3))
def test_the_advice_for_new_columns_works_when_followed(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("nested")
    location = str(folder / "wh")
    table = ledger.connect(location).create_table("ev", {"id": "BIGINT"}, primary_key="id")
    row: dict[str, Any] = {"id": 1, **{f"c{i}": VALUES[k] for i, k in enumerate(kinds)}}
    source = folder / "rows.json"
    source.write_text(json.dumps(row) + "\n")
    runner = CliRunner()
    refused = runner.invoke(cli, ["-w", location, "load", "ev", str(source)])
    assert refused.exit_code != 0
    nested = [f"c{i}" for i, k in enumerate(kinds) if k not in ("number", "text")]
    if nested:
        assert "--evolve-schema" not in refused.stderr, refused.stderr
        assert "nested" in refused.stderr and repr(nested[0]) in refused.stderr, refused.stderr
        return
    assert "--evolve-schema" in refused.stderr, refused.stderr
    followed = runner.invoke(cli, ["-w", location, "load", "ev", str(source), "--evolve-schema"])
    assert followed.exit_code == 0, followed.output
    assert table.refresh().count() == 1


def test_a_nested_column_refused_by_evolution_is_named(tmp_path: Path) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table("ev", {"id": "BIGINT"}, "id")
    with pytest.raises(ledger.SchemaError, match=r"'meta'.*nested"):
        table.insert([{"id": 1, "meta": {"a": 1}}], evolve_schema=True)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": 2, "meta": {"b": 5}}'], r"field 'a' of column 'meta'"),
        (['{"id": 3}'], r"column 'meta'"),
    ],
)
def test_a_transform_reading_a_missing_nested_field_names_it(
    tmp_path: Path, lines: list[str], message: str
) -> None:
    table = ledger.connect(str(tmp_path / "wh")).create_table(
        "ev", {"id": "BIGINT", "a": "BIGINT"}, "id"
    )
    table.set_insert_transform("select id, meta.a as a from rows")
    source = tmp_path / "rows.json"
    source.write_text("\n".join(lines) + "\n")
    for data in (str(source), [json.loads(line) for line in lines]):
        with pytest.raises(InsertTransformError, match=message) as refused:
            table.insert(data)
        assert "Binder Error" not in str(refused.value) and "Candidate" not in str(refused.value)
    assert table.count() == 0
