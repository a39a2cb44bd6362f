"""A real S3 endpoint for the tests: moto's server, over HTTP on 127.0.0.1 and a free port."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

BUCKET = "ledger-tests"
CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing", "region": "us-east-1"}


@dataclass(frozen=True)
class S3Endpoint:
    url: str

    def options(self) -> dict[str, Any]:
        return {"endpoint_url": self.url, **CREDENTIALS}

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.url,
            aws_access_key_id=CREDENTIALS["access_key_id"],
            aws_secret_access_key=CREDENTIALS["secret_access_key"],
            region_name=CREDENTIALS["region"],
        )


class MotoServer:
    """Starts moto's threaded server; stop() shuts it down."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)

    def start(self) -> S3Endpoint:
        self._server.start()
        port = self._server._server.server_port  # port 0 asked the OS for a free one
        endpoint = S3Endpoint(f"http://127.0.0.1:{port}")
        endpoint.client().create_bucket(Bucket=BUCKET)
        return endpoint

    def stop(self) -> None:
        self._server.stop()
