"""Connection floods against a real training run: idle sockets and slow heads cost no thread.

A local process without the token opens 1,000 TCP connections to the run's session and sends
nothing (then, more slowly, half a request each). Checked: a real client with the token is
still answered within a second; the training process's thread count stays at what it was
before the flood (the front door holds waiting connections without threads), never above the
bound of :mod:`onthefly.server.admission`; and the run trains on. The figures go to
``benchmarks/RESULTS.md`` under ``make stress``.
"""

from __future__ import annotations

import contextlib
import resource
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import psutil

from onthefly.server.admission import Limits
from onthefly.server.discovery import SessionFile
from tests.callbacks.live import wait_for_session
from tests.hardening.figures import record
from tests.hardening.process import training
from tests.hardening.wire import Wire

IDLE_SOCKETS = 1000
ANSWER_BOUND_S = 1.0


@contextlib.contextmanager
def idle_sockets(port: int, count: int, first_bytes: bytes = b"") -> Iterator[list[socket.socket]]:
    """``count`` connections to ``port`` that send ``first_bytes`` and then nothing."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(hard, count + 512)
    if soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    opened: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            if first_bytes:
                with contextlib.suppress(OSError):  # the server may have closed it already
                    sock.sendall(first_bytes)
            opened.append(sock)
        yield opened
    finally:
        for sock in opened:
            sock.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_real_client_is_answered_under_a_flood_of_idle_sockets(
    onthefly_home: Path, tmp_path: Path
) -> None:
    with training(tmp_path, "--step-sleep", "0.005") as run:
        session = wait_for_session(onthefly_home)
        process = psutil.Process(run.pid)
        watcher = Wire(session)
        assert watcher.call("ping")["type"] == "reply"
        watcher.close()
        time.sleep(0.5)  # the watcher's threads end
        before = process.num_threads()
        step_before = _step(session)

        with idle_sockets(session.port, IDLE_SOCKETS):
            time.sleep(0.5)  # every connection accepted and waiting
            threads_idle = process.num_threads()
            started = time.monotonic()
            client = Wire(session)
            answered = client.call("status")
            idle_answer_s = time.monotonic() - started
            threads_with_client = process.num_threads()
            client.close()

        with idle_sockets(session.port, IDLE_SOCKETS // 4, b"GET / HTTP/1.1\r\nHost: 127"):
            time.sleep(0.5)
            threads_slow = process.num_threads()
            started = time.monotonic()
            client = Wire(session)
            assert client.call("ping")["type"] == "reply"
            slow_answer_s = time.monotonic() - started
            client.close()
        step_after = _step(session)

    assert answered["type"] == "reply"
    bound = Limits().max_threads
    figures = {
        "idle_sockets": IDLE_SOCKETS,
        "threads_before": before,
        "threads_under_idle_flood": threads_idle,
        "threads_with_a_client_under_flood": threads_with_client,
        "threads_under_slow_heads": threads_slow,
        "answer_s_under_idle_flood": round(idle_answer_s, 4),
        "answer_s_under_slow_heads": round(slow_answer_s, 4),
        "server_thread_bound": bound,
    }
    record("connection_flood", figures)
    assert idle_answer_s < ANSWER_BOUND_S and slow_answer_s < ANSWER_BOUND_S, figures
    # Waiting connections hold no thread at all; the client adds its three.
    assert threads_idle <= before and threads_slow <= before, figures
    assert threads_with_client <= before + 3, figures
    assert step_after > step_before  # it trained throughout


def _step(session: SessionFile) -> int:
    client = Wire(session)
    try:
        return int(client.call("status")["data"]["step"])
    finally:
        client.close()
