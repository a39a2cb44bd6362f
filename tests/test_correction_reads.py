"""Corrections read only the entries of the keys they name: key columns first, pruned by the
files' key ranges and the row groups' statistics, then whole rows of the row groups holding
them (ledger/engines/duckdb/key_scan.py). Whatever the files look like, the answers stay those
of a table changed in place, and the entries found are exactly a scan joined with the keys.
"""

from __future__ import annotations

import datetime
import tempfile
from collections.abc import Iterator
from contextlib import closing, contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
import ledger.writer
from ledger.engines.duckdb import key_scan
from ledger.engines.duckdb.scan import scan_files
from ledger.engines.duckdb.session import connect
from ledger.errors import KeyNotFoundError, MissingKeyError
from ledger.log.entries import FileMarker
from ledger.sql import idents
from ledger.storage import open_store
from tests.conftest import examples
from tests.support.ledger_reads import policy_answer, sign_sums

SCHEMA = {"k": "BIGINT", "a": "BIGINT", "p": "VARCHAR"}
PARTITIONS = ["x", "y"]

# An insert batch: keys from one of three ranges (batches overlap or not), repeats allowed.
INSERT_ROW = st.builds(
    lambda base, offset, a, p: {"k": base + offset, "a": a, "p": p},
    st.sampled_from([0, 6, 12]),
    st.integers(0, 7),
    st.integers(-9, 9),
    st.sampled_from(PARTITIONS),
)
INSERTS = st.lists(st.lists(INSERT_ROW, min_size=1, max_size=12), min_size=1, max_size=4)
# A correction names keys present, absent (up to 24) or NULL, each once; a row may leave out
# ``a`` (it keeps its value).
KEEP = "keep"
CORRECTION_KEY = st.one_of(st.integers(0, 24), st.none())
CORRECTION = st.tuples(
    st.sampled_from(["update", "upsert", "delete"]),
    st.lists(
        st.tuples(
            CORRECTION_KEY,
            st.one_of(st.integers(-9, 9), st.just(KEEP)),
            st.sampled_from(PARTITIONS),
        ),
        min_size=1,
        max_size=8,
        unique_by=lambda row: row[0],
    ),
)


@contextmanager
def small_row_groups(rows: int) -> Iterator[None]:
    """Files of many row groups, so statistics rule some out (a test-only size)."""
    saved = ledger.writer.ROW_GROUP_ROWS
    ledger.writer.ROW_GROUP_ROWS = rows
    try:
        yield
    finally:
        ledger.writer.ROW_GROUP_ROWS = saved


class InPlace:
    """The oracle: rows changed in place; a key's visible row is its latest written row."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def keys(self) -> set[int]:
        return {row["k"] for row in self.rows}

    def insert(self, rows: list[dict[str, Any]]) -> None:
        self.rows += [dict(row) for row in rows]

    def replace(self, rows: list[dict[str, Any]]) -> None:
        latest = {row["k"]: row for row in self.rows}
        kept = [{"a": latest[r["k"]]["a"] if r["k"] in latest else None, **r} for r in rows]
        named = {row["k"] for row in rows}
        self.rows = [row for row in self.rows if row["k"] not in named] + kept

    def delete(self, keys: list[int]) -> int:
        present = self.keys() & set(keys)
        self.rows = [row for row in self.rows if row["k"] not in present]
        return len(present)

    def visible(self) -> list[tuple[Any, ...]]:
        latest: dict[int, dict[str, Any]] = {}
        for row in self.rows:
            latest[row["k"]] = row
        return sorted(((r["k"], r["a"], r["p"]) for r in latest.values()), key=repr)

    def counts(self) -> dict[tuple[Any, ...], int]:
        counts: dict[tuple[Any, ...], int] = {}
        for row in self.rows:
            counts[(row["k"],)] = counts.get((row["k"],), 0) + 1
        return counts


def _correct(table: ledger.Table, oracle: InPlace, operation: str, given: list[Any]) -> None:
    rows = [{"k": k, "p": p} if a == KEEP else {"k": k, "a": a, "p": p} for k, a, p in given]
    keys = [k for k, _, _ in given]
    version = table.version
    if None in keys:
        with pytest.raises(MissingKeyError):
            getattr(table, operation)(keys if operation == "delete" else rows)
        assert table.version == version  # nothing written
        return
    if operation == "delete":
        info = table.delete(keys)
        assert info.inserted == 0
        oracle.delete(keys)
        return
    if operation == "update" and not set(keys) <= oracle.keys():
        with pytest.raises(KeyNotFoundError):
            table.update(rows)
        assert table.version == version
        return
    info = getattr(table, operation)(rows)
    assert info.inserted == len(rows)
    oracle.replace(rows)


@pytest.mark.parametrize("policy", ["collapsing", "replacing", "dedup"])
@settings(
    max_examples=examples(12),  # `make test-deep` runs hundreds
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    inserts=INSERTS,
    corrections=st.lists(CORRECTION, min_size=1, max_size=4),
    partitioned=st.booleans(),
    merge_after=st.one_of(st.none(), st.integers(0, 3)),
)
def test_corrections_answer_like_a_table_changed_in_place(
    policy: str,
    inserts: list[list[dict[str, Any]]],
    corrections: list[tuple[str, list[Any]]],
    partitioned: bool,
    merge_after: int | None,
) -> None:
    """Random tables over several files (and partitions) with overlapping and disjoint key
    ranges and keys repeated across files; random updates, upserts and deletes of keys present,
    absent and NULL, some rows leaving a column out: every answer equals the oracle's."""
    with tempfile.TemporaryDirectory() as folder, small_row_groups(2):
        table = ledger.connect(folder).create_table(
            "t",
            SCHEMA,
            primary_key="k",
            partition_by=["p"] if partitioned else None,
            policy=policy,
        )
        oracle = InPlace()
        for batch in inserts:
            table.insert(batch)
            oracle.insert(batch)
        for step, (operation, given_rows) in enumerate(corrections):
            _correct(table, oracle, operation, given_rows)
            if step == merge_after:
                table.merge()
            answer = policy_answer(table)
            assert answer["visible"] == oracle.visible()
            if policy == "collapsing":
                assert sign_sums(table) == oracle.counts()


