"""A mirror of one live session: the run's answers, errors included, come back through it."""

from __future__ import annotations

import json
import queue
import time

from onthefly.hub.mirror import Mirror
from onthefly.protocol import CLIENT_COMMAND
from onthefly.server.discovery import list_sessions
from onthefly.server.pending import PendingCommand
from tests.live_session import live_session


def forwarded(mirror: Mirror, frame: dict[str, object]) -> dict[str, object]:
    """Send ``frame`` through the mirror's broker as a tab would; return its answer frame."""
    answers: queue.SimpleQueue[bytes] = queue.SimpleQueue()
    broker = mirror.broker
    assert broker is not None
    command = CLIENT_COMMAND.validate_python(frame)
    pending = PendingCommand(command, broker.main_run, lambda render: answers.put(render()))
    broker.inbox.put(pending)
    return json.loads(answers.get(timeout=15))  # type: ignore[no-any-return]


def test_commands_go_to_the_run_and_its_errors_come_back() -> None:
    with live_session() as training:
        training.train(3)
        (session,) = list_sessions()
        mirror = Mirror(session)
        mirror.start()
        try:
            assert mirror.wait_ready(15)
            assert forwarded(mirror, {"type": "pause", "id": "t1"})["data"] == {
                "state": "paused",
                "step": 3,
                "epoch": 0,
            }
            error = forwarded(mirror, {"type": "pause", "id": "t2"})
            assert error["type"] == "reply"  # pausing twice is fine for the stand-in
            resumed = forwarded(mirror, {"type": "resume", "id": "t3"})
            assert resumed["data"]["state"] == "running"  # type: ignore[index]
            wrong = forwarded(mirror, {"type": "resume", "id": "t4"})
            assert wrong["error"]["code"] == "invalid_state"  # type: ignore[index]
            deadline = time.monotonic() + 15
            while mirror.broker is not None and mirror.broker.run_infos()[0].state != "running":
                assert time.monotonic() < deadline
                time.sleep(0.05)
        finally:
            mirror.close()
