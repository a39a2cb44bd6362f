"""The store contract, on every backend: put-if-absent, listing order, missing keys, atomic puts.

The log trusts the store for exactly these guarantees (DESIGN invariant 8: put-if-absent is the
only atomic primitive), so each one is checked on local disk and on S3 (moto over HTTP).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import ledger
from ledger.storage import Store, open_store
from ledger.storage.s3 import CONTINUE_ABOVE_BYTES
from tests.conftest import Location
from tests.support.request_counting import CountingS3Server
from tests.support.s3server import BUCKET, S3Endpoint


@pytest.fixture
def store(location: Location) -> Store:
    return location.connect().store


def keys_of(infos: Any) -> list[str]:
    return [info.key for info in infos]


def run_together(count: int, work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` for i in range(count) on threads released at the same moment."""
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return results


# --- put_if_absent --------------------------------------------------------------------------


def test_put_if_absent_creates_a_missing_key(store: Store) -> None:
    assert store.put_if_absent("log/a.jsonl", b"first") is True
    assert store.get("log/a.jsonl") == b"first"
    assert store.size("log/a.jsonl") == 5


def test_second_put_if_absent_loses_and_keeps_the_first_bytes(store: Store) -> None:
    assert store.put_if_absent("log/a.jsonl", b"first") is True
    assert store.put_if_absent("log/a.jsonl", b"second, longer") is False
    assert store.get("log/a.jsonl") == b"first"
    assert store.size("log/a.jsonl") == 5
    assert keys_of(store.list("log/")) == ["log/a.jsonl"]


def test_put_if_absent_loses_to_a_plain_put(store: Store) -> None:
    store.put("log/a.jsonl", b"put")
    assert store.put_if_absent("log/a.jsonl", b"conditional") is False
    assert store.get("log/a.jsonl") == b"put"


@pytest.mark.parametrize("round_", range(3))
def test_racing_put_if_absent_has_exactly_one_winner(store: Store, round_: int) -> None:
    writers = 8
    key = f"race/{round_}/00000000000000000001.jsonl"
    won = run_together(writers, lambda i: store.put_if_absent(key, f"writer {i}".encode()))
    assert sorted(won) == [False] * (writers - 1) + [True], won
    winner = won.index(True)
    assert store.get(key) == f"writer {winner}".encode()
    assert keys_of(store.list(f"race/{round_}/")) == [key]


def test_racing_put_if_absent_on_different_keys_all_win(store: Store) -> None:
    won = run_together(6, lambda i: store.put_if_absent(f"many/{i:02d}", bytes([i])))
    assert won == [True] * 6
    assert [store.get(f"many/{i:02d}") for i in range(6)] == [bytes([i]) for i in range(6)]


def test_local_put_if_absent_leaves_no_temporary_files(local_location: Location) -> None:
    store = local_location.connect().store
    assert store.put_if_absent("t/_log/0.jsonl", b"a") is True
    assert store.put_if_absent("t/_log/0.jsonl", b"b") is False  # the loser cleans up too
    store.put("t/_log/hint", b"1")
    store.put("t/_log/hint", b"2")
    run_together(4, lambda i: store.put_if_absent("t/_log/1.jsonl", b"x"))
    assert keys_of(store.list("")) == ["t/_log/0.jsonl", "t/_log/1.jsonl", "t/_log/hint"]
    on_disk = os.listdir(store.local_path("t/_log"))
    assert sorted(on_disk) == ["0.jsonl", "1.jsonl", "hint"]


def test_local_list_hides_a_temporary_file_left_by_a_crash(local_location: Location) -> None:
    store = local_location.connect().store
    store.put("t/_log/0.jsonl", b"a")
    # A writer killed between writing its temporary file and linking it leaves this behind.
    crashed = os.path.join(os.path.dirname(store.local_path("t/_log/0.jsonl")), ".tmp-dead")
    with open(crashed, "wb") as f:
        f.write(b"half")
    assert keys_of(store.list("t/")) == ["t/_log/0.jsonl"]
    assert keys_of(store.list("t/_log/", start_after="t/_log/")) == ["t/_log/0.jsonl"]


# --- get, size, put, delete -----------------------------------------------------------------


def test_get_and_size_of_a_missing_key_raise_file_not_found(store: Store) -> None:
    store.put("present/a", b"x")
    for key in ("missing", "present/missing", "no/such/folder/key"):
        with pytest.raises(FileNotFoundError):
            store.get(key)
        with pytest.raises(FileNotFoundError):
            store.size(key)


