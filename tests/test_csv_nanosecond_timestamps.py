"""CSV timestamps written with up to nine digits after the second follow the rule of Arrow and
pandas input: a column keeps microseconds, so digits beyond them that are zeros are dropped
(nothing is lost) and nonzero ones are refused with ``TypeMismatchError`` naming the value,
before anything is written. With and without a zone offset in the text, in TIMESTAMP and
TIMESTAMPTZ columns."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
import views
from tests.conftest import examples

# Arrow's nanosecond timestamps reach from 1677 to 2262: the Arrow side of the comparison.
EPOCH = dt.datetime(1970, 1, 1)
LOW, HIGH = dt.datetime(1678, 1, 1), dt.datetime(2261, 12, 31)


@st.composite
def written_timestamps(draw: st.DrawFn) -> tuple[int, str, int | None]:
    """A timestamp as nanoseconds since the epoch (in its zone's wall time), its CSV text with
    0 to 9 digits after the second, and its offset in minutes (None: no offset written)."""
    moment = draw(st.datetimes(LOW, HIGH)).replace(microsecond=0)
    digits = draw(st.integers(0, 9))
    fraction = draw(st.integers(0, 10**digits - 1))
    offset = draw(st.none() | st.integers(-14 * 60, 14 * 60))
    seconds = (moment - EPOCH) // dt.timedelta(seconds=1)
    nanos = seconds * 10**9 + fraction * 10 ** (9 - digits)
    separator = draw(st.sampled_from([" ", "T"]))
    text = moment.strftime(f"%Y-%m-%d{separator}%H:%M:%S")
    if digits:
        text += "." + str(fraction).zfill(digits)
    return nanos, text + _offset_text(offset, draw), offset


def _offset_text(offset: int | None, draw: st.DrawFn) -> str:
    if offset is None:
        return ""
    if offset == 0 and draw(st.booleans()):
        return "Z"
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset), 60)
    return f"{sign}{hours:02d}" + draw(st.sampled_from([f":{minutes:02d}", f"{minutes:02d}"]))


def _outcome(table: ledger.Table, data: Any) -> object:
    """The rows a write stores, or the type of the error it raises (nothing written)."""
    try:
        table.insert(data)
    except ledger.LedgerError as e:
        assert table.version == 0
        return type(e)
    return sorted(views.visible(table).fetchall())


def _as_arrow(written: list[tuple[int, str, int | None]], zoned: bool) -> pa.Table:
    """The same values as an Arrow nanosecond timestamp column: the instants (in UTC, one
    column holds one zone) when the text has offsets, the wall times when it has none."""
    # A wall time at an offset is the instant that many minutes earlier in UTC.
    values = [nanos - (offset or 0) * 60 * 10**9 for nanos, _, offset in written]
    kind = pa.timestamp("ns", tz="UTC" if zoned else None)
    return pa.table({"id": list(range(len(written))), "at": pa.array(values, kind)})


@settings(max_examples=examples(40), deadline=None)
@given(
    column=st.sampled_from(["TIMESTAMP", "TIMESTAMPTZ"]),
    written=st.lists(written_timestamps(), min_size=1, max_size=5),
)
def test_csv_timestamps_load_as_the_same_values_given_as_arrow(tmp_path_factory, column, written):
    zoned = column == "TIMESTAMPTZ"
    # Text whose offset does not suit the column keeps its own refusal (below).
    written = [w for w in written if (w[2] is not None) == zoned] or [
        (0, "1970-01-01 00:00:00" + ("Z" if zoned else ""), 0 if zoned else None)
    ]
    folder = tmp_path_factory.mktemp("csv")
    warehouse = ledger.connect(folder / "wh")
    schema = {"id": "BIGINT", "at": column}
    path = folder / "at.csv"
    path.write_text("id,at\n" + "".join(f"{i},{w[1]}\n" for i, w in enumerate(written)))
    from_csv = _outcome(warehouse.create_table("csv", schema, primary_key="id"), str(path))
    arrow = _as_arrow(written, zoned)
    from_arrow = _outcome(warehouse.create_table("arrow", schema, primary_key="id"), arrow)
    assert from_csv == from_arrow
    lossy = any(nanos % 1000 for nanos, _, _ in written)
    assert from_csv is ledger.TypeMismatchError if lossy else isinstance(from_csv, list)


@pytest.mark.parametrize(
    ("column", "text", "stored"),
    [
        ("TIMESTAMP", "2024-01-02 03:04:05.123456000", dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
        ("TIMESTAMP", "2024-01-02T03:04:05.1000000", dt.datetime(2024, 1, 2, 3, 4, 5, 100000)),
        ("TIMESTAMP", "0001-01-01 00:00:00.000000000", dt.datetime(1, 1, 1)),
        (
            "TIMESTAMPTZ",
            "2024-01-02 03:04:05.123456000+01:00",
            dt.datetime(2024, 1, 2, 2, 4, 5, 123456, tzinfo=dt.UTC),
        ),
        (
            "TIMESTAMPTZ",
            "9999-12-31T23:59:59.999999000Z",
            dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=dt.UTC),
        ),
    ],
)
def test_zero_nanosecond_digits_are_dropped(tmp_path: Path, column, text, stored):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "at": column}, primary_key="id"
    )
    path = tmp_path / "at.csv"
    path.write_text(f"id,at\n1,{text}\n")
    table.insert(str(path))
    assert [row[:2] for row in views.visible(table).fetchall()] == [(1, stored)]


@pytest.mark.parametrize(
    ("column", "text"),
    [
        ("TIMESTAMP", "2024-01-02 03:04:05.123456789"),
        ("TIMESTAMP", "2024-01-02 03:04:05.1234561"),
        ("TIMESTAMPTZ", "2024-01-02 03:04:05.123456700-0530"),
        ("TIMESTAMPTZ", "9999-12-31 23:59:59.999999999Z"),
    ],
)
def test_nonzero_nanosecond_digits_are_refused_naming_the_value(tmp_path: Path, column, text):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "at": column}, primary_key="id"
    )
    path = tmp_path / "at.csv"
    good = "2024-01-01 00:00:00" + ("Z" if column == "TIMESTAMPTZ" else "")
    path.write_text(f"id,at\n1,{good}\n2,{text}\n")
    with pytest.raises(
        ledger.TypeMismatchError, match=rf"column 'at' \({column}\), row 2: value '{text}'"
    ):
        table.insert(str(path))
    assert table.version == 0
    assert not list(table.store.list(table.prefix + "_data/"))


@pytest.mark.parametrize(
    ("column", "text", "message"),
    [
        # The zone rule comes first: nanosecond digits do not change which error is given.
        ("TIMESTAMPTZ", "2024-01-02 03:04:05.123456789", "row 2: '.*' has no UTC offset"),
        ("TIMESTAMP", "2024-01-02 03:04:05.123456000+01:00", "expected no zone offset in"),
        # Ten digits are more than any source holds: not a timestamp.
        ("TIMESTAMP", "2024-01-02 03:04:05.1234560000", "invalid value"),
        ("TIMESTAMP", "2024-13-02 03:04:05.123456000", "invalid value"),
    ],
)
def test_other_timestamp_text_keeps_its_refusal(tmp_path: Path, column, text, message):
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "at": column}, primary_key="id"
    )
    path = tmp_path / "at.csv"
    good = "2024-01-01 00:00:00" + ("Z" if column == "TIMESTAMPTZ" else "")
    path.write_text(f"id,at\n1,{good}\n2,{text}\n")
    with pytest.raises(ledger.MalformedSourceError, match=message):
        table.insert(str(path))
    assert table.version == 0


def test_a_large_file_mixing_both_spellings_loads_and_names_the_right_row(tmp_path: Path):
    """Across the reader's blocks: plain microseconds, then nanosecond digits, then plain."""
    base = dt.datetime(2024, 1, 1)
    moments = [base + dt.timedelta(seconds=i, microseconds=i) for i in range(40_000)]
    texts = [m.isoformat(sep=" ", timespec="microseconds") for m in moments]
    texts[10_000:30_000] = [text + "000" for text in texts[10_000:30_000]]
    table = ledger.connect(tmp_path / "wh").create_table(
        "t", {"id": "BIGINT", "at": "TIMESTAMP"}, primary_key="id"
    )
    path = tmp_path / "at.csv"
    path.write_text("id,at\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)))
    table.insert(str(path))
    assert sorted(row[:2] for row in views.visible(table).fetchall()) == list(enumerate(moments))
    texts[35_000] = texts[35_000] + "100"
    path.write_text("id,at\n" + "".join(f"{i},{t}\n" for i, t in enumerate(texts)))
    with pytest.raises(ledger.TypeMismatchError, match=r"row 35001: value '.*\.035000100'"):
        table.insert(str(path))
    assert table.version == 1


def test_ledger_load_follows_the_same_rule(tmp_path: Path):
    from click.testing import CliRunner

    from ledger.cli.app import cli

    location = str(tmp_path / "wh")
    table = ledger.connect(location).create_table(
        "t", {"id": "BIGINT", "at": "TIMESTAMPTZ"}, primary_key="id"
    )
    good, bad = tmp_path / "good.csv", tmp_path / "bad.csv"
    good.write_text("id,at\n1,2024-01-02T03:04:05.123456000Z\n")
    bad.write_text("id,at\n2,2024-01-02T03:04:05.123456789Z\n")
    loaded = CliRunner().invoke(cli, ["-w", location, "load", "t", str(good)])
    assert loaded.exit_code == 0, loaded.output
    refused = CliRunner().invoke(cli, ["-w", location, "load", "t", str(bad)])
    assert refused.exit_code != 0
    assert "'2024-01-02T03:04:05.123456789Z' does not fit" in refused.output
    stored = dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=dt.UTC)
    assert [row[:2] for row in views.visible(table).fetchall()] == [(1, stored)]
