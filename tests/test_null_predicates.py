"""Filters on NULL over small files: `IS NULL`, `IS NOT NULL`, `=` and `coalesce` match exactly
the rows a plain reading of the rows says, through `views.rows`, `delete_where`, `count()` and
`totals`. Small inserts leave a text column without a dictionary; a row group whose non-NULL
values are all equal and which holds NULLs was read wrongly by DuckDB 2.0.0 when the file had
no page index (docs/format.md, data files)."""

from __future__ import annotations

import datetime
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import Location, examples

SCHEMA = {"id": "BIGINT", "g": "VARCHAR", "d": "DECIMAL(10,2)", "day": "DATE", "amount": "BIGINT"}


def test_delete_where_is_null_deletes_only_the_null_rows(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "orders", {"id": "BIGINT", "region": "VARCHAR", "amount": "BIGINT"}, primary_key="id"
    )
    for i in range(5):
        table.insert(
            [
                {"id": 2 * i, "region": "EU", "amount": 10},
                {"id": 2 * i + 1, "region": None, "amount": 1},
            ]
        )
    assert views.rows(table, where="region is null").num_rows == 5
    assert views.rows(table, where="coalesce(region, '') = ''").num_rows == 5
    assert views.rows(table, where="region is not distinct from null").num_rows == 5
    assert views.rows(table, where="region is distinct from 'EU'").num_rows == 5
    assert table.delete_where("region is null").deleted == 5
    assert table.count() == 5
    assert views.totals(table, by="region", sum="amount").fetchall() == [("EU", 5, 50)]
    assert sorted(r[0] for r in views.visible(table).fetchall()) == [0, 2, 4, 6, 8]
    table.merge(min_files=2)
    assert views.totals(table, by="region", sum="amount").fetchall() == [("EU", 5, 50)]
    assert table.count() == 5


def test_a_delete_mark_carries_the_deleted_rows_values(local_location: Location) -> None:
    table = local_location.connect().create_table(
        "t", {"k": "BIGINT", "g": "VARCHAR", "f": "DOUBLE"}, primary_key="k"
    )
    table.insert([{"k": 1, "g": "b", "f": 1.0}, {"k": 2, "g": None, "f": None}])
    assert table.delete_where("g is null").deleted == 1
    assert views.visible(table).fetchall() == [(1, "b", 1.0)]
    assert views.totals(table, by="g", sum="f").fetchall() == [("b", 1, 1.0)]
    assert views.totals(table, sum="f").fetchall() == [(1, 1.0)]


# --- property: random small inserts against a plain reading of the rows -------------------------

TEXTS = st.sampled_from(["a", "b", None])
DECIMALS = st.sampled_from([Decimal("1.50"), Decimal("2.00"), None])
DAYS = st.sampled_from([datetime.date(2024, 1, 1), datetime.date(2024, 2, 1), None])
ROW = st.fixed_dictionaries({"g": TEXTS, "d": DECIMALS, "day": DAYS, "amount": st.integers(0, 9)})
INSERTS = st.lists(st.lists(ROW, min_size=1, max_size=4), min_size=1, max_size=4)


def _is_null(column: str) -> tuple[str, Any]:
    return f"{column} is null", lambda row: row[column] is None


def _is_not_null(column: str) -> tuple[str, Any]:
    return f"{column} is not null", lambda row: row[column] is not None


PREDICATES: list[tuple[str, Any]] = [
    *(_is_null(c) for c in ("g", "d", "day")),
    *(_is_not_null(c) for c in ("g", "d", "day")),
    ("g = 'a'", lambda row: row["g"] == "a"),
    ("coalesce(g, '') = ''", lambda row: row["g"] is None),
    ("coalesce(g, 'a') = 'a'", lambda row: row["g"] in (None, "a")),
    ("d = 1.50", lambda row: row["d"] == Decimal("1.50")),
    ("coalesce(d, 0) = 0", lambda row: row["d"] is None),
    ("day = DATE '2024-01-01'", lambda row: row["day"] == datetime.date(2024, 1, 1)),
    ("g is distinct from 'a'", lambda row: row["g"] != "a"),
]


@settings(max_examples=examples(25))
@given(inserts=INSERTS, chosen=st.sampled_from(PREDICATES))
def test_null_predicates_match_a_plain_reading(
    tmp_path_factory: Any, inserts: list[list[dict[str, Any]]], chosen: tuple[str, Any]
) -> None:
    where, matches = chosen
    table = ledger.connect(str(tmp_path_factory.mktemp("w"))).create_table(
        "t", SCHEMA, primary_key="id"
    )
    rows: list[dict[str, Any]] = []
    for batch in inserts:
        numbered = [{"id": len(rows) + i, **row} for i, row in enumerate(batch)]
        table.insert(numbered)
        rows += numbered
    expected = sorted(r["id"] for r in rows if matches(r))
    assert sorted(views.rows(table, where=where).column("id").to_pylist()) == expected
    assert table.delete_where(where).deleted == len(expected)
    kept = [r for r in rows if not matches(r)]
    assert table.count() == len(kept)
    assert sorted(r[0] for r in views.visible(table).fetchall()) == sorted(r["id"] for r in kept)
    by_text: dict[str | None, list[int]] = {}
    for r in kept:
        by_text.setdefault(r["g"], []).append(r["amount"])
    totals = views.totals(table, by="g", sum="amount").fetchall()
    assert sorted(totals, key=lambda t: (t[0] is None, t[0] or "")) == sorted(
        ((g, len(a), sum(a)) for g, a in by_text.items()),
        key=lambda t: (t[0] is None, t[0] or ""),
    )


def test_files_written_without_a_page_index_are_read_right(
    local_location: Location, monkeypatch: Any
) -> None:
    # Files earlier versions wrote: plain strings, no page index.
    import pyarrow.parquet as pq

    from ledger import writer

    def write_without_page_index(part: Any, out: Any, dictionary: list[str], *_: Any) -> None:
        pq.write_table(part, out, use_dictionary=dictionary, write_page_index=False)

    monkeypatch.setattr(writer, "_write_parquet", write_without_page_index)
    table = local_location.connect().create_table(
        "t", {"k": "BIGINT", "g": "VARCHAR", "f": "DOUBLE"}, primary_key="k"
    )
    table.insert([{"k": 1, "g": "b", "f": 1.0}, {"k": 2, "g": None, "f": None}])
    monkeypatch.undo()
    assert views.rows(table, where="g is null").column("k").to_pylist() == [2]
    assert table.delete_where("g is null").deleted == 1
    assert views.totals(table, by="g", sum="f").fetchall() == [("b", 1, 1.0)]
    assert table.count() == 1
