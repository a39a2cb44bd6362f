"""An aggregating merge sums a floating-point measure in one order, the entries' own: merging the
same files gives the same bits every time, on every path (DuckDB's Parquet writer, the streaming
writer, a Spark task), whatever order the engine's threads read the files in. Floating-point
addition is not associative, so a sum in read order differs in its last bits from run to run,
and a group whose measures net to almost zero would be kept by one merge and dropped by another.

The oracle adds ``dml_type * value`` entry by entry in (``trx_id``, ``trx_seq``) order, in
Python, from the raw ledger read before the merge.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples
from tests.test_merge_invariance import _every_transaction_settled, _scratch_warehouse

SCHEMA = {"k": "BIGINT", "n": "BIGINT", "total": "BIGINT", "score": "DOUBLE"}
POLICY = {"name": "aggregating", "measures": {"n": "count", "total": "sum", "score": "sum"}}
# Values whose sums depend on their order (0.1 + 1e16 - 1e16 is 0.0, 0.1 - 1e16 + 1e16 is 0.0
# too, but 1e16 - 1e16 + 0.1 is 0.1), among values that keep a group alive.
SCORES = st.none() | st.sampled_from([0.1, -2.5, 1e3 / 3, 1e16, -1e16, 0.7])
ROW = st.fixed_dictionaries(
    {
        "k": st.integers(min_value=0, max_value=2),
        "n": st.just(1),
        "total": st.integers(min_value=-2, max_value=2),
        "score": SCORES,
    }
)


def _ordered_totals(entries: list[tuple[Any, ...]]) -> dict[int, tuple[int, int, float | None]]:
    """Per key, the count, the integer sum and the score summed in entry order; keys whose
    measures all net to zero are dropped, as the policy drops them."""
    by_key: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: (e[1], e[2], e[3], e[6] is None, e[6] or 0.0)):
        by_key[entry[0]].append(entry)
    totals = {}
    for key, rows in by_key.items():
        count = sum(dml * n for _, _, _, dml, n, _, _ in rows)
        total = sum(dml * t for _, _, _, dml, _, t, _ in rows if t is not None)
        score: float | None = None
        for *_, dml, _, _, value in rows:
            if value is not None:
                score = (0.0 if score is None else score) + dml * value
        if count == 0 and total == 0 and not score:
            continue
        totals[key] = (count, total, score)
    return totals


@settings(max_examples=examples(8), deadline=None)
@given(
    partition_by=st.sampled_from([None, "bucket(2, k)"]),
    writes=st.lists(
        st.tuples(st.lists(ROW, min_size=1, max_size=4), st.sets(st.integers(0, 2), max_size=1)),
        min_size=3,
        max_size=8,
    ),
)
def test_an_aggregating_merge_sums_floats_in_entry_order(
    partition_by: str | None, writes: list[tuple[list[dict[str, Any]], set[int]]]
) -> None:
    with _scratch_warehouse() as warehouse, _every_transaction_settled():
        table = warehouse.create_table(
            "t", SCHEMA, primary_key="k", partition_by=partition_by, policy=POLICY
        )
        for rows, deleted in writes:
            table.insert(rows)
            if deleted:
                table.delete(sorted(deleted))
        columns = "k, trx_id, trx_seq, dml_type, n, total, score"
        expected = _ordered_totals(table.scan().project(columns).fetchall())
        table.merge(files=[m.path for m in table.snapshot().markers()])
        merged = table.scan().project(columns).fetchall()
        assert sorted(k for k, *_ in merged) == sorted(expected)  # one entry per live key
        got = {k: (dml * n, dml * total, score) for k, _, _, dml, n, total, score in merged}
        assert {k: repr(v) for k, v in got.items()} == {k: repr(v) for k, v in expected.items()}


def test_merging_the_same_files_twice_writes_the_same_sums(tmp_path: Any) -> None:
    """Eight files of one key whose scores sum differently in different orders: two merges of
    copies of the same table write the same bits."""
    scores = [0.1, -2.5, 1e3 / 3, 0.7, 1e16, 0.1, -1e16, 0.3]
    answers = set()
    for copy in range(2):
        table = ledger.connect(str(tmp_path / f"copy{copy}")).create_table(
            "t", SCHEMA, primary_key="k", policy=POLICY
        )
        for score in scores:
            table.insert([{"k": 0, "n": 1, "total": 1, "score": score}])
        with _every_transaction_settled():
            table.merge(files=[m.path for m in table.snapshot().markers()])
        answers.add(repr(table.scan().project("score").fetchall()))
    expected = 0.0
    for score in scores:
        expected += score
    assert answers == {repr([(expected,)])}
