"""PauseGate on a training running in a real subprocess, driven by a real websocket client."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn

import onthefly
from onthefly import OnTheFly
from onthefly.callbacks.pause_gate import keep_alive_wanted
from tests.callbacks.commanding import CommandsAt, send_now
from tests.callbacks.conftest import Connect
from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.callbacks.models import Tiny, lightning_trainer, loader
from tests.callbacks.subprocess_run import Training, training


def train_steps(client: LiveClient) -> list[int]:
    return [e["step"] for e in client.of("metrics", split="train")]


def assert_clean_exit(run: Training, home: Path, code: int = 0) -> None:
    assert run.wait() == code, run.stderr()
    assert session_files(home) == []
    assert "Traceback" not in run.stderr() and "Exception in thread" not in run.stderr()


def pause_when_running(client: LiveClient, run: Training) -> int:
    """Pause after step 3 was seen; returns the acknowledged step (checked against arrival)."""
    client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 3)
    sent = time.time()
    reply = client.call("pause")
    assert reply["type"] == "reply", reply
    ack = reply["data"]["step"]
    arrived = run.step_running_at(sent, rank=0 if run.ranks > 1 else None)
    # Effective when the step in progress ends: at most one more step.
    assert arrived - 1 <= ack <= arrived + 1, (arrived, ack)
    assert reply["data"]["state"] == "paused"
    assert (
        client.wait_event(lambda e: e["type"] == "status" and e["state"] == "paused")["step"] == ack
    )
    return int(ack)


def test_pause_resume_stop(onthefly_home: Path, tmp_path: Path) -> None:
    with training(onthefly_home, tmp_path, "--step-sleep", "0.05") as run:
        client = LiveClient(wait_for_session(onthefly_home))
        ack = pause_when_running(client, run)

        time.sleep(1.0)  # ~20 steps' worth: none may happen while paused
        assert max(train_steps(client)) == ack
        assert run.last_started() <= ack + 1

        resumed = client.call("resume")
        assert resumed["data"]["state"] == "running"
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= ack + 3)
        assert train_steps(client) == list(range(1, len(train_steps(client)) + 1))

        stopped = client.call("stop")
        assert (stopped["data"]["state"], stopped["data"]["stopping"]) == ("stopping", True)
        assert_clean_exit(run, onthefly_home)
        assert f"FIT RETURNED {stopped['data']['step']} ON RANK 0" in run.stdout()
        assert client.wait_event(lambda e: e.get("state") == "finished")
        client.close()


def test_stop_while_paused(onthefly_home: Path, tmp_path: Path) -> None:
    with training(onthefly_home, tmp_path, "--step-sleep", "0.05") as run:
        client = LiveClient(wait_for_session(onthefly_home))
        ack = pause_when_running(client, run)
        assert client.call("stop")["type"] == "reply"
        assert_clean_exit(run, onthefly_home)
        assert f"FIT RETURNED {ack} ON RANK 0" in run.stdout()
        client.close()


def test_ctrl_c_while_training_and_while_paused(onthefly_home: Path, tmp_path: Path) -> None:
    for paused in (False, True):
        folder = tmp_path / f"paused-{paused}"
        folder.mkdir()
        with training(onthefly_home, folder, "--step-sleep", "0.05") as run:
            client = LiveClient(wait_for_session(onthefly_home))
            if paused:
                pause_when_running(client, run)
            else:
                client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= 3)
            run.interrupt()
            # Lightning ends an interrupted fit with exit status 1, after its clean shutdown.
            assert_clean_exit(run, onthefly_home, code=1)
            assert "KeyboardInterrupt" in run.stderr()
            client.close()


@pytest.mark.parametrize(
    ("argument", "env", "clients", "expected"),
    [
        (True, "0", False, True),  # an explicit argument wins
        (False, "1", True, False),
        (None, "1", False, True),  # then the environment
        (None, "0", True, False),
        (None, "", True, True),  # then a connected client (stdin is not a terminal here)
        (None, "", False, False),
    ],
)
def test_keep_alive_decision(
    argument: bool | None, env: str, clients: bool, expected: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONTHEFLY_KEEP_ALIVE", env)
    monkeypatch.setattr("sys.stdin", io.StringIO())
    assert keep_alive_wanted(argument, clients) is expected


def test_a_bad_keep_alive_value_is_reported_and_ignored(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ONTHEFLY_KEEP_ALIVE", "yes")
    monkeypatch.setattr("sys.stdin", io.StringIO())
    assert keep_alive_wanted(None, has_clients=True) is True
    assert "ONTHEFLY_KEEP_ALIVE='yes' is ignored: expected 0 or 1" in caplog.text


def test_all_ranks_of_a_distributed_run_pause_resume_and_stop_together(
    onthefly_home: Path, tmp_path: Path
) -> None:
    with training(onthefly_home, tmp_path, "--step-sleep", "0.05", ranks=2) as run:
        client = LiveClient(wait_for_session(onthefly_home, timeout=120))
        ack = pause_when_running(client, run)
        time.sleep(1.0)
        assert max(train_steps(client)) == ack
        assert run.last_started(rank=0) <= ack + 1 and run.last_started(rank=1) <= ack + 1

        assert client.call("resume")["data"]["state"] == "running"
        client.wait_event(lambda e: e["type"] == "metrics" and e["step"] >= ack + 3)
        stopped = client.call("stop")["data"]["step"]
        assert_clean_exit(run, onthefly_home)
        for rank in (0, 1):
            assert f"FIT RETURNED {stopped} ON RANK {rank}" in run.stdout()
        client.close()


# --- the boundary at a batch's start --------------------------------------------------------


class LossRecord(pl.Callback):
    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(float(outputs["loss"] if isinstance(outputs, dict) else outputs))


class AfterValidation(LossRecord):
    """Sends ``commands`` when the first validation ends: they reach the training thread at
    the next epoch's first batch start (place after :class:`Connect`)."""

    def __init__(self, connect: Connect, *commands: tuple[str, dict[str, Any]]) -> None:
        super().__init__()
        self.connect, self.commands = connect, commands
        self.ids: list[str] = []

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if not self.ids and self.connect.client is not None:
            self.ids = send_now(trainer, self.connect.client, self.commands)


