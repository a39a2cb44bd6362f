"""Random partial rows of the `players` tables of the partial-row suites: each row names its key
and a random subset of the value columns (a value may be None: an explicit NULL)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

VALUE_COLUMNS = ["name", "score", "region"]

VALUES = {
    "name": st.one_of(st.none(), st.text(max_size=4)),
    "score": st.one_of(st.none(), st.integers(-(2**40), 2**40)),
    "region": st.one_of(st.none(), st.sampled_from(["eu", "us", "ap"])),
}


@st.composite
def partial_row(draw: st.DrawFn, key: int) -> dict[str, Any]:
    named = draw(st.lists(st.sampled_from(VALUE_COLUMNS), unique=True))
    row: dict[str, Any] = {"id": key}
    for column in named:
        row[column] = draw(VALUES[column])
    # Key order must not matter: sometimes name the key last.
    if draw(st.booleans()):
        row = {**{c: row[c] for c in named}, "id": key}
    return row
