"""A client's bounded queue: batching, coalescing of telemetry, overflow."""

from __future__ import annotations

import json
import threading
from typing import Any

from onthefly.server.outbox import MAX_BATCH_EVENTS, Outbox, StreamEvent


def _event(seq: int, kind: str = "metrics") -> StreamEvent:
    return StreamEvent(seq, kind, json.dumps({"type": kind, "seq": seq}).encode())


def _messages(box: Outbox) -> list[dict[str, Any]]:
    frames = box.take(timeout=0)
    assert frames is not None
    return [json.loads(frame) for frame in frames]


def test_consecutive_events_become_batches_around_frames() -> None:
    box = Outbox()
    box.put(b'{"type": "reply", "id": "1"}')
    box.put_events([_event(1), _event(2)])
    box.put(lambda: b'{"type": "reply", "id": "2"}')  # rendered by the taker
    box.put_events([_event(3)])
    kinds = [(m["type"], [e["seq"] for e in m.get("events", [])]) for m in _messages(box)]
    assert kinds == [("reply", []), ("batch", [1, 2]), ("reply", []), ("batch", [3])]


def test_batches_are_bounded() -> None:
    box = Outbox()
    box.put_events([_event(seq) for seq in range(1, 2 * MAX_BATCH_EVENTS + 2)])
    sizes = [len(m["events"]) for m in _messages(box)]
    assert sizes == [MAX_BATCH_EVENTS, MAX_BATCH_EVENTS, 1]


def test_slow_client_loses_telemetry_only_and_is_told() -> None:
    box = Outbox(max_events=10)
    box.put_events([_event(1, "status")])
    box.put_events([_event(seq) for seq in range(2, 8)])
    box.put(b'{"type": "reply", "id": "r"}')
    box.put_events([_event(8, "epoch"), *(_event(seq, "log") for seq in range(9, 14))])
    messages = _messages(box)
    assert [m["type"] for m in messages] == ["batch", "coalesced", "reply", "batch"]
    assert [e["seq"] for e in messages[0]["events"]] == [1]
    assert messages[1] == {"type": "coalesced", "from_seq": 2, "to_seq": 13, "dropped": 11}
    assert [e["seq"] for e in messages[3]["events"]] == [8]


def test_reset_stream_forgets_events_but_keeps_replies() -> None:
    box = Outbox()
    box.put_events([_event(1)])
    box.put(b'{"type": "reply", "id": "r"}')
    box.reset_stream()
    assert [m["type"] for m in _messages(box)] == ["reply"]


def test_too_many_unsheddable_items_mark_the_client_overflowed() -> None:
    box = Outbox(max_events=2, max_items=5)
    box.put_events([_event(seq, "status") for seq in range(1, 6)])
    assert not box.overflowed
    box.put_events([_event(6, "status")])
    assert box.overflowed


def test_take_waits_then_returns_none_once_closed_and_drained() -> None:
    box = Outbox()
    assert box.take(timeout=0.01) == []
    taken: list[list[bytes] | None] = []
    thread = threading.Thread(target=lambda: taken.append(box.take(timeout=10)))
    thread.start()
    box.put(b"x")
    thread.join()
    assert taken == [[b"x"]]
    box.put(b"y")
    box.close()
    box.put(b"ignored after close")
    assert box.take() == [b"y"]
    assert box.take() is None


def test_wait_drained_waits_for_the_sender() -> None:
    box = Outbox()
    box.put(b"x")
    assert not box.wait_drained(timeout=0)
    assert box.take(timeout=0) == [b"x"]
    assert not box.wait_drained(timeout=0)  # taken but not yet on the wire
    box.sent()
    assert box.wait_drained(timeout=0)