# --- the key-first read is a scan joined with the keys ------------------------------------------

TYPED_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", tz="UTC")),
        ("amount", pa.decimal128(9, 2)),
        ("n", pa.int64()),
        ("note", pa.string()),
        ("trx_id", pa.int64()),
        ("trx_seq", pa.int32()),
        ("dml_type", pa.int8()),
    ]
)
NAMES = st.sampled_from(["a", "b", "ü", "it's", ""])
DAYS = st.dates(datetime.date(2024, 1, 1), datetime.date(2024, 1, 4))
TIMES = st.sampled_from([datetime.datetime(2024, 1, 1, h, tzinfo=datetime.UTC) for h in range(3)])
AMOUNTS = st.sampled_from([Decimal("1.50"), Decimal("-2.00"), Decimal("0.00")])
ENTRY = st.fixed_dictionaries(
    {
        "name": st.one_of(st.none(), NAMES),
        "day": DAYS,
        "at": TIMES,
        "amount": AMOUNTS,
        "n": st.integers(-3, 3),
        "note": st.one_of(st.none(), NAMES),
        "trx_id": st.integers(1, 3),
        "trx_seq": st.integers(0, 5),
        "dml_type": st.sampled_from([1, -1]),
    }
)
KEY_SETS: list[list[str]] = [["name"], ["n"], ["day", "name"], ["at", "amount", "n"]]


def _write_files(folder: Path, files: list[list[dict[str, Any]]], sort: bool) -> list[FileMarker]:
    markers = []
    for number, rows in enumerate(files):
        table = pa.Table.from_pylist(rows, schema=TYPED_SCHEMA)
        if sort:  # each n once, increasing: a file sorted by a key of its own
            firsts = {row["n"]: row for row in reversed(rows)}
            ordered = [firsts[n] for n in sorted(firsts)]
            table = pa.Table.from_pylist(ordered, schema=TYPED_SCHEMA)
        if number % 2:  # an older file: a narrower column, one column missing
            table = table.drop_columns(["note"]).set_column(
                4, "n", table.column("n").cast(pa.int32())
            )
        path = f"_data/f{number}.parquet"
        (folder / "_data").mkdir(exist_ok=True)
        pq.write_table(table, folder / path, row_group_size=3)
        markers.append(FileMarker(path, 0, 0, table.num_rows, 0, 1, 3))
    return markers


def _scanned(folder: Path, markers: list[FileMarker], columns: list[str], keys: pa.Table) -> Any:
    store = open_store(str(folder))
    with closing(connect()) as con:
        scan_files(con, store, "", markers, TYPED_SCHEMA).create_view("entries")
        con.register("wanted", keys)
        found = con.sql(f"SELECT * FROM entries SEMI JOIN wanted USING ({idents(columns)})")
        return sorted(found.to_arrow_table().to_pylist(), key=repr)


