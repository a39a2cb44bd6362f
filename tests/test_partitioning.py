"""Partitioning: transforms, safe paths, delete marks in the old partition, pruning."""

from __future__ import annotations

import datetime as dt
import os
import zlib
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ledger
from ledger.partitioning import (
    PartitionField,
    canonical_text,
    crc32_of_texts,
    escape,
    unescape,
)
from tests.conftest import examples
from tests.support.ledger_reads import visible_rows
from tests.support.scratch import scratch_dir

HOSTILE = [
    "../",
    "..",
    ".",
    "/",
    "a/b",
    "x=y",
    "nul\x00byte",
    "ünïcødé ☃",
    "",
    "%41",
    "__null__",
    "C:\\",
]


@given(st.text())
def test_escaping_round_trips_and_yields_one_safe_segment(value):
    segment = escape(value)
    assert unescape(segment) == value
    assert "/" not in segment and "\x00" not in segment and "=" not in segment
    assert segment not in (".", "..") and segment.isascii()


@pytest.mark.parametrize("value", HOSTILE)
def test_hostile_partition_values_stay_inside_the_table(warehouse, location, value):
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "p": "VARCHAR"}, primary_key="id", partition_by="p"
    )
    table.insert([{"id": 1, "p": value}, {"id": 2, "p": None}])
    store = location.connect().store
    keys = [i.key for i in store.list("")]
    data_keys = [k for k in keys if "/_data/" in k]
    assert len(data_keys) == 2
    for key in data_keys:
        assert key.startswith("t/_data/p=") and key.count("/") == 3
        assert os.path.normpath(key).startswith("t/_data/")
    assert all(k.startswith("t/") for k in keys)
    assert visible_rows(table) == [(1, value), (2, None)]
    assert table.count(partitions={"p": value}) == 1
    assert table.count(partitions={"p": None}) == 1


def test_time_and_bucket_transforms(warehouse):
    table = warehouse.create_table(
        "events",
        {"id": "BIGINT", "at": "TIMESTAMP", "user": "VARCHAR"},
        primary_key="id",
        partition_by=["month(at)", "bucket(4, user)"],
    )
    table.insert(
        [
            {"id": 1, "at": dt.datetime(2026, 1, 31, 23, 59), "user": "ann"},
            {"id": 2, "at": dt.datetime(2026, 2, 1, 0, 0), "user": "ann"},
            {"id": 3, "at": dt.datetime(2026, 2, 14, 12, 0), "user": "bob"},
        ]
    )
    partitions = sorted(
        (m.partition["at_month"], m.partition["user_bucket"]) for m in table.snapshot().markers()
    )
    ann, bob = str(zlib.crc32(b"ann") % 4), str(zlib.crc32(b"bob") % 4)
    expected = sorted({("2026-01", ann), ("2026-02", ann), ("2026-02", bob)})
    assert partitions == expected
    assert table.count(partitions={"at_month": "2026-02"}) == 2
    assert table.count(partitions={"at_month": dt.datetime(2026, 2, 3)}) == 2
    assert table.count(partitions=[{"at_month": "2026-01"}, {"user_bucket": bob}]) == 2


def test_a_delete_mark_lands_in_the_partition_of_the_entry_it_cancels(warehouse):
    table = warehouse.create_table(
        "t",
        {"id": "BIGINT", "day": "DATE", "v": "INTEGER"},
        primary_key="id",
        partition_by="day(day)",
    )
    table.insert([{"id": 1, "day": dt.date(2026, 1, 1), "v": 1}])
    table.update([{"id": 1, "day": dt.date(2026, 3, 3), "v": 2}])  # the row moves partition
    by_partition = {}
    for marker in table.snapshot().markers():
        by_partition.setdefault(marker.partition["day_day"], 0)
        by_partition[marker.partition["day_day"]] += marker.dml_sum
    assert by_partition == {"2026-01-01": 0, "2026-03-03": 1}
    assert visible_rows(table) == [(1, dt.date(2026, 3, 3), 2)]