def test_round_trips_any_bytes(store: Store) -> None:
    every_byte = bytes(range(256)) * 5
    store.put("bin/all", every_byte)
    assert store.put_if_absent("bin/empty", b"") is True
    assert store.get("bin/all") == every_byte
    assert store.size("bin/all") == len(every_byte)
    assert store.get("bin/empty") == b""
    assert store.size("bin/empty") == 0


def test_put_replaces_the_object(store: Store) -> None:
    store.put("hint", b"a much longer first value")
    store.put("hint", b"short")
    assert store.get("hint") == b"short"
    assert store.size("hint") == 5
    [info] = store.list("hint")
    assert (info.key, info.size) == ("hint", 5)
    assert abs(info.modified_ms - time.time() * 1000) < 60_000  # vacuum ages orphans by it


def test_put_replaces_atomically_for_concurrent_readers(store: Store) -> None:
    size = 256 * 1024
    versions = [bytes([65 + i]) * size for i in range(6)]
    store.put("big", versions[0])
    done = threading.Event()
    seen: list[bytes] = []

    def read_until_done(_: int) -> None:
        while not done.is_set():
            seen.append(store.get("big"))

    reader = threading.Thread(target=read_until_done, args=(0,))
    reader.start()
    try:
        for data in versions[1:] * 3:
            store.put("big", data)
    finally:
        done.set()
        reader.join()
    seen.append(store.get("big"))
    torn = [s[:1] + b"..." for s in seen if s not in versions]
    assert not torn, f"a reader saw a half-replaced object: {torn[:3]}"
    assert seen[-1] == versions[-1]


def test_delete_removes_and_a_missing_key_is_fine(store: Store) -> None:
    store.put("d/a", b"1")
    store.put("d/b", b"2")
    store.delete("d/a")
    store.delete("d/a")  # again: not an error
    store.delete("d/never-existed")
    store.delete("no/such/folder/key")
    with pytest.raises(FileNotFoundError):
        store.get("d/a")
    assert keys_of(store.list("d/")) == ["d/b"]
    # A deleted key can be created again with put-if-absent.
    assert store.put_if_absent("d/a", b"again") is True
    assert store.get("d/a") == b"again"


# --- list and list_dirs ---------------------------------------------------------------------

# Chosen so that byte order differs from any per-directory walk: "-" < "." < "/" < "0" < "A" < "_"
KEYS = [
    "a/_log/00000000000000000010.jsonl",
    "a/_log/00000000000000000002.jsonl",
    "a/_log/00000000000000000002.checkpoint.jsonl",
    "a/_log/_last_checkpoint",
    "a/_data/x=1/f.parquet",
    "a-b/k",
    "a.c",
    "a0",
    "aB/k",
    "ab/k",
    "b",
    "Z/k",
]


@pytest.fixture
def filled(store: Store) -> Store:
    for i, key in enumerate(KEYS):
        store.put(key, b"x" * (i + 1))
    return store


def test_list_yields_every_key_sorted_by_bytes_with_sizes(filled: Store) -> None:
    listed = list(filled.list(""))
    assert keys_of(listed) == sorted(KEYS, key=lambda k: k.encode())
    assert {info.key: info.size for info in listed} == {k: i + 1 for i, k in enumerate(KEYS)}


def test_list_prefix_is_a_string_prefix_not_a_folder(filled: Store) -> None:
    assert keys_of(filled.list("a/_log/")) == [
        "a/_log/00000000000000000002.checkpoint.jsonl",
        "a/_log/00000000000000000002.jsonl",
        "a/_log/00000000000000000010.jsonl",
        "a/_log/_last_checkpoint",
    ]
    assert keys_of(filled.list("a/_log/0000000000000000000")) == [
        "a/_log/00000000000000000002.checkpoint.jsonl",
        "a/_log/00000000000000000002.jsonl",
    ]
    assert keys_of(filled.list("a")) == sorted(
        (k for k in KEYS if k.startswith("a")), key=str.encode
    )
    assert keys_of(filled.list("a/_d")) == ["a/_data/x=1/f.parquet"]
    assert keys_of(filled.list("b")) == ["b"]
    assert keys_of(filled.list("nothing/")) == []
    assert keys_of(filled.list("a/_log/1")) == []


