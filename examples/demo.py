"""A synthetic training served to the dashboard, until Ctrl+C.

Publishes a decreasing loss, a cosine learning rate, validation at each epoch, runtime
stats every second and a few log records at about 50 steps/s, and obeys pause, resume,
stop and test from the dashboard. Run it with ``make demo`` and open the printed address.
"""

from __future__ import annotations

import math
import random
import signal
import time

from onthefly.protocol import RunTest
from onthefly.server import PendingCommand, SessionServer

STEPS_PER_SECOND = 50
STEPS_PER_EPOCH = 500
TOTAL_EPOCHS = 20


class SyntheticRun:
    """A fake run: its state and how it answers commands."""

    def __init__(self, server: SessionServer) -> None:
        self.server = server
        self.run = server.main_run
        self.state = "running"
        self.step = 0
        self.epoch = 0
        self.tests = 0
        self.rng = random.Random(0)
        self.last_runtime = 0.0

    def train_step(self) -> None:
        if self.step % STEPS_PER_EPOCH == 0:
            self.epoch = self.step // STEPS_PER_EPOCH
            self.publish("epoch", epoch=self.epoch, step=self.step)
            if self.epoch:
                self.validate()
        progress = self.step / (STEPS_PER_EPOCH * TOTAL_EPOCHS)
        loss = 2.3 * math.exp(-4 * progress) + 0.05 + self.rng.gauss(0, 0.04)
        lr = 1e-3 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        values = {"loss": max(loss, 0.0), "lr": lr}
        self.publish("metrics", step=self.step, epoch=self.epoch, values=values)
        if self.step % 200 == 0:
            self.log("INFO", f"step {self.step}: loss {loss:.4f}")
        self.step += 1
        if self.step >= STEPS_PER_EPOCH * TOTAL_EPOCHS:
            self.set_state("finished", "reached the last epoch")

    def validate(self) -> None:
        loss = 2.3 * math.exp(-4 * self.step / (STEPS_PER_EPOCH * TOTAL_EPOCHS)) + 0.1
        accuracy = min(0.99, 1 - loss / 2.5)
        values = {"loss": loss, "accuracy": accuracy}
        self.publish("metrics", split="val", step=self.step, epoch=self.epoch, values=values)

    def runtime(self, step_time: float) -> None:
        now = time.monotonic()
        if now - self.last_runtime < 1.0:
            return
        self.last_runtime = now
        self.publish(
            "runtime",
            step=self.step,
            step_time=step_time,
            data_wait=step_time * 0.1,
            samples_per_s=128 / step_time if self.state == "running" else 0.0,
            cpu_percent=10 + self.rng.random() * 5,
            rss_bytes=300_000_000 + self.step * 1000,
        )

    def handle(self, pending: PendingCommand) -> None:
        kind = pending.command.type
        if kind == "pause" and self.state == "running":
            self.set_state("paused", "paused from the dashboard")
        elif kind == "resume" and self.state == "paused":
            self.set_state("running", "resumed from the dashboard")
        elif kind == "stop" and self.state != "finished":
            self.set_state("finished", "stopped from the dashboard")
        elif kind == "test":
            self.tests += 1
            command = pending.command
            label = (
                command.label if isinstance(command, RunTest) else None
            ) or f"test_{self.tests}"
            loss = 2.3 * math.exp(-4 * self.step / (STEPS_PER_EPOCH * TOTAL_EPOCHS)) + 0.12
            self.publish(
                "test_result",
                label=label,
                step=self.step,
                loss=loss,
                metrics={"accuracy": min(0.99, 1 - loss / 2.5)},
                duration=0.2,
            )
        else:
            pending.fail("invalid_state", f"cannot {kind} a run that is {self.state}")
            return
        pending.reply(state=self.state, step=self.step, epoch=self.epoch)

    def set_state(self, state: str, reason: str) -> None:
        self.state = state
        self.publish("status", state=state, step=self.step, epoch=self.epoch, reason=reason)
        self.log("INFO", reason)

    def log(self, level: str, message: str) -> None:
        record = {"time": time.time(), "level": level, "logger": "demo", "message": message}
        self.publish("log", record=record)

    def publish(self, kind: str, **payload: object) -> None:
        self.server.publish(self.run, kind, **payload)


def serve(server: SessionServer) -> None:
    """Train (or wait, when paused or finished) forever, answering commands."""
    run = SyntheticRun(server)
    period = 1.0 / STEPS_PER_SECOND
    while True:
        started = time.monotonic()
        while not server.inbox.empty():
            run.handle(server.inbox.get_nowait())
        if run.state == "running":
            run.train_step()
        run.runtime(period)
        time.sleep(max(0.0, period - (time.monotonic() - started)))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> int:
    # `kill` (SIGTERM) ends the demo as cleanly as Ctrl+C.
    signal.signal(signal.SIGTERM, _interrupt)
    server = SessionServer("demo", "synthetic")
    try:
        server.start()
        serve(server)
    except KeyboardInterrupt:
        print("\n[onthefly] demo stopped", flush=True)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
