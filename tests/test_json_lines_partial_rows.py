"""Partial upserts and updates from JSON-lines files: each line says which columns it gives,
as each dict of a list does (an absent key keeps the row's value, an explicit ``null`` sets
NULL), on every store, for files, folders and globs, in transactions too. Checked against the
same rows written as dicts and against a plain in-place oracle."""

from __future__ import annotations

import json
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import Location, examples
from tests.support.partial_rows import VALUE_COLUMNS, partial_row

SCHEMA = {"id": "BIGINT", "name": "VARCHAR", "score": "BIGINT", "region": "VARCHAR"}
FIRST = [
    {"id": 1, "name": "A", "score": 10, "region": "eu"},
    {"id": 2, "name": "B", "score": 20, "region": "us"},
]


def _visible(table: ledger.Table) -> dict[int, dict[str, Any]]:
    return {row["id"]: row for row in views.visible(table).to_arrow_table().to_pylist()}


def _regions_of_entries(table: ledger.Table) -> dict[tuple[int, str | None], int]:
    """sum(dml_type) per (key, region): a row that moved partition leaves entries behind."""
    sums: dict[tuple[int, str | None], int] = {}
    for key, region, sign in table.scan().select("id, region, dml_type").fetchall():
        sums[(key, region)] = sums.get((key, region), 0) + sign
    return {k: v for k, v in sums.items() if v}


def _lines(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _put(location: Location, table: ledger.Table, key: str, rows: list[dict[str, Any]]) -> str:
    """Store a JSON-lines file beside the warehouse's tables; return its path or URI."""
    table.store.put(key, _lines(rows))
    return f"{location.uri}/{key}"


@pytest.fixture
def players(location: Location) -> ledger.Table:
    table = location.connect().create_table(
        "players", SCHEMA, primary_key="id", partition_by="region"
    )
    table.insert(FIRST)
    return table


def test_a_json_lines_upsert_keeps_what_each_line_leaves_out(location, players):
    source = _put(
        location,
        players,
        "incoming/u.jsonl",
        [{"id": 1, "score": 25}, {"id": 2, "score": 3, "name": "x"}, {"id": 3, "region": "ap"}],
    )
    players.upsert(source)
    assert _visible(players) == {
        1: {"id": 1, "name": "A", "score": 25, "region": "eu"},
        2: {"id": 2, "name": "x", "score": 3, "region": "us"},
        3: {"id": 3, "name": None, "score": None, "region": "ap"},
    }
    # The partition column a line leaves out keeps its value: no row moved partition.
    assert _regions_of_entries(players) == {(1, "eu"): 1, (2, "us"): 1, (3, "ap"): 1}


def test_a_json_lines_update_sets_null_only_where_a_line_says_null(location, players):
    source = _put(
        location,
        players,
        "incoming/u.jsonl",
        [{"id": 1, "name": None}, {"id": 2, "score": None, "region": "eu"}],
    )
    players.update(source)
    assert _visible(players) == {
        1: {"id": 1, "name": None, "score": 10, "region": "eu"},
        2: {"id": 2, "name": "B", "score": None, "region": "eu"},
    }


def test_a_folder_and_a_glob_of_json_lines_in_a_transaction(location, players):
    _put(location, players, "in/a.jsonl", [{"id": 1, "name": "AA"}])
    _put(location, players, "in/b.jsonl", [{"id": 2, "score": 21}, {"id": 4, "name": "D"}])
    with players.transaction() as tx:
        tx.insert([{"id": 5, "name": "E", "score": 5, "region": "ap"}])
        tx.upsert(f"{location.uri}/in/")
        tx.update(f"{location.uri}/in/a*.jsonl")
    assert _visible(players) == {
        1: {"id": 1, "name": "AA", "score": 10, "region": "eu"},
        2: {"id": 2, "name": "B", "score": 21, "region": "us"},
        4: {"id": 4, "name": "D", "score": None, "region": None},
        5: {"id": 5, "name": "E", "score": 5, "region": "ap"},
    }


def test_lines_across_many_read_blocks_keep_their_own_masks(local_location, monkeypatch):
    import ledger.inputs

    monkeypatch.setattr(ledger.inputs, "TEXT_BLOCK_BYTES", 64)
    table = local_location.connect().create_table("players", SCHEMA, primary_key="id")
    table.insert([{"id": i, "name": f"n{i}", "score": i, "region": "eu"} for i in range(200)])
    rows = [{"id": i, "score": -i} if i % 3 else {"id": i, "name": None} for i in range(200)]
    path = Path(local_location.uri) / "u.jsonl"
    path.write_bytes(_lines(rows).replace(b"\n", b"\n\n", 7))  # blank lines count no row
    table.upsert(str(path))
    expected = {
        i: {"id": i, "name": f"n{i}", "score": -i, "region": "eu"}
        if i % 3
        else {"id": i, "name": None, "score": i, "region": "eu"}
        for i in range(200)
    }
    assert _visible(table) == expected


def test_an_insert_of_json_lines_fills_what_a_line_leaves_out_with_null(local_location):
    table = local_location.connect().create_table("players", SCHEMA, primary_key="id")
    path = Path(local_location.uri) / "i.jsonl"
    path.write_bytes(_lines([{"id": 1, "score": 1}, {"id": 2, "name": "b"}]))
    table.insert(str(path))
    assert _visible(table) == {
        1: {"id": 1, "name": None, "score": 1, "region": None},
        2: {"id": 2, "name": "b", "score": None, "region": None},
    }


def test_a_line_that_is_no_object_is_refused_and_nothing_is_written(location, players):
    players.store.put("in/bad.jsonl", b'{"id": 1, "name": "x"}\n[1, 2]\n')
    before = players.version
    with pytest.raises(ledger.MalformedSourceError, match=r"bad\.jsonl"):
        players.upsert(f"{location.uri}/in/bad.jsonl")
    assert players.version == before
    assert _visible(players)[1]["name"] == "A"


# --- the model: random JSON-lines writes against dicts and an in-place oracle ---------------


@st.composite
def _step(draw: st.DrawFn) -> tuple[str, list[list[dict[str, Any]]]]:
    """An operation and its rows, cut into one to three files (a folder of several)."""
    keys = draw(st.lists(st.integers(0, 5), min_size=1, max_size=6, unique=True))
    rows = [draw(partial_row(k)) for k in keys]
    cuts = sorted(draw(st.lists(st.integers(1, len(rows)), max_size=2, unique=True)))
    files = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True) if b > a]
    return draw(st.sampled_from(["upsert", "update"])), files