def test_scan_prunes_partitions_from_the_log_before_opening_files(warehouse, location):
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "region": "VARCHAR"}, primary_key="id", partition_by="region"
    )
    table.insert([{"id": i, "region": r} for i, r in enumerate(["eu", "us", "ap", "eu"])])
    eu_files = table.files(partitions={"region": "eu"})
    assert len(eu_files) == 1 and len(table.files()) == 3
    # Remove the other partitions' files: a pruned scan must not open them.
    store = location.connect().store
    for marker in table.snapshot().markers():
        if marker.partition["region"] != "eu":
            store.delete(table.prefix + marker.path)
    rows = table.scan(partitions={"region": "eu"}).order("id").fetchall()
    assert [r[0] for r in rows] == [0, 3]
    with pytest.raises(ledger.InvalidArgumentError, match="not a partition field"):
        table.scan(partitions={"nope": 1})


def test_files_are_sorted_by_key_then_trx(warehouse):
    table = warehouse.create_table("t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id")
    table.insert([{"id": i, "v": i} for i in [5, 3, 9, 1, 7]])
    import pyarrow.parquet as pq

    files = table.files()
    if files[0].startswith("s3://"):
        pytest.skip("read back locally only")
    assert pq.read_table(files[0]).column("id").to_pylist() == [1, 3, 5, 7, 9]


def test_custom_sort_order(local_location):
    warehouse = local_location.connect()
    table = warehouse.create_table(
        "t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id", sort_by="v"
    )
    table.insert([{"id": i, "v": -i} for i in range(5)])
    import pyarrow.parquet as pq

    assert pq.read_table(table.files()[0]).column("v").to_pylist() == [-4, -3, -2, -1, 0]


def test_input_already_in_key_order_is_written_as_is_and_ties_keep_input_order(local_location):
    import pyarrow.parquet as pq

    table = local_location.connect().create_table(
        "t", {"id": "BIGINT", "v": "INTEGER"}, primary_key="id"
    )
    table.insert([{"id": 1, "v": 1}, {"id": 2, "v": 2}, {"id": 2, "v": 3}, {"id": 5, "v": 4}])
    written = pq.read_table(table.files()[0])
    assert written.column("id").to_pylist() == [1, 2, 2, 5]
    assert written.column("trx_seq").to_pylist() == [0, 1, 2, 3]
    from tests.support.ledger_reads import visible_rows

    assert visible_rows(table) == [(1, 1), (2, 3), (5, 4)]


@pytest.mark.parametrize("sort_by", [None, ["g", "id"]])
def test_unordered_input_with_repeated_keys_is_sorted_by_key_then_entry_order(
    local_location, sort_by
):
    """One write's entries arrive in trx_seq order: sorting by the leading columns alone must
    keep each key's entries in that order (a stable sort), exactly as the full sort would."""
    import pyarrow.parquet as pq

    table = local_location.connect().create_table(
        "t", {"id": "BIGINT", "g": "INTEGER", "v": "INTEGER"}, primary_key="id", sort_by=sort_by
    )
    ids = [7, 3, 7, 1, 3, 7, 0, 1]
    table.insert([{"id": k, "g": k % 2, "v": n} for n, k in enumerate(ids)])
    written = pq.read_table(table.files()[0])
    leading = ["g", "id"] if sort_by else ["id"]
    keys = list(zip(*(written.column(c).to_pylist() for c in [*leading, "trx_seq"]), strict=True))
    assert keys == sorted(keys)
    assert sorted(written.column("v").to_pylist()) == list(range(len(ids)))
    from tests.support.ledger_reads import visible_rows

    assert visible_rows(table) == [(0, 0, 6), (1, 1, 7), (3, 1, 4), (7, 1, 5)]


ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Pacific/Chatham"]


@given(
    instant=st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2090, 1, 1)),
    zone=st.sampled_from(ZONES),
)
@settings(max_examples=examples(25))
def test_a_row_is_found_by_its_own_zoned_timestamp_in_every_time_partition(instant, zone):
    # A timestamp with a zone is stored as UTC, so its partition is its UTC day/hour; pruning by
    # the same zoned value must name that partition (it once formatted the local wall clock).
    from zoneinfo import ZoneInfo

    zoned = instant.replace(tzinfo=dt.UTC).astimezone(ZoneInfo(zone))
    with scratch_dir("ledger-zoned-") as folder:
        wh = ledger.connect(folder)
        for column in ("TIMESTAMPTZ", "TIMESTAMP"):
            for transform, field in (("day(ts)", "ts_day"), ("hour(ts)", "ts_hour"), ("ts", "ts")):
                name = f"t_{column}_{field}".lower()
                t = wh.create_table(
                    name, {"id": "BIGINT", "ts": column}, primary_key="id", partition_by=transform
                )
                t.insert([{"id": 1, "ts": zoned}])
                assert t.count(partitions={field: zoned}) == 1, (column, transform)
                assert len(t.scan(partitions={field: zoned}).fetchall()) == 1, (column, transform)
                utc_day = zoned.astimezone(dt.UTC).strftime("%Y-%m-%d")
                if field == "ts_day":
                    assert t.count(partitions={field: utc_day}) == 1