def fit_with(driver: str, callbacks: list[Any]) -> Any:
    """Two epochs of 8 batches with a validation after each, under ``driver``."""
    torch.manual_seed(0)
    if driver == "lightning":
        trainer = lightning_trainer(
            max_epochs=2,
            num_sanity_val_steps=0,
            callbacks=[OnTheFly(project="tests", port=0, quiet=True), *callbacks],
        )
        trainer.fit(Tiny(), loader(64, shuffle=True), loader(16, seed=1))
        return trainer
    trainer = onthefly.Trainer(
        project="tests",
        max_epochs=2,
        val_every_n_epochs=1,
        progress_bar=False,
        callbacks=callbacks,
        port=0,
        quiet=True,
    )
    model = nn.Linear(8, 2)
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(64, shuffle=True),
        val_loader=loader(16, seed=1),
    )
    return trainer


class WhilePaused(threading.Thread):
    """Once the run acknowledged the pause: asks ``status``, then sends ``stop``."""

    def __init__(self, connect: Connect, commands: AfterValidation) -> None:
        super().__init__(daemon=True)
        self.connect, self.commands = connect, commands
        self.answers: dict[str, dict[str, Any]] = {}

    def run(self) -> None:
        while not (self.commands.ids and self.connect.client is not None):
            time.sleep(0.01)
        client = self.connect.client
        self.answers["pause"] = client.wait(lambda: client.answers.get(self.commands.ids[0]))
        # Events reach the server in batches: the pause's own status event first.
        client.wait_event(lambda e: e["type"] == "status" and e["state"] == "paused")
        self.answers["status"] = client.call("status")
        self.answers["stop"] = client.call("stop")


@pytest.mark.parametrize("driver", ["native", "lightning"])
def test_a_stop_while_held_at_an_epoch_start_trains_no_further_step(
    driver: str, onthefly_home: Path
) -> None:
    connect = Connect(onthefly_home)
    commands = AfterValidation(connect, ("pause", {}))
    control = WhilePaused(connect, commands)
    control.start()
    trainer = fit_with(driver, [connect, commands])
    control.join(30)
    answers = {kind: answer["data"] for kind, answer in control.answers.items()}
    # Held at epoch 1's first batch, 8 steps done: nothing more was trained.
    assert trainer.global_step == len(commands.losses) == 8
    assert (answers["pause"]["step"], answers["pause"]["epoch"]) == (8, 1)
    assert answers["stop"]["step"] == 8
    # The status counts the steps done, not the epoch's first step still to come.
    assert (answers["status"]["step"], answers["status"]["epoch"]) == (8, 1)
    connect.finished().close()