def _apply_to_oracle(
    oracle: dict[int, dict[str, Any]], operation: str, rows: list[dict[str, Any]]
) -> bool:
    """Apply one write in place; False (and no change) when an update names a missing key."""
    if operation == "update" and any(row["id"] not in oracle for row in rows):
        return False
    for row in rows:
        current = oracle.setdefault(row["id"], {"id": row["id"], **dict.fromkeys(VALUE_COLUMNS)})
        current.update(row)
    return True


@settings(max_examples=examples(25))
@given(steps=st.lists(_step(), min_size=1, max_size=4))
def test_random_json_lines_writes_match_dicts_and_an_in_place_oracle(steps):
    with tempfile.TemporaryDirectory() as folder:
        wh = ledger.connect(f"{folder}/warehouse")
        from_files, from_dicts = (
            wh.create_table(name, SCHEMA, primary_key="id", partition_by="region")
            for name in ("from_files", "from_dicts")
        )
        oracle: dict[int, dict[str, Any]] = {}
        for operation, files in steps:
            source = Path(folder) / uuid.uuid4().hex
            source.mkdir()
            for i, rows in enumerate(files):
                (source / f"part-{i}.jsonl").write_bytes(_lines(rows))
            every_row = [row for rows in files for row in rows]
            if _apply_to_oracle(oracle, operation, every_row):
                getattr(from_files, operation)(str(source))
                getattr(from_dicts, operation)(every_row)
            else:
                for table, data in ((from_files, str(source)), (from_dicts, every_row)):
                    with pytest.raises(ledger.KeyNotFoundError):
                        getattr(table, operation)(data)
            assert _visible(from_files) == oracle == _visible(from_dicts)
            assert _regions_of_entries(from_files) == {
                (key, row["region"]): 1 for key, row in oracle.items()
            }