def test_list_start_after_is_exclusive_and_need_not_exist(filled: Store) -> None:
    log = "a/_log/"
    after = filled.list(log, start_after=log + "00000000000000000002.checkpoint.jsonl")
    assert keys_of(after) == [
        log + "00000000000000000002.jsonl",
        log + "00000000000000000010.jsonl",
        log + "_last_checkpoint",
    ]
    # Not a key: the listing starts at the next key above it.
    after = filled.list(log, start_after=log + "00000000000000000005.jsonl")
    assert keys_of(after) == [log + "00000000000000000010.jsonl", log + "_last_checkpoint"]
    # Below the prefix: everything under the prefix; above it: nothing.
    assert keys_of(filled.list(log, start_after="a")) == keys_of(filled.list(log))
    assert keys_of(filled.list(log, start_after="a/_m")) == []
    assert keys_of(filled.list("", start_after="aB/k")) == ["ab/k", "b"]


def test_list_dirs_names_immediate_folders_only(filled: Store) -> None:
    assert filled.list_dirs("") == sorted(["a", "a-b", "aB", "ab", "Z"])
    assert filled.list_dirs("a/") == ["_data", "_log"]
    assert filled.list_dirs("a/_data/") == ["x=1"]
    assert filled.list_dirs("a/_log/") == []
    assert filled.list_dirs("nothing/") == []


def test_keys_written_through_the_filesystem_are_in_the_store(store: Store) -> None:
    key = "t/_data/p=1/file.parquet"
    local = store.local_path(key)
    if local is not None:
        store.filesystem.create_dir(os.path.dirname(local), recursive=True)
    with store.filesystem.open_output_stream(store.fs_path(key)) as out:
        out.write(b"parquet bytes")
    assert store.get(key) == b"parquet bytes"
    assert [(i.key, i.size) for i in store.list("t/_data/")] == [(key, 13)]
    store.put("t/_data/other", b"via put")
    with store.filesystem.open_input_stream(store.fs_path("t/_data/other")) as f:
        assert f.read() == b"via put"
    if local is not None:
        with open(local, "rb") as f:
            assert f.read() == b"parquet bytes"


def test_only_local_stores_have_local_paths(location: Location) -> None:
    store = location.connect().store
    if location.backend == "local":
        assert store.local_path("t/x") == os.path.join(location.uri, "t", "x")
    else:
        assert store.local_path("t/x") is None
        assert store.fs_path("t/x").startswith(f"{BUCKET}/")


# --- opening stores -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "options", "mentions"),
    [
        ("ftp://host/warehouse", {}, "ftp"),
        ("gs://bucket/warehouse", {}, "gs"),
        ("s3://", {}, "no bucket"),
        ("s3:///only/a/prefix", {}, "no bucket"),
        ("s3://bucket/prefix", {"endpoint": "http://x"}, "endpoint"),
        ("s3://bucket/prefix", {"region": "us-east-1", "secret": "x"}, "secret"),
        ("./warehouse", {"endpoint_url": "http://x"}, "endpoint_url"),
        ("file:///tmp/warehouse", {"region": "us-east-1"}, "region"),
    ],
)
def test_open_store_rejects_bad_uris_and_options(
    uri: str, options: dict[str, Any], mentions: str, tmp_path: Any, monkeypatch: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ledger.InvalidArgumentError) as excinfo:
        open_store(uri, **options)
    assert mentions in str(excinfo.value)
    assert isinstance(excinfo.value, ValueError)
    with pytest.raises(ledger.InvalidArgumentError):
        ledger.connect(uri, **options)
    assert os.listdir(tmp_path) == []  # nothing was created for a rejected local store


def test_open_store_accepts_local_paths_and_file_uris(tmp_path: Any) -> None:
    by_path = open_store(str(tmp_path / "a"))
    by_uri = open_store(f"file://{tmp_path / 'a'}")
    by_path.put("k", b"v")
    assert by_uri.get("k") == b"v"


# --- S3 conditional writes ------------------------------------------------------------------


def s3_store(endpoint: S3Endpoint, **extra: Any) -> Store:
    import uuid

    return open_store(f"s3://{BUCKET}/{uuid.uuid4().hex}", **endpoint.options(), **extra)


