"""Stores by URI scheme: a local directory (the default) or S3.

>>> store = open_store("./warehouse")            # doctest: +SKIP
>>> store = open_store("s3://bucket/prefix", endpoint_url="http://127.0.0.1:9000")  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlparse

from ledger.errors import InvalidArgumentError
from ledger.storage.base import ObjectInfo, Store
from ledger.storage.local import LocalStore
from ledger.storage.s3 import S3Store

__all__ = ["ObjectInfo", "Store", "open_store"]


def _open_local(uri: str, **options: Any) -> Store:
    if options:
        raise InvalidArgumentError(
            f"local stores take no options, got {sorted(options)}; options such as "
            "endpoint_url are for s3:// URIs"
        )
    if not uri.strip():
        raise InvalidArgumentError(
            "the warehouse location is empty: give a folder (such as ./warehouse), file:// or "
            "s3:// URI"
        )
    if uri.startswith("file://"):
        parsed = urlparse(uri)
        if parsed.netloc not in ("", "localhost"):  # file://host/path names another machine
            raise InvalidArgumentError(
                f"{uri!r} names the host {parsed.netloc!r}; a file:// URI takes an absolute "
                "path (file:///data/warehouse) or none (a plain relative path)"
            )
        return LocalStore(parsed.path)
    return LocalStore(uri)


def _open_s3(uri: str, **options: Any) -> Store:
    return S3Store(uri, **options)


_STORES: dict[str, Callable[..., Store]] = {"": _open_local, "file": _open_local, "s3": _open_s3}


def open_store(uri: str, **options: Any) -> Store:
    """Open the store a URI names: ``./dir``, ``file:///abs/dir`` or ``s3://bucket/prefix``."""
    scheme = urlparse(uri).scheme if "://" in uri else ""
    try:
        opener = _STORES[scheme]
    except KeyError:
        raise InvalidArgumentError(
            f"unsupported storage scheme {scheme!r} in {uri!r}; use a local path, file:// or s3://"
        ) from None
    return opener(uri, **options)