class SendingWhileFetched(torch.utils.data.Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """Noisy data read in the main process that, once armed, sends commands from inside the
    fetch of the next batch: they arrive after the batch end's check and before its start."""

    def __init__(self) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(64, 8, generator=g)
        self.y = (self.x[:, 0] > 0).long()
        self.send: Any = None

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        send, self.send = self.send, None
        if send is not None:
            send()
        return self.x[i] + 0.1 * torch.randn(8), self.y[i]  # draws from the global RNG


class ArmAt(pl.Callback):
    def __init__(self, connect: Connect, data: SendingWhileFetched, step: int, path: Path):
        self.connect, self.data, self.step, self.path = connect, data, step, path
        self.ids: list[str] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        if trainer.global_step == self.step and self.connect.client is not None:
            commands = [("pause", {}), ("export", {"path": str(self.path)}), ("stop", {})]
            client = self.connect.client
            self.data.send = lambda: self.ids.extend(send_now(trainer, client, commands))


def native_noisy(callbacks: list[Any], data: SendingWhileFetched, **fit: Any) -> list[float]:
    losses = LossRecord()
    trainer = onthefly.Trainer(
        project="tests",
        max_epochs=2,
        progress_bar=False,
        callbacks=[*callbacks, losses],
        port=0,
        quiet=True,
    )
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.3), nn.Linear(8, 2))
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=torch.utils.data.DataLoader(data, batch_size=8, shuffle=True),
        **fit,
    )
    return losses.losses


def test_a_command_that_arrives_during_a_fetch_waits_for_that_batch_s_end(
    onthefly_home: Path, tmp_path: Path
) -> None:
    full = native_noisy([], SendingWhileFetched())
    data, path = SendingWhileFetched(), tmp_path / "fetch.otf"
    connect = Connect(onthefly_home)
    arm = ArmAt(connect, data, step=3, path=path)
    first = native_noisy([connect, arm], data)
    client = connect.finished()
    pause, export, stop = (client.wait(lambda i=i: client.answers.get(i)) for i in arm.ids)
    client.close()
    # Not at batch 4's start (its fetch drew noise with no state kept): at its end.
    assert pause["data"]["step"] == export["data"]["step"] == stop["data"]["step"] == 4
    assert len(first) == 4
    rest = native_noisy([], SendingWhileFetched(), resume_from=path)
    assert first + rest == full


# --- extending a run before its end -------------------------------------------------------


def fit_limited(driver: str, callbacks: list[Any], **limits: Any) -> Any:
    """8 batches per epoch under ``driver``, with the given limits."""
    torch.manual_seed(0)
    if driver == "lightning":
        trainer = lightning_trainer(
            callbacks=[OnTheFly(project="tests", port=0, quiet=True), *callbacks],
            num_sanity_val_steps=0,
            **limits,
        )
        trainer.fit(Tiny(), loader(64, shuffle=True), loader(16, seed=1))
        return trainer
    trainer = onthefly.Trainer(
        project="tests", progress_bar=False, callbacks=callbacks, port=0, quiet=True, **limits
    )
    model = nn.Linear(8, 2)
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(64, shuffle=True),
    )
    return trainer


@pytest.mark.parametrize("paused", [False, True], ids=["running", "paused"])
@pytest.mark.parametrize("driver", ["native", "lightning"])
def test_more_steps_for_a_run_planned_in_epochs_come_after_its_planned_end(
    driver: str, paused: bool, onthefly_home: Path
) -> None:
    connect = Connect(onthefly_home)
    commands = [("pause", {})] if paused else []
    send = CommandsAt(connect, 3, *commands, ("resume", {"steps": 5}))
    trainer = fit_limited(driver, [connect, send], max_epochs=2)
    reply = send.answers()[-1]["data"]
    connect.finished().close()
    assert (reply["max_epochs"], reply["max_steps"]) == (2, -1)  # the plan stands …
    assert reply["after_end"] == {"steps": 5}  # … and 5 steps follow it
    assert trainer.global_step == 2 * 8 + 5


@pytest.mark.parametrize("paused", [False, True], ids=["running", "paused"])
def test_more_epochs_for_a_run_planned_in_steps_come_after_its_planned_end(
    paused: bool, onthefly_home: Path
) -> None:
    connect = Connect(onthefly_home)
    commands = [("pause", {})] if paused else []
    send = CommandsAt(connect, 3, *commands, ("resume", {"epochs": 1}))
    trainer = fit_limited("native", [connect, send], max_steps=10)
    connect.finished().close()
    # Step 10 is in epoch 1: that epoch ends, then one more.
    assert (trainer.current_epoch, trainer.global_step) == (3, 3 * 8)


def test_an_extension_in_the_unit_of_the_plan_moves_it_at_once(onthefly_home: Path) -> None:
    connect = Connect(onthefly_home)
    send = CommandsAt(connect, 3, ("resume", {"epochs": 1}))
    trainer = fit_limited("native", [connect, send], max_epochs=2)
    reply = send.answers()[-1]["data"]
    connect.finished().close()
    assert (reply["max_epochs"], "after_end" in reply) == (3, False)
    assert trainer.global_step == 3 * 8
