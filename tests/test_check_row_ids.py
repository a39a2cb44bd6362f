"""``Table.check(data)`` raises what ``insert(data)`` raises for a ``_row_id`` the caller gives
(same type, same message): a NULL, a value that is no BIGINT, an id the table has not generated,
a ``_row_id`` on a table with a primary key; and accepts what insert accepts."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

ROW_IDS = st.one_of(
    st.none(),
    st.integers(-5, 2**33),
    st.integers(2**40, 2**62),
    st.sampled_from(["x", "7", 1.5, 2.0]),
)


def _outcome(call: Any) -> tuple[str, str]:
    try:
        call()
    except ledger.LedgerError as e:
        return type(e).__name__, str(e)
    return "accepted", ""


@settings(max_examples=examples(25))
@given(
    row_ids=st.lists(ROW_IDS, min_size=1, max_size=3),
    keyed=st.booleans(),
    amount=st.sampled_from([1, "2.5", "x"]),
)
def test_check_raises_what_insert_raises(tmp_path_factory, row_ids, keyed, amount):
    wh = ledger.connect(str(tmp_path_factory.mktemp("r")))
    schema = {"id": "BIGINT", "amount": "DOUBLE"}
    table = wh.create_table("t", schema, primary_key="id" if keyed else None)
    table.insert([{"id": 0, "amount": 1}])  # ids of the first transaction are generated
    rows = [{"id": i + 1, "amount": amount, "_row_id": r} for i, r in enumerate(row_ids)]
    checked = _outcome(lambda: table.check(rows))
    before = table.version
    inserted = _outcome(lambda: table.insert(rows))
    assert checked == inserted
    assert table.version == before + (inserted[0] == "accepted")
