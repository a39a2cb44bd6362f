"""The visible statement is made once per table state and request (ledger/reads/visible.py):
repeated reads of an unchanged table reuse it, every commit makes a new one, a statement that
reads a relation bound on its own connection (keys lonely files share) is never reused, and
the plan threshold is part of the request. Reads after every write of random ledgers (every
built-in policy, both plans) answer as the plain tree over every entry."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from ledger.reads import visible as visible_reads
from tests.conftest import examples
from tests.test_visible_files import POLICIES, plain_visible
from tests.test_visible_latest_insertions import _comparable
from tests.test_visible_small_tables import _write

SCHEMA = {"k": "BIGINT", "v": "DOUBLE", "n": "BIGINT", "p": "INTEGER"}


@contextmanager
def _small_below(entries: int) -> Iterator[None]:
    kept = visible_reads.SMALL_TABLE_ENTRIES
    visible_reads.SMALL_TABLE_ENTRIES = entries
    try:
        yield
    finally:
        visible_reads.SMALL_TABLE_ENTRIES = kept


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the statements made anew (not reused)."""
    calls: list[int] = []
    make: Callable[..., Any] = visible_reads._make_statement

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return make(*args, **kwargs)

    monkeypatch.setattr(visible_reads, "_make_statement", counted)
    return calls


def _visible(table: ledger.Table) -> list[tuple[Any, ...]]:
    return sorted(views.visible(table).fetchall(), key=repr)


def test_a_statement_is_made_once_per_state_and_again_after_a_commit(made: list[int]) -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k")
        table.insert([{"k": i, "v": i / 2, "n": i, "p": 1} for i in range(10)])
        table.update([{"k": 3, "v": 9.5}])
        first = _visible(table)
        assert _visible(table) == first == plain_visible(table.snapshot(), False)
        assert len(made) == 1
        table.delete([(4,)])
        after = _visible(table)
        assert len(made) == 2
        assert after == plain_visible(table.snapshot(), False)
        assert [r for r in first if r[0] != 4] == after
        with _small_below(0):  # another plan threshold: another statement
            assert _visible(table) == after
        assert len(made) == 3
        assert table.to_arrow(columns=["k"], where="k > 7").column("k").to_pylist() == [8, 9]
        assert len(made) == 4  # columns and where are part of the request


def test_keys_shared_by_lonely_files_are_read_on_each_call(made: list[int]) -> None:
    """Two inserts sharing a key make lonely files whose shared keys are bound on the read's
    own connection: such a statement is made again for every read."""
    with tempfile.TemporaryDirectory() as root, _small_below(0):
        table = ledger.connect(root).create_table("t", SCHEMA, primary_key="k")
        table.insert([{"k": i, "v": 1.0, "n": i, "p": 1} for i in range(5)])
        table.insert([{"k": i, "v": 2.0, "n": i, "p": 2} for i in range(4, 9)])
        table.append_entries(
            [
                {"k": 2, "v": 1.0, "n": 2, "p": 1, "dml_type": -1},
                {"k": 2, "v": 3.0, "n": 2, "p": 3, "dml_type": 1},
            ]
        )
        expected = plain_visible(table.snapshot(), False)
        assert {r[0] for r in expected} == set(range(9))
        for _ in range(3):
            assert _visible(table) == expected
        assert len(made) == 3


@pytest.mark.parametrize("policy", list(POLICIES))
@settings(max_examples=examples(10), deadline=None)
@given(data=st.data())
def test_repeated_reads_answer_as_the_plain_tree_after_every_write(
    policy: str, data: st.DataObject
) -> None:
    small = data.draw(st.sampled_from([0, visible_reads.SMALL_TABLE_ENTRIES]), label="small below")
    partitioned = data.draw(st.booleans(), label="partitioned")
    with tempfile.TemporaryDirectory() as root, _small_below(small):
        table = ledger.connect(root).create_table(
            "t",
            dict(SCHEMA),
            primary_key="k",
            policy=POLICIES[policy],
            partition_by=["p"] if partitioned else None,
        )
        columns = list(SCHEMA)
        for _ in range(data.draw(st.integers(1, 5), label="writes")):
            _write(data, table, policy, columns)
            expected = _comparable(plain_visible(table.snapshot(), False))
            assert _comparable(_visible(table)) == expected
            assert _comparable(_visible(table)) == expected