def ignore_if_none_match(store: Store, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Make the store's client behave like an S3 server that ignores ``If-None-Match``.

    This is a mock of something that cannot exist here: moto (like AWS S3, MinIO and R2) honours
    conditional writes, and the refusal can only be tested against a server that does not. The
    patched client drops the header before the request is sent, so every write is unconditional.
    """
    client = store.client  # type: ignore[attr-defined]
    real_put_object = client.put_object
    calls: list[dict[str, Any]] = []

    def put_object_without_condition(**kwargs: Any) -> Any:
        calls.append(kwargs)
        kwargs.pop("IfNoneMatch", None)
        return real_put_object(**kwargs)

    monkeypatch.setattr(client, "put_object", put_object_without_condition)
    return calls


def test_s3_store_refuses_a_store_that_ignores_if_none_match(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = s3_store(s3_endpoint)
    ignore_if_none_match(store, monkeypatch)
    with pytest.raises(ledger.StorageError) as excinfo:
        store.put_if_absent("t/_log/00000000000000000000.jsonl", b"commit")
    assert "If-None-Match" in str(excinfo.value)
    assert isinstance(excinfo.value, OSError)
    # Nothing was committed, and the probe cleaned up after itself.
    assert list(store.list("")) == []
    # The refusal is not a one-off: every later attempt refuses too.
    with pytest.raises(ledger.StorageError):
        store.put_if_absent("t/_log/00000000000000000000.jsonl", b"commit")
    assert list(store.list("")) == []


def test_creating_a_table_on_a_store_that_ignores_if_none_match_fails(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    warehouse = ledger.Warehouse(s3_store(s3_endpoint))
    ignore_if_none_match(warehouse.store, monkeypatch)
    with pytest.raises(ledger.StorageError):
        warehouse.create_table("t", {"k": "BIGINT"}, primary_key=["k"])
    assert list(warehouse.store.list("")) == []


def test_s3_store_probes_conditional_writes_once(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = s3_store(s3_endpoint)
    client = store.client  # type: ignore[attr-defined]
    real_put_object = client.put_object
    calls: list[str] = []

    def counting_put_object(**kwargs: Any) -> Any:
        calls.append(kwargs["Key"])
        return real_put_object(**kwargs)

    monkeypatch.setattr(client, "put_object", counting_put_object)
    assert store.put_if_absent("a", b"1") is True
    assert len(calls) == 3 and "_probe/" in calls[0] and calls[0] == calls[1]
    assert store.put_if_absent("a", b"2") is False
    assert store.put_if_absent("b", b"3") is True
    assert len(calls) == 5
    assert keys_of(store.list("")) == ["a", "b"]  # the probe object is gone


def test_s3_store_without_the_check_trusts_the_store(
    s3_endpoint: S3Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = s3_store(s3_endpoint, check_conditional_writes=False)
    calls = ignore_if_none_match(store, monkeypatch)
    assert store.put_if_absent("a", b"1") is True
    assert [c["Key"].rsplit("/", 1)[-1] for c in calls] == ["a"]  # no probe


@pytest.mark.parametrize("conditional", [False, True], ids=["put", "put_if_absent"])
@pytest.mark.parametrize(
    "size", [0, 1, 4096, CONTINUE_ABOVE_BYTES, CONTINUE_ABOVE_BYTES + 1, 3 * CONTINUE_ABOVE_BYTES]
)
def test_s3_store_waits_for_100_continue_only_above_a_size(
    counting_server: CountingS3Server, size: int, conditional: bool
) -> None:
    """A body up to ``CONTINUE_ABOVE_BYTES`` goes with its headers (no round trip for the
    store's "100 Continue"); a larger one waits, so a refused request does not upload it.
    Either way the bytes arrive whole, and a lost put-if-absent keeps the first ones."""
    assert counting_server.endpoint is not None
    store = s3_store(counting_server.endpoint)
    store.put_if_absent("probe", b"")  # the one-time probe of conditional writes
    counting_server.waited_to_continue.clear()
    data = os.urandom(size)
    if conditional:
        assert store.put_if_absent("k", data) is True
        assert store.put_if_absent("k", os.urandom(size)) is False
    else:
        store.put("k", data)
    assert store.get("k") == data
    waited = [path.rsplit("/", 1)[-1] for path in counting_server.waited_to_continue]
    assert waited == (["k"] * (2 if conditional else 1) if size > CONTINUE_ABOVE_BYTES else [])


def test_committed_local_data_files_are_fsynced(tmp_path, monkeypatch):
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    table = ledger.connect(str(tmp_path)).create_table("t", {"id": "BIGINT"}, primary_key="id")
    table.insert([{"id": 1}])
    (data_file,) = table.files()
    assert data_file in synced
    commit_sync = max(i for i, path in enumerate(synced) if "/_log/" in path)
    assert synced.index(data_file) < commit_sync
