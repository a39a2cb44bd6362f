"""Visible rows of deleted keys (ledger/sql/visible.py, ``_lonely_rows_left_by_marks``: keys
with marks and no insertion in the files holding marks, settled against their lonely row
without the per-tuple cancellation), on random ledgers of inserts, blind duplicate insertions,
deletes (of present and absent keys), re-inserts, upserts and hand-written marks of visible
rows (NaN, signed zeros, NULL values), in several files of different ages, with and without
partitions. Signed tables are checked against an in-place oracle; every policy against the
plain tree over every entry.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import tempfile
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.engines.duckdb.session import connect
from ledger.errors import UnmatchedDeleteMarkError
from ledger.reads import visible as visible_reads
from tests.conftest import examples
from tests.test_visible_files import POLICIES, plain_visible
from tests.test_visible_latest_insertions import _comparable, read_visible

SETTINGS = settings(max_examples=examples(15), deadline=None)
COLUMNS = ["k", "v", "n", "p"]
VALUES = st.fixed_dictionaries(
    {
        "v": st.sampled_from([0.0, -0.0, 1.5, math.nan, None]),
        "n": st.sampled_from([0, 1, None]),
        "p": st.integers(0, 1),
    }
)
SIGNED = ("collapsing", "custom")


def _group(row: dict[str, Any]) -> tuple[Any, ...]:
    """The values as the per-tuple cancellation groups them: NaN meets NaN, -0.0 is apart."""
    v = row["v"]
    shown = "nan" if isinstance(v, float) and math.isnan(v) else v
    negative_zero = isinstance(v, float) and v == 0.0 and math.copysign(1.0, v) < 0
    return (shown, negative_zero, row["n"], row["p"])


@dataclass
class SignedOracle:
    """Per key and value tuple: (net sign, order of the latest insertion), changed in place."""

    tuples: dict[int, dict[tuple[Any, ...], list[Any]]] = field(default_factory=dict)
    order: Iterator[int] = field(default_factory=itertools.count)

    def insert(self, row: dict[str, Any]) -> None:
        entry = self.tuples.setdefault(row["k"], {}).setdefault(_group(row), [0, 0, row])
        entry[0] += 1
        entry[1] = next(self.order)
        entry[2] = row

    def mark(self, row: dict[str, Any]) -> None:
        entry = self.tuples.setdefault(row["k"], {}).setdefault(_group(row), [0, -1, row])
        entry[0] -= 1

    def delete(self, key: int) -> None:
        """A read-modify-write cancels every live entry of the key."""
        for entry in self.tuples.get(key, {}).values():
            entry[0] = min(entry[0], 0)

    def visible(self) -> list[dict[str, Any]]:
        rows = []
        for groups in self.tuples.values():
            live = [entry for entry in groups.values() if entry[0] > 0]
            if live:
                rows.append(max(live, key=lambda entry: entry[1])[2])
        return rows


def _rows(data: st.DataObject, label: str, low: int) -> list[dict[str, Any]]:
    keys = data.draw(
        st.lists(st.integers(low, low + 12), min_size=1, max_size=6, unique=True), label=label
    )
    return [{"k": k, **data.draw(VALUES, label=f"{label} values")} for k in keys]


@pytest.mark.parametrize("policy", list(POLICIES))
@SETTINGS
@given(data=st.data())
def test_visible_rows_after_deletes_match_the_oracle(policy: str, data: st.DataObject) -> None:
    partitioned = data.draw(st.booleans(), label="partitioned")
    oracle = SignedOracle()
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t",
            {"k": "BIGINT", "v": "DOUBLE", "n": "BIGINT", "p": "INTEGER"},
            primary_key=["k"],
            policy=POLICIES[policy],
            partition_by=["p"] if partitioned else None,
        )
        for _ in range(data.draw(st.integers(1, 3), label="older inserts")):
            rows = _rows(data, "insert", data.draw(st.integers(0, 20), label="low"))
            table.insert(rows)
            for row in rows:
                oracle.insert(row)
        for _ in range(data.draw(st.integers(1, 5), label="later writes")):
            kind = data.draw(
                st.sampled_from(["delete", "delete", "marks", "reinsert", "upsert", "blind"]),
                label="write",
            )
            if kind == "delete":
                keys = data.draw(st.lists(st.integers(0, 35), min_size=1, max_size=6), label="del")
                table.delete([(k,) for k in keys])
                for k in keys:
                    oracle.delete(k)
            elif kind == "marks" and policy != "aggregating":
                visible = oracle.visible()
                if not visible:
                    continue
                marked = data.draw(st.lists(st.sampled_from(visible), max_size=3), label="marks")
                with contextlib.suppress(UnmatchedDeleteMarkError):  # refused, nothing written
                    table.append_entries([{**row, "dml_type": -1} for row in marked])
                    for row in marked:
                        oracle.mark(row)
            elif kind == "upsert":
                rows = _rows(data, "upsert", 0)
                table.upsert(rows)
                for row in rows:
                    oracle.delete(row["k"])
                    oracle.insert(row)
            else:  # a re-insert of deleted keys, or blind duplicates of present ones
                rows = _rows(data, kind, 0)
                table.insert(rows)
                for row in rows:
                    oracle.insert(row)
        snap = table.snapshot()
        system_columns = data.draw(st.booleans(), label="system columns")
        got = _comparable(read_visible(snap, system_columns))
        assert got == _comparable(plain_visible(snap, system_columns))
        if policy in SIGNED:
            want = [tuple(row[c] for c in COLUMNS) for row in oracle.visible()]
            assert _comparable(read_visible(snap, False)) == _comparable(want)


def test_a_deleted_older_row_is_settled_without_the_cancellation() -> None:
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t", {"k": "BIGINT", "v": "DOUBLE"}, primary_key=["k"]
        )
        table.insert([{"k": k, "v": 0.0} for k in range(0, 10, 2)])
        table.insert([{"k": k, "v": 1.0} for k in range(1, 10, 2)])
        table.delete([(2,), (3,), (11,)])
        table.append_entries([{"k": 4, "v": -0.0, "dml_type": 1}])
        table.append_entries([{"k": 4, "v": -0.0, "dml_type": -1}])
        snap = table.snapshot()
        with closing(connect()) as con:
            text = visible_reads.visible_statement(snap, con)[0]
        assert "__ledger_deleted_marks" in text
        want = [(k, 1.0 if k % 2 else 0.0) for k in range(10) if k not in (2, 3)]
        assert _comparable(read_visible(snap, False)) == _comparable(want)


def test_a_mark_of_the_other_zero_leaves_an_older_row_visible(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A mark of -0.0 meets 0.0 in SQL but not in the cancellation's groups (nor does a mark
    of a NULL or NaN value miss its twin): the deleted keys are paired as the groups pair."""
    # append_entries now refuses a mark of the other zero; a ledger may still hold one (written
    # before that check compared the sign of zero), so the marks are written unchecked here.
    monkeypatch.setattr(ledger.Transaction, "check_delete_marks", lambda self, incoming: None)
    with tempfile.TemporaryDirectory() as root:
        table = ledger.connect(root).create_table(
            "t", {"k": "BIGINT", "v": "DOUBLE"}, primary_key=["k"]
        )
        table.insert([{"k": 1, "v": 0.0}, {"k": 2, "v": math.nan}, {"k": 3, "v": None}])
        table.insert([{"k": 4, "v": -0.0}])
        for k, v in ((1, -0.0), (2, math.nan), (3, None), (4, 0.0)):
            table.append_entries([{"k": k, "v": v, "dml_type": -1}])
        snap = table.snapshot()
        for system_columns in (False, True):
            got = _comparable(read_visible(snap, system_columns))
            assert got == _comparable(plain_visible(snap, system_columns))
        assert _comparable(read_visible(snap, False)) == _comparable([(1, 0.0), (4, -0.0)])


@pytest.fixture(autouse=True, scope="module")
def _plans_of_large_tables() -> Iterator[None]:
    """These ledgers are small: read them with the plans of large tables (lonely files apart)."""
    kept = visible_reads.SMALL_TABLE_ENTRIES
    visible_reads.SMALL_TABLE_ENTRIES = 0
    yield
    visible_reads.SMALL_TABLE_ENTRIES = kept
