"""Replacing merges of some files keep ``count()`` exact (invariant 5 of the design).

A merge of a subset of files sees only part of a key's entries: a delete mark it holds may cancel
an insertion left in a file outside the merge, and an insertion it holds may be cancelled by a
mark outside it. Keeping only the key's latest entry then changes the sum of signs that
``count()`` reads from the log (it went negative), though the visible rows stay right.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import ledger
import views


def _table(tmp_path: Path) -> ledger.Table:
    return ledger.connect(str(tmp_path)).create_table(
        "t", {"k": "BIGINT", "v": "BIGINT"}, primary_key="k", policy="replacing"
    )


def _files(table: ledger.Table) -> list[str]:
    """Alive files, oldest first."""
    return [m.path for m in sorted(table.snapshot().markers(), key=lambda m: m.trx_min)]


def _answers(table: ledger.Table) -> tuple[int, list[tuple[int, int]], list[tuple[int, ...]]]:
    return table.count(), sorted(views.visible(table).fetchall()), views.totals(table).fetchall()


def test_a_deleted_key_merged_in_two_steps_counts_zero(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.insert([{"k": 1, "v": 1}])
    table.update([{"k": 1, "v": 2}])
    table.delete([1])
    _, update, delete = _files(table)

    table.merge(files=[update, delete])  # the mark cancelling the first insertion is left out
    assert _answers(table) == (0, [], [(0,)])
    table.merge(min_files=2)  # now that insertion and the newer mark meet

    assert _answers(table) == (0, [], [(0,)])


@pytest.mark.parametrize(
    ("writes", "merged"),
    [
        ("update, update", (1, 2)),  # the merged mark cancels an insertion outside the merge
        ("update, update", (0, 1)),  # the merged insertion is cancelled by a mark outside it
        ("update, delete", (1, 2)),
        ("update, delete", (0, 1)),
        ("update", (1,)),  # one file holding a mark and an insertion
    ],
)
def test_a_merge_of_some_files_keeps_every_answer(
    tmp_path: Path, writes: str, merged: tuple[int, ...]
) -> None:
    table = _table(tmp_path)
    table.insert([{"k": 1, "v": 1}, {"k": 2, "v": 0}])
    for number, write in enumerate(writes.split(", "), start=2):
        if write == "update":
            table.update([{"k": 1, "v": number}])
        else:
            table.delete([1])
    before = _answers(table)
    files = _files(table)

    table.merge(files=[files[i] for i in merged], min_files=1)
    assert _answers(table) == before
    table.merge(min_files=1)

    assert _answers(table) == before
    assert before[0] == len(before[1])
