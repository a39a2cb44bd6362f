"""How every S3 client of the project finds its endpoint, region and credentials.

The store's boto3 client, pyarrow's ``S3FileSystem`` (data files, ``s3://`` load sources), Spark's
S3A settings and the options passed to deltalake all start from one :class:`S3Settings`:
explicit options first, then the environment as boto3 documents it (``AWS_ENDPOINT_URL_S3``,
then ``AWS_ENDPOINT_URL``; ``AWS_REGION``, then ``AWS_DEFAULT_REGION``). Credentials not given
are left to each client's standard AWS chain (environment, profile, role), which reads the same
variables.

>>> s3_settings({"endpoint_url": "http://127.0.0.1:9000"}).pyarrow_kwargs()["endpoint_override"]
'127.0.0.1:9000'
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ledger.errors import InvalidArgumentError

# What the store takes; ``check_conditional_writes`` is the store's own, not a client's.
CLIENT_OPTIONS = frozenset(
    {"endpoint_url", "region", "access_key_id", "secret_access_key", "session_token"}
)
_ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
_REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")


@dataclass(frozen=True)
class S3Settings:
    """An S3 endpoint (None: AWS itself), region and explicit credentials (None: the chain)."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    def boto3_session_kwargs(self) -> dict[str, Any]:
        """Arguments of ``boto3.session.Session``."""
        return {
            "aws_access_key_id": self.access_key_id,
            "aws_secret_access_key": self.secret_access_key,
            "aws_session_token": self.session_token,
            "region_name": self.region,
        }

    def boto3_client_kwargs(self) -> dict[str, Any]:
        """Arguments of ``session.client("s3", ...)`` besides its config."""
        return {"endpoint_url": self.endpoint_url} if self.endpoint_url else {}

    def pyarrow_kwargs(self) -> dict[str, Any]:
        """Arguments of ``pyarrow.fs.S3FileSystem``: pyarrow reads no endpoint from the
        environment, so it is always passed here."""
        kwargs: dict[str, Any] = {}
        if self.endpoint_url:
            parsed = urlparse(self.endpoint_url)
            kwargs["endpoint_override"] = parsed.netloc or parsed.path
            kwargs["scheme"] = parsed.scheme or "https"
        if self.access_key_id:
            kwargs["access_key"] = self.access_key_id
            kwargs["secret_key"] = self.secret_access_key
            if self.session_token:
                kwargs["session_token"] = self.session_token
        if self.region:
            kwargs["region"] = self.region
        return kwargs

    def filesystem(self, **extra: Any) -> Any:
        """A ``pyarrow.fs.S3FileSystem`` with these settings (``extra``: its other options)."""
        import pyarrow.fs as pafs

        return pafs.S3FileSystem(**self.pyarrow_kwargs(), **extra)


def s3_settings(
    options: Mapping[str, Any] | None = None, *, environ: Mapping[str, str] | None = None
) -> S3Settings:
    """The settings ``options`` (``endpoint_url``, ``region``, ``access_key_id``,
    ``secret_access_key``, ``session_token``) give, completed from ``environ`` (default: the
    process environment). Unknown options raise :class:`InvalidArgumentError`.

    >>> s3_settings({}, environ={"AWS_ENDPOINT_URL": "http://minio:9000"}).endpoint_url
    'http://minio:9000'
    """
    given = dict(options or {})
    unknown = set(given) - CLIENT_OPTIONS
    if unknown:
        raise InvalidArgumentError(
            f"unknown S3 option(s) {sorted(unknown)}; known options are {sorted(CLIENT_OPTIONS)}"
        )
    env = os.environ if environ is None else environ

    def first(option: str, variables: tuple[str, ...]) -> str | None:
        value = given.get(option)
        if value:
            return str(value)
        return next((env[v] for v in variables if env.get(v)), None)

    return S3Settings(
        endpoint_url=first("endpoint_url", _ENDPOINT_VARIABLES),
        region=first("region", _REGION_VARIABLES),
        access_key_id=given.get("access_key_id") or None,
        secret_access_key=given.get("secret_access_key") or None,
        session_token=given.get("session_token") or None,
    )
