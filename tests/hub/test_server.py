"""The hub over real sockets: listing, routing, the token and origin gate, a stable address,
and runs followed from start to end (and after)."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import ClientConnection, connect

from onthefly.errors import ConfigurationError
from onthefly.hub import Hub
from onthefly.hub.address import read_hub
from tests.hub.client import eventually, listing, status_of
from tests.live_session import live_session


@pytest.fixture
def hub() -> Iterator[Hub]:
    with Hub(port=0, quiet=True) as running:
        yield running


def tab(hub: Hub, key: str, **headers: str) -> ClientConnection:
    """A socket to session ``key`` of the hub, with the hub's token in the URL."""
    url = f"ws://127.0.0.1:{hub.port}/ws/{key}?token={hub.token}"
    return connect(url, additional_headers=headers, open_timeout=10)


def frames_until(socket: ClientConnection, done: Callable[[dict[str, Any]], bool]) -> list[Any]:
    """Frames (batches flattened) until one satisfies ``done``."""
    seen = []
    while True:
        frame = json.loads(socket.recv(timeout=15))
        for message in frame["events"] if frame["type"] == "batch" else [frame]:
            seen.append(message)
            if done(message):
                return seen


def entry(hub: Hub, port: int) -> dict[str, Any]:
    return eventually(
        lambda: next((s for s in listing(hub)["sessions"] if s["port"] == port), None)
    )


def test_a_live_run_is_listed_mirrored_and_commanded_through_the_hub(hub: Hub) -> None:
    with live_session() as training:
        training.train(5)
        listed = entry(hub, training.server.port)
        assert (listed["project"], listed["run"], listed["live"]) == ("mnist", "baseline", True)
        assert "token" not in listed and listed["path"] == f"/ws/{listed['key']}"
        # The hub relays: it alone never keeps a run open at its end (keep_alive).
        # Once its subscription (which says it relays) is in: connected, yet not watching.
        server = training.server
        eventually(lambda: server._broker.clients == 1 and not server.has_clients())
        with tab(hub, listed["key"]) as socket:
            assert json.loads(socket.recv(timeout=10))["type"] == "hello"
            socket.send(json.dumps({"type": "subscribe", "id": "s"}))
            snapshot = frames_until(socket, lambda f: f["type"] == "snapshot")[-1]
            (run,) = snapshot["runs"]
            assert run["series"]["loss"]["steps"] == [1, 2, 3, 4, 5]
            training.train(2)
            frames_until(socket, lambda f: f.get("type") == "metrics" and f["step"] == 7)
            socket.send(json.dumps({"type": "pause", "id": "p"}))
            reply = frames_until(socket, lambda f: f.get("id") == "p")[-1]
            assert reply == {
                "type": "reply",
                "id": "p",
                "data": {"state": "paused", "step": 7, "epoch": 0},
            }
            assert training.state == "paused"
            socket.send(json.dumps({"type": "history", "id": "h", "metric": "loss"}))
            history = frames_until(socket, lambda f: f.get("id") == "h")[-1]
            assert history["data"]["series"]["steps"] == list(range(1, 8))


def test_a_run_that_ended_stays_viewable_read_only(hub: Hub) -> None:
    with live_session() as training:
        training.train(3)
        key = entry(hub, training.server.port)["key"]
        eventually(lambda: hub.catalog.broker(key) is not None)
    ended = eventually(
        lambda: next(s for s in listing(hub)["sessions"] if s["key"] == key)["live"] is False
    )
    assert ended
    with tab(hub, key) as socket:
        socket.recv(timeout=10)
        socket.send(json.dumps({"type": "subscribe", "id": "s"}))
        snapshot = frames_until(socket, lambda f: f["type"] == "snapshot")[-1]
        (run,) = snapshot["runs"]
        assert run["state"] == "finished" and run["series"]["loss"]["steps"] == [1, 2, 3]
        socket.send(json.dumps({"type": "pause", "id": "p"}))
        error = frames_until(socket, lambda f: f.get("id") == "p")[-1]
        assert error["error"]["code"] == "unsupported" and "has ended" in error["error"]["message"]


def test_a_restarted_run_is_a_new_entry_beside_the_ended_one(hub: Hub) -> None:
    with live_session() as first:
        first_port = first.server.port
        entry(hub, first_port)
    with live_session() as second:
        entry(hub, second.server.port)
        ports = (first_port, second.server.port)

        def both() -> list[tuple[str, bool]] | None:
            # Once the hub has seen the first run end (it notices within its poll interval).
            sessions = listing(hub)["sessions"]
            runs = [(s["run"], s["live"]) for s in sessions if s["port"] in ports]
            return runs if len(runs) == 2 and not all(live for _, live in runs) else None

        assert eventually(both) == [("baseline", True), ("baseline", False)]  # live first


def test_the_gate_token_origin_host_and_unknown_routes(hub: Hub) -> None:
    base = f"http://127.0.0.1:{hub.port}"
    assert status_of(f"{base}/sessions") == 401
    assert status_of(f"{base}/sessions?token=wrong") == 401
    assert status_of(f"{base}/") == 200
    with live_session() as training:
        key = entry(hub, training.server.port)["key"]
        url = f"ws://127.0.0.1:{hub.port}/ws/{key}"
        with pytest.raises(InvalidStatus, match="401"):
            connect(url, open_timeout=10)
        with pytest.raises(InvalidStatus, match="401"):
            connect(f"{url}?token={training.server.token}", open_timeout=10)  # the run's own
        with pytest.raises(InvalidStatus, match="403"):
            tab(hub, key, Origin=f"http://127.0.0.1:{training.server.port}")
        with pytest.raises(InvalidStatus, match="404"):
            tab(hub, "1-2")
        with tab(hub, key, Origin=f"http://localhost:{hub.port}") as socket:
            assert json.loads(socket.recv(timeout=10))["type"] == "hello"


def test_the_page_may_be_framed_by_loopback_pages_only(hub: Hub) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{hub.port}/", timeout=10) as response:
        policy = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'self' http://127.0.0.1:* http://localhost:* vscode-webview:" in policy
    assert "'none'" in policy.split("frame-ancestors")[0]  # default-src 'none' stays


def test_the_address_is_stable_and_one_hub_per_home(onthefly_home: Path) -> None:
    with Hub(port=0, quiet=True) as first:
        token = first.token
        assert read_hub() is not None and read_hub().url == first.url  # type: ignore[union-attr]
        assert (onthefly_home / "hub.json").stat().st_mode & 0o777 == 0o600
        with pytest.raises(ConfigurationError, match="already serves"):
            Hub(port=0, quiet=True)
    with Hub(port=0, quiet=True) as again:
        assert again.token == token


def test_a_taken_port_is_an_error_not_another_address() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"port {port} .* in use"):
            Hub(port=port, quiet=True).start()
