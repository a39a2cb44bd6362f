"""The example HTTP event sink answers every error in JSON, over real HTTP on 127.0.0.1: an
unknown path, a method a route does not take, a failure of the service itself."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from examples.ingest_service import RunningService, Settings, open_events, post_json
from tests.conftest import Location

QUIET = Settings(max_seconds=0.1, merge_every=3600, vacuum_every=3600)


def _request(url: str, method: str, body: bytes | None = None) -> tuple[int, Any, Any]:
    """Status, headers and decoded JSON body (the decoding fails on any other body)."""
    req = urllib.request.Request(url, body, {"Content-Type": "application/json"}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, answer.headers, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers, json.loads(e.read())


@pytest.fixture
def running(local_location: Location) -> Any:
    with RunningService(open_events(local_location.connect()), QUIET) as service:
        yield service


@pytest.mark.parametrize(
    ("method", "path", "status", "allowed"),
    [
        ("GET", "/nowhere", 404, None),
        ("POST", "/events/extra", 404, None),
        ("GET", "/events", 405, {"POST"}),
        ("PUT", "/events", 405, {"POST"}),
        ("DELETE", "/health", 405, {"GET", "HEAD"}),
        ("POST", "/health", 405, {"GET", "HEAD"}),
    ],
)
def test_routing_errors_are_answered_in_json(running, method, path, status, allowed) -> None:
    body = b"{}" if method in ("POST", "PUT") else None
    code, headers, answer = _request(running.url + path, method, body)
    assert code == status
    assert headers["Content-Type"] == "application/json"
    assert set(answer) == {"error"} and str(status) in answer["error"]
    assert "POST /events" in answer["error"]
    if allowed is not None:
        assert set(headers["Allow"].replace(" ", "").split(",")) >= allowed


def test_a_failure_of_the_service_itself_is_a_json_500_and_the_service_goes_on(
    running, monkeypatch
) -> None:
    def broken(events: Any) -> int:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(running.service, "accept", broken)
    code, headers, answer = _request(running.url + "/events", "POST", b'{"event_id": "e-1"}')
    assert code == 500 and headers["Content-Type"] == "application/json"
    assert "RuntimeError" in answer["error"] and "disk on fire" not in answer["error"]
    monkeypatch.undo()
    assert post_json(running.url + "/events", {"event_id": "e-2"}) == (200, {"accepted": 1})
