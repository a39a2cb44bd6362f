"""moto's S3 server that records every request it answers, whoever sends it (boto3 or
pyarrow's C++ client): how tests and benchmarks count the requests a commit makes."""

from __future__ import annotations

import threading
from typing import Any

from tests.support.s3server import MotoServer, S3Endpoint


class CountingS3Server:
    """Start with :meth:`start`; ``requests`` holds ``(method, path)`` of every request, and
    ``waited_to_continue`` the path of every request that sent ``Expect: 100-continue`` (its
    body waited a round trip for the server's "100 Continue")."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []
        self.waited_to_continue: list[str] = []
        self._lock = threading.Lock()
        self._server = MotoServer()
        self.endpoint: S3Endpoint | None = None

    def start(self) -> S3Endpoint:
        endpoint = self._server.start()
        wsgi = self._server._server._server  # the werkzeug server behind moto's threaded one
        app = wsgi.app

        def counting(environ: dict[str, Any], start_response: Any) -> Any:
            with self._lock:
                self.requests.append((environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")))
                if environ.get("HTTP_EXPECT", "").lower() == "100-continue":
                    self.waited_to_continue.append(environ.get("PATH_INFO", ""))
            return app(environ, start_response)

        wsgi.app = counting
        self.endpoint = endpoint
        return endpoint

    def taken(self) -> list[tuple[str, str]]:
        """The requests recorded since the last call, and forget them."""
        with self._lock:
            taken, self.requests = self.requests, []
        return taken

    def stop(self) -> None:
        self._server.stop()
