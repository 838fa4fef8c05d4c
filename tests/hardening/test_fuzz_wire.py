"""Fuzzing the wire: hypothesis-driven frames against the session of a real training run.

The run is the native trainer in its own process (``tests.hardening.training``), paced a
little so it trains throughout. Frames go over several connections at once (each paced
below the server's rate limit): random JSON, text and bytes that are not JSON, envelopes
with unknown types or unreadable ids, and every command type of the protocol with valid
arguments and with one argument out of range, of the wrong type, missing or unknown
(:mod:`tests.hardening.frames`). Then oversized frames and floods.

Checked: every frame gets exactly one ``reply`` or ``error``, carrying its id (``null``
when it had no readable one), with the code the protocol implies (never ``internal``);
neither the server nor the run crashes; and the run's losses equal those of the same
training without the session. Commands that legitimately change what the run computes
(``set``, ``stop``, ``restore``, ``import``, the fork commands, and any command added
later) are only ever sent with invalid arguments; the commands of ``frames.NEUTRAL`` are
also sent valid (pause, resume, test, scan, health, export, ...): those must leave the
losses untouched.

The default suite sends about 1,000 frames; ``make stress`` sends 10,000.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from onthefly.protocol import MAX_FRAME_BYTES
from onthefly.server import SessionServer
from onthefly.server.discovery import list_sessions
from tests.callbacks.live import wait_for_session
from tests.hardening.figures import record
from tests.hardening.frames import Frame, any_frame
from tests.hardening.process import training
from tests.hardening.training import fit
from tests.hardening.wire import Wire

CONNECTIONS = 6
REFUSED = frozenset({"bad_json", "bad_message", "unknown_type", "rate_limited"})
"""Codes that may answer a frame the protocol does not accept."""


def check_answers(frames: list[Frame], answers: list[dict[str, Any]]) -> dict[str, int]:
    """Exactly one answer per frame, by id, with a code that fits the frame; returns the
    count of each outcome (``reply`` or the error code)."""
    sent: dict[str | None, list[Frame]] = defaultdict(list)
    got: dict[str | None, list[dict[str, Any]]] = defaultdict(list)
    for item in frames:
        sent[item.answer_id].append(item)
    for answer in answers:
        got[answer["id"]].append(answer)
    assert {k: len(v) for k, v in got.items()} == {k: len(v) for k, v in sent.items()}
    outcomes: dict[str, int] = defaultdict(int)
    for key, group in sent.items():
        codes = [a["error"]["code"] if a["type"] == "error" else "reply" for a in got[key]]
        for code in codes:
            outcomes[code] += 1
        assert "internal" not in codes, (group, got[key])
        if all(not item.valid for item in group):
            assert set(codes) <= REFUSED, (group, got[key])
        elif all(item.valid for item in group):
            assert not set(codes) & (REFUSED - {"rate_limited"}), (group, got[key])
    return dict(outcomes)


def fuzz(
    folder: Path, home: Path, examples: int, per_example: int, derandomize: bool
) -> dict[str, Any]:
    """Fuzz a live run with ``examples * per_example`` generated frames plus the oversized
    and flooding ones; returns the figures. ``derandomize`` draws the same frames every
    time (the default suite); otherwise each run explores new ones."""
    sandbox = folder / "sandbox"
    sandbox.mkdir()
    outcomes: dict[str, int] = defaultdict(int)
    tally = {"frames": 0, "valid": 0}
    with training(folder, "--step-sleep", "0.005", cwd=sandbox) as run:
        session = wait_for_session(home)
        pool = [Wire(session) for _ in range(CONNECTIONS)]
        control = Wire(session)
        main_run = control.call("status")["data"]["run"]
        frames_of = any_frame(str(sandbox), main_run)

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            derandomize=derandomize,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.lists(frames_of, min_size=per_example, max_size=per_example))
        def exchange(frames: list[Frame]) -> None:
            before = [len(wire.answers) for wire in pool]
            mine: list[list[Frame]] = [[] for _ in pool]
            for i, item in enumerate(frames):
                mine[i % len(pool)].append(item)
                pool[i % len(pool)].send(item.wire)
            for wire, start, own in zip(pool, before, mine, strict=True):
                wire.wait_answers(start + len(own))
                for code, n in check_answers(own, wire.answers[start:]).items():
                    outcomes[code] += n
            tally["frames"] += len(frames)
            tally["valid"] += sum(item.valid for item in frames)
            # An example may have paused the run: training goes on between examples.
            assert control.call("resume")["type"] in ("reply", "error")

        exchange()
        edges = edge_cases(session, control)
        assert all(wire.open for wire in pool), [wire.close_code for wire in pool]
        assert run.process.poll() is None, run.stderr()

        stopped = control.call("stop")
        assert stopped["type"] == "reply", stopped
        assert run.wait() == 0, run.stderr()
        for wire in pool:  # nothing more came after each example's answers
            wire.close()
            assert len(wire.answers) == wire.sent
        control.close()
    assert "Traceback" not in run.stderr() and "Exception in thread" not in run.stderr()
    fuzzed = run.losses()
    reference = fit(folder, max_steps=len(fuzzed), session=False)
    assert fuzzed == reference
    return {**tally, **edges, "steps": len(fuzzed), "outcomes": dict(outcomes)}


def edge_cases(session: Any, control: Wire) -> dict[str, int]:
    """Oversized frames, a flood and a frame the websocket library closes on."""
    wire = Wire(session, paced=False)
    big = json.dumps({"type": "ping", "id": "big", "pad": "x" * (MAX_FRAME_BYTES + 10)})
    for _ in range(3):
        wire.send(big)
    flood = [json.dumps({"type": "ping", "id": f"flood-{i}"}) for i in range(1000)]
    for frame in flood:
        wire.send(frame)
    wire.wait_answers(3 + len(flood))
    codes = [a["error"]["code"] if a["type"] == "error" else "reply" for a in wire.answers]
    assert codes[:3] == ["frame_too_large"] * 3
    assert [a["id"] for a in wire.answers[:3]] == [None] * 3
    assert sorted(a["id"] for a in wire.answers[3:]) == sorted(f"flood-{i}" for i in range(1000))
    assert set(codes[3:]) == {"reply", "rate_limited"}
    limited = codes.count("rate_limited")

    # Beyond four times the limit the library closes the connection (1009) unread.
    wire.send("x" * (4 * MAX_FRAME_BYTES + 1))
    wire.wait(lambda: wire.close_code, timeout=30)
    assert wire.close_code == 1009
    wire.close()
    assert control.call("ping")["type"] == "reply"  # serving goes on
    return {"oversized": 4, "flood": len(flood), "rate_limited": limited}


def test_a_thousand_fuzzed_frames_change_nothing(onthefly_home: Path, tmp_path: Path) -> None:
    figures = fuzz(tmp_path, onthefly_home, examples=20, per_example=50, derandomize=True)
    assert figures["frames"] >= 1000
    assert figures["valid"] > 100  # valid commands were exercised, not only refusals
    print("fuzz figures:", figures)


def test_an_id_no_answer_can_carry_is_answered_without_it() -> None:
    """Regression: an id holding a lone surrogate (valid JSON, not encodable as UTF-8) made
    the server fail while answering, which closed the connection unanswered."""
    with SessionServer("p", "r", port=0, quiet=True):
        (session,) = list_sessions()
        wire = Wire(session)
        for frame in (
            r'{"type": "status", "id": "\ud800"}',
            r'{"type": "ping", "id": "x\udfff", "extra": 1}',
            r'{"type": "warp", "id": "\udbff"}',
        ):
            wire.send(frame)
        wire.wait_answers(3)
        assert [(a["id"], a["type"]) for a in wire.answers] == [(None, "error")] * 3
        assert wire.call("ping")["type"] == "reply"  # the connection is still served
        wire.close()


@pytest.mark.stress
def test_ten_thousand_fuzzed_frames_change_nothing(onthefly_home: Path, tmp_path: Path) -> None:
    figures = fuzz(tmp_path, onthefly_home, examples=100, per_example=100, derandomize=False)
    assert figures["frames"] >= 10_000
    record("fuzz", figures)