def test_partition_values_that_join_alike_stay_apart(tmp_path):
    table = ledger.connect(str(tmp_path)).create_table(
        "t",
        {"id": "BIGINT", "a": "VARCHAR", "b": "VARCHAR"},
        primary_key="id",
        partition_by=["a", "b"],
    )
    table.insert([{"id": 1, "a": "x\x1fvy", "b": "z"}, {"id": 2, "a": "x", "b": "y\x1fvz"}])
    assert table.count(partitions={"a": "x"}) == 1
    assert table.count(partitions={"a": "x\x1fvy"}) == 1
    assert len(table.files()) == 2


def _bucket_one_by_one(values: pa.Array, buckets: int) -> list[str | None]:
    """The bucket transform as it was first written (docs/format.md): crc32 of each value's
    canonical UTF-8 text, one value at a time."""
    return [
        None if text is None else str(zlib.crc32(text.encode("utf-8")) % buckets)
        for text in canonical_text(values).to_pylist()
    ]


_BUCKET_SOURCES = st.one_of(
    st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), max_size=60).map(
        lambda v: pa.array(v, pa.int64())
    ),
    st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), max_size=60).map(
        lambda v: pa.array(v, pa.int32())
    ),
    st.lists(st.one_of(st.none(), st.text(max_size=90)), max_size=60).map(
        lambda v: pa.array(v, pa.string())
    ),
    st.lists(st.one_of(st.none(), st.dates()), max_size=60).map(lambda v: pa.array(v, pa.date32())),
    st.lists(
        st.one_of(
            st.none(),
            st.decimals(min_value=-(10**15), max_value=10**15, places=3, allow_nan=False),
        ),
        max_size=60,
    ).map(lambda v: pa.array(v, pa.decimal128(19, 3))),
    st.lists(st.one_of(st.none(), st.datetimes()), max_size=60).map(
        lambda v: pa.array(v, pa.timestamp("us"))
    ),
    st.lists(st.one_of(st.none(), st.booleans()), max_size=60).map(
        lambda v: pa.array(v, pa.bool_())
    ),
)


@settings(max_examples=examples(100), deadline=None)
@given(_BUCKET_SOURCES, st.sampled_from([1, 2, 7, 16, 1000, 2**31, 2**63 - 1]))
def test_vectorised_bucket_matches_the_value_by_value_crc32(values, buckets):
    field = PartitionField("v_bucket", "bucket", "v", buckets)
    assert field.values(pa.table({"v": values})).to_pylist() == _bucket_one_by_one(values, buckets)


@given(st.lists(st.one_of(st.none(), st.text(max_size=300)), max_size=40))
def test_crc32_of_texts_is_zlibs_crc32(values):
    expected = [0 if v is None else zlib.crc32(v.encode("utf-8")) for v in values]
    array = pa.array(["pad", *values, "pad"], pa.string()).slice(1, len(values))
    assert crc32_of_texts(array).tolist() == expected


@settings(max_examples=examples(100), deadline=None)
@given(st.integers(0, 20), st.integers(-(10**17), 10**17))
def test_decimal_canonical_text_is_the_to_scientific_string_of_the_value(
    scale: int, unscaled: int
) -> None:
    """docs/format.md: DECIMAL canonical text is Python's str() of the value at the column's
    scale (plain while the adjusted exponent is >= -6, else scientific), zero without a sign."""
    value = Decimal(unscaled).scaleb(-scale)
    [text] = canonical_text(pa.array([value], pa.decimal128(38, scale))).to_pylist()
    expected = str(value.quantize(Decimal(1).scaleb(-scale)))
    if unscaled == 0:
        expected = expected.lstrip("-")
    assert text == expected
