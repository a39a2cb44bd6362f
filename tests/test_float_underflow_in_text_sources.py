"""A number written with a nonzero digit that a FLOAT or DOUBLE column would hold as 0
(``1e-400``; ``1e-50`` for a FLOAT) is a value lost: refused with TypeMismatchError naming the
column, its type, the value and, for a file, the file and its row or line, from every source, as
a number too large for the column is (tests/test_number_limits_in_text_sources.py). Zeros
however written (``0``, ``-0.0``, ``0e5``) and the smallest magnitudes a column holds stay
values. A DECIMAL column keeps its own rule: more decimal places than its scale are refused."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

SCHEMA = {"id": "BIGINT", "x": "DOUBLE", "f": "FLOAT", "m": "DECIMAL(10,2)"}


def _data(tmp: Path, form: str, column: str, texts: list[str]) -> Any:
    if form == "dicts":
        return [{"id": i, column: t} for i, t in enumerate(texts)]
    if form == "json":  # numbers, as written
        path = tmp / "in.jsonl"
        path.write_text("".join(f'{{"id": {i}, "{column}": {t}}}\n' for i, t in enumerate(texts)))
        return str(path)
    path = tmp / "in.csv"
    path.write_text(f"id,{column}\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)))
    return str(path)


MANTISSAS = st.sampled_from(["1", "-1", "2.5", "0.01", "9"])
ZEROS = st.sampled_from(["0", "-0.0", "0e5", "0.000"])


# Exponents whose numbers every float column holds as normal values, and ones whose numbers
# are 0 in it (a subnormal FLOAT is another rule's: refused from a dict as changed).
HELD = {"x": st.integers(1, 300), "f": st.integers(1, 30)}
LOST = {"x": st.integers(330, 600), "f": st.integers(60, 600)}


@settings(max_examples=examples(30))
@given(
    form=st.sampled_from(["dicts", "json", "csv"]),
    column=st.sampled_from(["x", "f"]),
    data=st.data(),
)
def test_a_nonzero_number_stored_as_zero_is_refused_from_every_source(
    tmp_path_factory, form, column, data
):
    exponents = st.one_of(HELD[column], LOST[column])
    texts = data.draw(
        st.lists(
            st.one_of(ZEROS, st.builds(lambda m, e: f"{m}e-{e}", MANTISSAS, exponents)),
            min_size=1,
            max_size=5,
        )
    )
    tmp = tmp_path_factory.mktemp("u")
    table = ledger.connect(str(tmp / "wh")).create_table("t", SCHEMA, primary_key="id")
    lost = [i for i, t in enumerate(texts) if "e-" in t and int(t.rsplit("e-", 1)[1]) >= 60]
    if column == "x":
        lost = [i for i in lost if int(texts[i].rsplit("e-", 1)[1]) >= 330]
    given = _data(tmp, form, column, texts)
    if not lost:
        table.insert(given)
        stored = table.to_arrow().sort_by("id").column(column).to_pylist()
        assert all((s == 0) == (float(t) == 0) for s, t in zip(stored, texts, strict=True))
        return
    with pytest.raises(ledger.TypeMismatchError) as refused:
        table.insert(given)
    message = str(refused.value)
    kind = "DOUBLE" if column == "x" else "FLOAT"
    assert f"column {column!r} ({kind})" in message
    assert "too small" in message or re.search(r"would hold it as -?0\.0", message)
    if form != "dicts":
        # CSV names the text as written; JSON lines name the number it reads (0.01e-60 as 1e-62).
        named = {json.dumps(texts[lost[0]])[1:-1], texts[lost[0]], repr(float(texts[lost[0]]))}
        assert any(text in message for text in named)
    assert table.version == 0


@pytest.mark.parametrize("form", ["dicts", "csv"])
def test_a_decimal_column_refuses_more_places_than_its_scale(tmp_path, form):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    with pytest.raises(ledger.SchemaError):
        table.insert(_data(tmp_path, form, "m", ["1.5", "1e-400"]))
    assert table.version == 0


@pytest.mark.parametrize("text", ["1e-40", "1.0509738482436128e-45", "-3e-39"])
@pytest.mark.parametrize("form", ["dicts", "csv", "json"])
def test_a_number_a_float_keeps_only_a_few_bits_of_is_refused_from_every_source(
    tmp_path, form, text
):
    table = ledger.connect(str(tmp_path / "wh")).create_table("t", SCHEMA, primary_key="id")
    with pytest.raises(ledger.TypeMismatchError, match="does not fit, a FLOAT would hold it"):
        table.insert(_data(tmp_path, form, "f", ["0.5", text]))
    assert table.version == 0
