import threading
import time

import pytest

from onthefly.callbacks._runtime_sampler import RuntimeSampler, StepClock


def _sampler(events: list[dict]) -> RuntimeSampler:
    return RuntimeSampler(
        StepClock(), lambda: 7, lambda body: events.append(body.model_dump()), 0.01
    )


def test_samples_are_published_until_stopped() -> None:
    events: list[dict] = []
    sampler = _sampler(events)
    sampler.start()
    deadline = time.monotonic() + 10
    while not events and time.monotonic() < deadline:
        time.sleep(0.01)
    sampler.stop()
    count = len(events)
    time.sleep(0.05)
    assert count >= 1 and len(events) == count
    assert events[0]["step"] == 7 and events[0]["rss_bytes"] > 0


def test_stop_after_ctrl_c_interrupted_start(monkeypatch: pytest.MonkeyPatch) -> None:
    # Ctrl+C can land while Thread.start() waits for the new thread to report running: the
    # thread object is then not "started" and join() would raise instead of stopping cleanly.
    def interrupted_start(self: threading.Thread) -> None:
        raise KeyboardInterrupt

    sampler = _sampler([])
    monkeypatch.setattr(threading.Thread, "start", interrupted_start)
    with pytest.raises(KeyboardInterrupt):
        sampler.start()
    monkeypatch.undo()
    sampler.stop()  # no "cannot join thread before it is started"