@settings(max_examples=examples(30), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    files=st.lists(st.lists(ENTRY, max_size=10), min_size=1, max_size=3),
    wanted=st.lists(ENTRY, max_size=6),
    key_set=st.sampled_from(KEY_SETS),
    sort=st.booleans(),
)
def test_key_entries_are_a_scan_joined_with_the_keys(
    files: list[list[dict[str, Any]]],
    wanted: list[dict[str, Any]],
    key_set: list[str],
    sort: bool,
) -> None:
    """Keys of text, dates, timestamps, decimals and integers, alone or together, NULL among
    them, some twice; files with several row groups, some sorted by n (each n once), one with
    a narrower integer column and one column fewer: the entries found are those of DuckDB's
    scan joined with the keys."""
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        markers = _write_files(folder, files, sort)
        keys = pa.Table.from_pylist(wanted, schema=TYPED_SCHEMA).select(key_set)
        found = key_scan.key_entries(
            open_store(str(folder)), "", markers, TYPED_SCHEMA, key_set, keys
        )
        assert found is not None and found.schema == TYPED_SCHEMA
        assert sorted(found.to_pylist(), key=repr) == _scanned(folder, markers, key_set, keys)
        held = key_scan.holds_keys(
            open_store(str(folder)), "", markers, TYPED_SCHEMA, key_set, keys
        )
        assert held == (found.num_rows > 0)


def test_floating_point_keys_are_left_to_a_scan(tmp_path: Path) -> None:
    """NaN and -0.0 compare differently in Arrow and in SQL: keys of such a column (tables
    refuse them as primary keys, but a read may still be asked) are not read key-first."""
    schema = pa.schema([("x", pa.float64()), ("dml_type", pa.int8())])
    store = open_store(str(tmp_path))
    keys = pa.table({"x": [0.0]})
    assert key_scan.key_entries(store, "", [], schema, ["x"], keys) is None
    assert key_scan.holds_keys(store, "", [], schema, ["x"], keys) is None


def test_row_groups_without_a_wanted_key_are_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A correction of a few keys of a large sorted file reads the key column of the row
    groups whose statistics may hold them, and whole rows of those holding them only (without
    the system columns: a file without delete marks gives each key one insertion at most)."""
    monkeypatch.setattr(ledger.writer, "ROW_GROUP_ROWS", 100)
    table = ledger.connect(str(tmp_path)).create_table("t", SCHEMA, primary_key="k")
    table.insert([{"k": k, "a": k, "p": "x"} for k in range(1_000)])
    reads: list[tuple[list[int], list[str] | None]] = []
    real = pq.ParquetFile.read_row_groups

    def counted(self: pq.ParquetFile, groups: list[int], columns: Any = None, **kw: Any) -> Any:
        reads.append((list(groups), columns))
        return real(self, groups, columns=columns, **kw)

    monkeypatch.setattr(pq.ParquetFile, "read_row_groups", counted)
    table.update([{"k": 150, "a": -1}, {"k": 151, "a": -2}, {"k": 720, "a": -3}])
    assert reads == [([1, 7], ["k"]), ([1, 7], ["a", "p"])]
    monkeypatch.undo()
    assert {r["k"]: r["a"] for r in table.to_arrow().to_pylist()}[720] == -3


def test_a_key_named_twice_finds_its_entries_once(tmp_path: Path) -> None:
    """In a file sorted by its key (each key once), keys are found by binary search: a key
    named twice, or NULL, still yields each entry once (as the scan joined with the keys)."""
    base = {"name": "a", "day": datetime.date(2024, 1, 1), "at": None, "amount": None}
    system = {"note": None, "trx_id": 1, "trx_seq": 0, "dml_type": 1}
    rows = [{**base, "n": n, **system} for n in range(0, 20, 2)]
    markers = _write_files(tmp_path, [rows], sort=True)
    keys = pa.table({"n": pa.array([4, 4, 18, 18, 5, None, 40, -1], pa.int64())})
    found = key_scan.key_entries(open_store(str(tmp_path)), "", markers, TYPED_SCHEMA, ["n"], keys)
    assert found is not None
    assert sorted(found.to_pylist(), key=repr) == _scanned(tmp_path, markers, ["n"], keys)
    assert sorted(found.column("n").to_pylist()) == [4, 18]
