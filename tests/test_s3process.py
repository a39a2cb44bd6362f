"""moto's S3 server in a process of its own (tests/support/s3process.py), the benchmarks' S3: it
answers like the in-process server, counts the same requests, and leaves no process behind."""

from __future__ import annotations

import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from urllib.parse import urlsplit

from tests.support.request_counting import CountingS3Server
from tests.support.s3process import CountingS3Process
from tests.support.s3server import BUCKET, S3Endpoint

REPO_ROOT = Path(__file__).resolve().parents[1]


def _some_requests(endpoint: S3Endpoint) -> bytes:
    client = endpoint.client()
    client.put_object(Bucket=BUCKET, Key="folder/one", Body=b"first")
    client.head_object(Bucket=BUCKET, Key="folder/one")
    client.list_objects_v2(Bucket=BUCKET, Prefix="folder/")
    body: bytes = client.get_object(Bucket=BUCKET, Key="folder/one")["Body"].read()
    return body


def _refuses_connections(url: str, within_s: float = 0.0) -> bool:
    address = urlsplit(url)
    deadline = time.monotonic() + within_s
    while True:
        try:
            socket.create_connection((address.hostname, address.port), timeout=1).close()
        except ConnectionRefusedError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def test_the_child_counts_the_requests_the_in_process_server_counts_and_stop_ends_it() -> None:
    in_process, child = CountingS3Server(), CountingS3Process()
    try:
        for server in (in_process, child):
            server.start()
            server.taken()
        assert in_process.endpoint is not None and child.endpoint is not None
        assert _some_requests(in_process.endpoint) == _some_requests(child.endpoint) == b"first"
        expected = [
            ("PUT", f"/{BUCKET}/folder/one"),
            ("HEAD", f"/{BUCKET}/folder/one"),
            ("GET", f"/{BUCKET}"),
            ("GET", f"/{BUCKET}/folder/one"),
        ]
        assert in_process.taken() == child.taken() == expected
        assert child.taken() == []  # taken() forgets what it handed over
    finally:
        in_process.stop()
        child.stop()
    assert _refuses_connections(child.endpoint.url)


def test_the_child_ends_when_its_parent_dies_without_stopping_it() -> None:
    parent = textwrap.dedent(
        """
        import os
        from tests.support.s3process import MotoProcess
        print(MotoProcess().start().url, flush=True)
        os._exit(1)
        """
    )
    finished = subprocess.run(
        [sys.executable, "-c", parent], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    url = finished.stdout.strip()
    assert url.startswith("http://127.0.0.1:"), finished.stderr
    assert _refuses_connections(url, within_s=10)
