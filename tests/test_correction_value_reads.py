"""Corrections of tables whose files hold no delete mark read the key and value columns of the
keys named, not the system columns (ledger/engines/duckdb/rmw.py, _live_rows_of_insertions):
a key with one insertion is its own visible row and live entry, and keys found more than once
are read again whole. Twin tables, one reading that way and one reading every column, take
the same writes and must agree on everything.
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
from ledger.engines.duckdb import rmw
from tests.conftest import examples
from tests.support.ledger_reads import policy_answer, raw_entries
from tests.test_correction_dense_reads import POLICIES, dense_reads

SCHEMA = {"k": "BIGINT", "j": "VARCHAR", "v": "BIGINT", "n": "BIGINT"}
KEYS = st.integers(0, 7)
JAYS = st.sampled_from(["x", "y"])
ROW = st.fixed_dictionaries(
    {"k": KEYS, "j": JAYS, "v": st.none() | st.integers(0, 4)}, optional={"n": st.just(1)}
)
EVOLVED_ROW = st.fixed_dictionaries(
    {"k": KEYS, "j": JAYS, "v": st.integers(0, 4), "n": st.just(1), "s": JAYS}
)
CORRECTED = st.lists(
    st.fixed_dictionaries(
        {"k": st.none() | KEYS, "j": JAYS}, optional={"v": st.integers(0, 6), "n": st.just(1)}
    ),
    min_size=1,
    max_size=6,
    unique_by=lambda row: (row["k"], row["j"]),
)
OPERATION = st.one_of(
    st.tuples(st.just("insert"), st.lists(ROW, min_size=1, max_size=6)),
    st.tuples(st.just("evolve"), st.lists(EVOLVED_ROW, min_size=1, max_size=3)),
    st.tuples(st.sampled_from(["update", "upsert"]), CORRECTED),
    st.tuples(st.just("delete"), CORRECTED),
    st.tuples(st.just("merge"), st.none()),
)


@contextmanager
def every_column_read(counted: list[int] | None = None) -> Iterator[None]:
    """Corrections read every column of the entries of their keys, as before the value-column
    read (or, given ``counted``, read as usual and count the reads answered that way)."""
    real = rmw._live_rows_of_insertions

    def never(*args: Any) -> None:
        return None

    def counting(*args: Any) -> Any:
        found = real(*args)
        if counted is not None and found is not None:
            counted.append(found[0].num_rows)
        return found

    rmw._live_rows_of_insertions = never if counted is None else counting  # type: ignore[assignment]
    try:
        yield
    finally:
        rmw._live_rows_of_insertions = real  # type: ignore[assignment]


def _outcome(table: ledger.Table, operation: str, argument: Any, key: list[str]) -> Any:
    """What an operation answered: its counts, or the type of error it raised."""
    try:
        if operation == "merge":
            return bool(table.merge().merged)
        if operation == "evolve":
            info = table.insert(argument, evolve_schema=True)
        elif operation == "delete":
            info = table.delete([{c: row[c] for c in key} for row in argument])
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
    max_examples=examples(8),  # as the semi-join twins; `make test-deep` runs hundreds
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    first=st.lists(ROW, min_size=1, max_size=8),
    operations=st.lists(OPERATION, min_size=1, max_size=5),
    partitioned=st.booleans(),
    composite=st.booleans(),
    dense=st.booleans(),
)
def test_value_column_reads_answer_as_reads_of_every_column(
    policy: str,
    first: list[dict[str, Any]],
    operations: list[Any],
    partitioned: bool,
    composite: bool,
    dense: bool,
) -> None:
    """Keys inserted several times (in one file and across files), absent and NULL keys,
    composite keys, partitions, a column added later, merges between, each of the five
    policies, read by the semi join or key first: every operation has the same outcome, the
    tables the same entries and answers."""
    # Every non-key column of an aggregating table is a measure, and text cannot be one.
    key = ["k", "j"] if composite or policy == "aggregating" else ["k"]
    with tempfile.TemporaryDirectory() as folder:
        twins = []
        for name in ("values", "every_column"):
            table = ledger.connect(f"{folder}/{name}").create_table(
                "t",
                SCHEMA,
                primary_key=key,
                partition_by="bucket(2, k)" if partitioned else None,
                policy=POLICIES[policy],
            )
            table.insert(first)
            twins.append(table)
        by_values, by_every_column = twins
        for operation, argument in operations:
            with dense_reads(always=dense):
                expected = _outcome(by_values, operation, argument, key)
                with every_column_read():
                    assert _outcome(by_every_column, operation, argument, key) == expected
        assert _entries(by_values) == _entries(by_every_column)
        assert policy_answer(by_values) == policy_answer(by_every_column)


def test_an_update_of_lone_insertions_reads_no_system_column() -> None:
    """Keys inserted once each are corrected from their key and value columns alone; a key
    inserted twice is read again whole and keeps the policy's answer."""
    with tempfile.TemporaryDirectory() as folder:
        table = ledger.connect(folder).create_table(
            "t", SCHEMA, primary_key="k", policy=POLICIES["replacing"]
        )
        table.insert([{"k": k, "j": "x", "v": 1} for k in range(6)])
        table.insert([{"k": 5, "j": "y", "v": 2}])
        counted: list[int] = []
        with every_column_read(counted):
            info = table.update([{"k": 1, "v": 3}, {"k": 5, "v": 4}])
        assert (info.inserted, info.deleted) == (2, 2)
        assert counted == [2]
        rows = {k: (j, v) for k, j, v, _ in policy_answer(table)["visible"]}
        assert rows[1] == ("x", 3) and rows[5] == ("y", 4)


@pytest.mark.parametrize("operation", ["delete", "update", "upsert"])
@pytest.mark.parametrize("first_jays", ["yxy", "xxy"])
def test_marks_sharing_a_dedup_key_cancel_in_the_order_of_their_entries(
    operation: str, first_jays: str
) -> None:
    """On a dedup table whose dedup key every row shares, a correction's marks are repeats of
    each other and only the earliest stays: it must cancel the earliest insertion kept, so the
    marks follow the order of the entries they cancel on every read path (lone keys, keys
    inserted several times, every column read). After a delete of every key no row shows."""
    answers = []
    with tempfile.TemporaryDirectory() as folder:
        for name in ("values", "every_column"):
            table = ledger.connect(f"{folder}/{name}").create_table(
                "t", SCHEMA, primary_key="k", policy=POLICIES["dedup"]
            )
            # Key 0 inserted three times (read whole), key 1 once (read by its values alone).
            table.insert(
                [{"k": 0, "j": j, "v": None} for j in first_jays] + [{"k": 1, "j": "x", "v": None}]
            )
            keys = [{"k": 0}, {"k": 1}]
            if name == "values":
                _outcome(table, operation, [{**k, "v": 3} for k in keys], ["k"])
            else:
                with every_column_read():
                    _outcome(table, operation, [{**k, "v": 3} for k in keys], ["k"])
            answers.append(policy_answer(table))
    by_values, by_every_column = answers
    assert by_values == by_every_column
    if operation == "delete":
        assert by_values["visible"] == []
    else:
        # The insertions share v=3: the earliest, key 0's (with the j of its visible row, the
        # latest of its three), stays; key 1's is a repeat of it.
        assert by_values["visible"] == [(0, first_jays[-1], 3, None)]
