"""Corrections naming many keys of a table (one per few rows, as when 1% of a large table is
corrected) read the entries of their keys by a DuckDB semi join instead of the key-first read
(ledger/engines/duckdb/key_scan.py). Forced on small tables here, that read gives the same
entries as a scan joined with the keys, and every operation the same outcome and every policy
the same answers as the key-first read.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ledger
from ledger.engines.duckdb import key_scan
from tests import test_correction_reads as key_first
from tests.conftest import examples
from tests.support.ledger_reads import policy_answer, raw_entries

_ALWAYS = {"DENSE_MIN_ROWS": 0, "DENSE_ROWS_PER_KEY": 1 << 40}
_NEVER = {"DENSE_MIN_ROWS": 1 << 62}


@contextmanager
def dense_reads(always: bool, joined: list[int] | None = None) -> Iterator[None]:
    """Reads of given keys by the DuckDB semi join whenever it can (``always``), or never;
    ``joined`` counts the reads it answered."""
    saved = {name: getattr(key_scan, name) for name in ("DENSE_MIN_ROWS", "DENSE_ROWS_PER_KEY")}
    real = key_scan._joined_by_duckdb

    def counted(*args: Any) -> Any:
        found = real(*args)
        if joined is not None and found is not None:
            joined.append(found.num_rows)
        return found

    for name, value in (_ALWAYS if always else _NEVER).items():
        setattr(key_scan, name, value)
    key_scan._joined_by_duckdb = counted  # type: ignore[assignment]
    try:
        yield
    finally:
        key_scan._joined_by_duckdb = real  # type: ignore[assignment]
        for name, value in saved.items():
            setattr(key_scan, name, value)


def test_dense_keys_are_a_scan_joined_with_the_keys() -> None:
    """Keys of text, dates, timestamps, decimals and integers, alone or composite, NULL among
    them, some twice; files with a narrower column and a missing one: the semi join's entries,
    in the table's exact types, are those of the scan joined with the keys."""
    joined: list[int] = []
    with dense_reads(always=True, joined=joined):
        key_first.test_key_entries_are_a_scan_joined_with_the_keys()
    assert joined  # the semi join answered (not only the key-first read)


@pytest.mark.parametrize("policy", ["collapsing", "replacing", "dedup"])
def test_dense_corrections_answer_like_a_table_changed_in_place(policy: str) -> None:
    """The in-place oracle of the key-first read, with every read of keys a semi join:
    duplicates of a key across files, absent and NULL keys, partitions, merges between."""
    joined: list[int] = []
    with dense_reads(always=True, joined=joined):
        key_first.test_corrections_answer_like_a_table_changed_in_place(policy=policy)
    assert joined


# --- the semi join against the key-first read, for every policy ----------------------------------

SCHEMA = {"k": "BIGINT", "v": "BIGINT", "n": "BIGINT"}
POLICIES: dict[str, Any] = {
    "collapsing": "collapsing",
    "replacing": {"name": "replacing", "version_column": "v"},
    "dedup": {"name": "dedup", "dedup_key": ["v"]},
    "aggregating": {"name": "aggregating", "measures": {"v": "sum", "n": "count"}},
    "custom": {"name": "custom", "sql": "SELECT * FROM entries"},
}
KEYS = st.integers(0, 9)
ROW = st.fixed_dictionaries(
    {"k": KEYS, "v": st.none() | st.integers(0, 4)}, optional={"n": st.just(1)}
)
EVOLVED_ROW = st.fixed_dictionaries(
    {"k": KEYS, "v": st.integers(0, 4), "n": st.just(1), "s": st.sampled_from(["x", "y"])}
)
CORRECTED = st.lists(
    st.fixed_dictionaries(
        {"k": st.none() | KEYS}, optional={"v": st.integers(0, 6), "n": st.just(1)}
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda row: row["k"],
)
OPERATION = st.one_of(
    st.tuples(st.just("insert"), st.lists(ROW, min_size=1, max_size=6)),
    st.tuples(st.just("evolve"), st.lists(EVOLVED_ROW, min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["update", "upsert"]), CORRECTED),
    st.tuples(st.just("delete"), st.lists(st.none() | KEYS, min_size=1, max_size=6)),
    st.tuples(st.just("merge"), st.none()),
)


def _outcome(table: ledger.Table, operation: str, argument: Any) -> Any:
    """What an operation answered: its counts, or the type of error it raised."""
    try:
        if operation == "merge":
            return bool(table.merge().merged)
        if operation == "evolve":
            info = table.insert(argument, evolve_schema=True)
        else:
            info = getattr(table, operation)(argument)
    except ledger.LedgerError as e:
        return type(e).__name__
    return (info.inserted, info.deleted)


def _entries(table: ledger.Table) -> list[str]:
    """Every entry without the ids of its transaction (each warehouse numbers its own)."""
    return sorted(
        repr(sorted((k, v) for k, v in entry.items() if k not in ("trx_id", "trx_seq")))
        for entry in raw_entries(table)
    )


@pytest.mark.parametrize("policy", sorted(POLICIES))
@settings(
    max_examples=examples(8),  # `make test-deep` runs hundreds
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    first=st.lists(ROW, min_size=1, max_size=8),
    operations=st.lists(OPERATION, min_size=1, max_size=6),
    partitioned=st.booleans(),
)
def test_the_semi_join_answers_as_the_key_first_read(
    policy: str, first: list[dict[str, Any]], operations: list[Any], partitioned: bool
) -> None:
    """Twin tables take the same writes, one reading keys by the semi join, the other key
    first: every operation has the same outcome, the tables the same entries and answers.
    Keys repeated across files, absent and NULL, partitions, a column added later (files
    lacking it), merges between, each of the five policies."""
    with tempfile.TemporaryDirectory() as folder:
        twins = []
        for name in ("joined", "key_first"):
            table = ledger.connect(f"{folder}/{name}").create_table(
                "t",
                SCHEMA,
                primary_key="k",
                partition_by="bucket(2, k)" if partitioned else None,
                policy=POLICIES[policy],
            )
            table.insert(first)
            twins.append(table)
        joined, by_keys = twins
        for operation, argument in operations:
            with dense_reads(always=True):
                expected = _outcome(joined, operation, argument)
            with dense_reads(always=False):
                assert _outcome(by_keys, operation, argument) == expected
        assert _entries(joined) == _entries(by_keys)
        assert policy_answer(joined) == policy_answer(by_keys)
