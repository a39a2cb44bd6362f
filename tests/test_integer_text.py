"""Text into an integer column follows one rule from every source that carries text (a list of
dicts, a pandas object column, a string in JSON lines, a CSV file): a whole number written in
decimal digits goes in (``12``, ``+5``, `` 7 ``, ``3.0``, ``1e2``; from 2**53 only as plain
digits, since a float may have rounded it), and anything else is refused with
TypeMismatchError before a file is written (from a file, MalformedSourceError naming its row):
a fraction, and spellings Arrow's own cast would read (``0x10`` as hexadecimal, which wrapped
``0xFFFFFFFFFFFFFFFF`` to -1)."""

from __future__ import annotations

import decimal
import json
import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.errors import MalformedSourceError, TypeMismatchError
from tests.conftest import examples

SOURCES = ["dicts", "pandas", "json", "csv"]
REFUSED = (TypeMismatchError, MalformedSourceError)
SCHEMA = {"id": "BIGINT", "n": "BIGINT"}

TEXTS = st.one_of(
    st.integers(-(2**63), 2**63 - 1).map(str),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: f"+{n}" if n >= 0 else str(n)),
    st.integers(0, 2**64 - 1).map(lambda n: f"0x{n:X}"),
    st.integers(-(2**60), 2**60).map(lambda n: f"{n}.0"),
    st.integers(-(10**6), 10**6).map(lambda n: f"{n}.5"),
    st.tuples(st.integers(-999, 999), st.integers(0, 20)).map(lambda t: f"{t[0]}e{t[1]}"),
    st.integers(-999, 999).map(lambda n: f" {n} "),
)


def oracle(text: str) -> int | None:
    """The value ``text`` stores under the rule, or None when it is refused."""
    text = text.strip()
    if re.fullmatch(r"[+-]?[0-9]+", text):
        value = int(text)
    elif re.fullmatch(r"[+-]?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?", text):
        number = decimal.Decimal(text)
        if number != number.to_integral_value() or abs(number) >= 2**53:
            return None
        value = int(number)
    else:
        return None
    return value if -(2**63) <= value < 2**63 else None


def _insert(table: ledger.Table, tmp: Path, source: str, texts: list[str]) -> None:
    if source == "dicts":
        table.insert([{"id": i, "n": t} for i, t in enumerate(texts)])
    elif source == "pandas":
        table.insert(pd.DataFrame({"id": range(len(texts)), "n": pd.Series(texts, dtype=object)}))
    elif source == "json":
        path = tmp / "in.jsonl"
        path.write_text("".join(json.dumps({"id": i, "n": t}) + "\n" for i, t in enumerate(texts)))
        table.insert(str(path))
    else:
        path = tmp / "in.csv"
        path.write_text("id,n\n" + "".join(f'{i},"{t}"\n' for i, t in enumerate(texts)))
        table.insert(str(path))


@settings(max_examples=examples(40), deadline=None)
@given(texts=st.lists(TEXTS, min_size=1, max_size=4), source=st.sampled_from(SOURCES))
def test_text_into_an_integer_column_follows_one_rule(tmp_path_factory, texts, source):
    tmp = tmp_path_factory.mktemp("t")
    table = ledger.connect(str(tmp / "wh")).create_table("t", SCHEMA, primary_key="id")
    wanted = [oracle(t) for t in texts]
    if None in wanted:
        with pytest.raises(REFUSED):
            _insert(table, tmp, source, texts)
        assert table.count() == 0
        return
    _insert(table, tmp, source, texts)
    assert table.to_arrow().sort_by("id").column("n").to_pylist() == wanted


@pytest.mark.parametrize("source", SOURCES)
def test_hexadecimal_text_is_refused_not_read_as_a_wrapped_number(tmp_path, source):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    table.insert([{"id": -1, "n": 1}])
    with pytest.raises(REFUSED, match="0xFFFFFFFFFFFFFFFF"):
        _insert(table, tmp_path, source, ["0xFFFFFFFFFFFFFFFF"])
    with pytest.raises(TypeMismatchError, match="0xFFFFFFFFFFFFFFFF"):
        table.update([{"id": "0xFFFFFFFFFFFFFFFF", "n": 99}])
    with pytest.raises(TypeMismatchError, match="0xFFFFFFFFFFFFFFFF"):
        table.delete(["0xFFFFFFFFFFFFFFFF"])
    assert table.to_arrow().to_pylist() == [{"id": -1, "n": 1}]
