"""A CSV field left empty is NULL in every column; a quoted empty field (``""``) is an empty
string, which only a VARCHAR column holds: into any other column it is refused with
MalformedSourceError naming the column, its type and the row, whatever the type, before anything
is written."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from tests.conftest import examples

VALUES = {
    "BIGINT": "7",
    "INTEGER": "-3",
    "DOUBLE": "1.5",
    "FLOAT": "2.25",
    "DECIMAL(10,2)": "19.99",
    "BOOLEAN": "true",
    "DATE": "2024-01-02",
    "TIMESTAMP": "2024-01-02 03:04:05",
    "VARCHAR": "text",
}
FIELDS = st.sampled_from(["value", "empty", "quoted empty"])


@settings(max_examples=examples(30))
@given(column_type=st.sampled_from(sorted(VALUES)), fields=st.lists(FIELDS, min_size=1, max_size=6))
def test_an_empty_field_is_null_and_a_quoted_empty_one_is_refused_naming_its_row(
    tmp_path_factory, column_type, fields
):
    tmp = tmp_path_factory.mktemp("e")
    spelled = {"value": VALUES[column_type], "empty": "", "quoted empty": '""'}
    path = tmp / "in.csv"
    path.write_text("id,v\n" + "".join(f"{i},{spelled[f]}\n" for i, f in enumerate(fields)))
    table = ledger.connect(str(tmp / "wh")).create_table("t", {"id": "BIGINT", "v": column_type})
    quoted = [row for row, f in enumerate(fields, start=1) if f == "quoted empty"]
    if quoted and column_type != "VARCHAR":
        try:
            table.insert(str(path))
        except ledger.MalformedSourceError as e:
            assert f"column 'v' ({column_type}), row {quoted[0]}: the field is an empty" in str(e)
        else:
            raise AssertionError("a quoted empty field was written")
        assert table.version == 0
        return
    table.insert(str(path))
    stored = table.to_arrow().sort_by("id").column("v").to_pylist()
    assert [v is None for v in stored] == [f == "empty" for f in fields]
    if column_type == "VARCHAR":
        assert [v == "" for v in stored] == [f == "quoted empty" for f in fields]
