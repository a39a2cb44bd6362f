"""moto's S3 server in a process of its own, for the benchmarks.

moto spends a few milliseconds of Python on every request. Served from a thread of the
benchmark's own process it shares the GIL with the code being measured, so each request the
product makes also takes CPU from the product; a real S3 never runs inside its client. Here the
server runs as ``python -m tests.support.s3process`` in a child process, which prints the port it
bound and serves until it is terminated or its parent goes away (its stdin closes).

``MotoProcess`` has the interface of :class:`tests.support.s3server.MotoServer`;
``CountingS3Process`` that of :class:`tests.support.request_counting.CountingS3Server`: the
child records ``(method, path)`` of every request and hands them over, and forgets them, at
``GET /__requests`` (no bucket name starts with an underscore, so no S3 request is caught).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.support.s3server import BUCKET, S3Endpoint

REQUESTS_PATH = "/__requests"
_REPO_ROOT = Path(__file__).resolve().parents[2]
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 10.0

WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


class MotoProcess:
    """Starts moto's server in a child process; stop() terminates it and waits for it."""

    def __init__(self, counting: bool = False) -> None:
        self._counting = counting
        self._process: subprocess.Popen[str] | None = None
        self.endpoint: S3Endpoint | None = None

    def start(self) -> S3Endpoint:
        command = [sys.executable, "-m", "tests.support.s3process"]
        if self._counting:
            command.append("--count-requests")
        # stdin stays open for the child's life: when this process dies, the child sees EOF and
        # exits rather than outliving the benchmark run.
        self._process = subprocess.Popen(
            command, cwd=_REPO_ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        try:
            endpoint = self._serving_endpoint(self._process)
            _create_bucket_once_answering(endpoint)
        except BaseException:
            self.stop()  # a half-started child would otherwise live until this process ends
            raise
        self.endpoint = endpoint
        return endpoint

    @staticmethod
    def _serving_endpoint(process: subprocess.Popen[str]) -> S3Endpoint:
        """The endpoint of the port the child announces on its first line, once bound."""
        assert process.stdout is not None
        announced = process.stdout.readline()
        if not announced:
            code = process.wait(timeout=_STOP_TIMEOUT_S)
            raise RuntimeError(f"moto's server process exited with code {code} before serving")
        return S3Endpoint(f"http://127.0.0.1:{int(json.loads(announced)['port'])}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                stream.close()


class CountingS3Process(MotoProcess):
    """Start with :meth:`start`; :meth:`taken` returns ``(method, path)`` of every request the
    child answered since the last call, whoever sent it (boto3 or pyarrow's C++ client)."""

    def __init__(self) -> None:
        super().__init__(counting=True)

    def taken(self) -> list[tuple[str, str]]:
        """The requests recorded since the last call, and forget them."""
        assert self.endpoint is not None, "call start() first"
        # No proxy: the child listens on 127.0.0.1, whatever HTTP_PROXY says.
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with direct.open(self.endpoint.url + REQUESTS_PATH, timeout=30) as response:
            return [(method, path) for method, path in json.load(response)]


def _create_bucket_once_answering(endpoint: S3Endpoint) -> None:
    """The child announces its port once bound; retry until it answers, then make the bucket."""
    from botocore.exceptions import EndpointConnectionError

    deadline = time.monotonic() + _START_TIMEOUT_S
    client = endpoint.client()
    while True:
        try:
            client.create_bucket(Bucket=BUCKET)
            return
        except EndpointConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _counting(app: WsgiApp) -> WsgiApp:
    """``app`` recording every request, and answering ``GET /__requests`` with the record."""
    lock = threading.Lock()
    recorded: list[tuple[str, str]] = []

    def counting_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if method == "GET" and path == REQUESTS_PATH:
            with lock:
                body = json.dumps(recorded).encode()
                recorded.clear()
            start_response("200 OK", [("Content-Type", "application/json")])
            return [body]
        with lock:
            recorded.append((method, path))
        return app(environ, start_response)

    return counting_app


def _exit_when_parent_leaves() -> None:
    sys.stdin.read()  # returns at EOF: the parent closed the pipe or died
    os._exit(0)


def serve(count_requests: bool) -> None:
    """Serve moto on 127.0.0.1 and a free port; print ``{"port": ...}`` once bound."""
    import logging

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    app: WsgiApp = DomainDispatcherApplication(create_backend_app)
    if count_requests:
        app = _counting(app)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler)
    threading.Thread(target=_exit_when_parent_leaves, daemon=True).start()
    print(json.dumps({"port": server.server_port}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="moto's S3 server for the benchmarks")
    parser.add_argument("--count-requests", action="store_true")
    serve(parser.parse_args().count_requests)
