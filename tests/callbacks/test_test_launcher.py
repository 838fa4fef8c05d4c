"""TestLauncher: the ``test`` command mid-fit (Lightning's own test loop) and do_test_after."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

from onthefly import OnTheFly
from onthefly.callbacks.test_launcher import LABEL_ENV, pick_loss, test_label
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect
from tests.callbacks.live import LiveClient, session_files, wait_for_session
from tests.callbacks.models import Tiny, lightning_trainer, loader
from tests.callbacks.subprocess_run import training


class Losses(pl.Callback):
    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []
        self.test_starts: list[tuple[int, bool, str | None]] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(outputs["loss"].clone())
        # Training goes on in train mode with Lightning's training state after a test.
        assert pl_module.training and trainer.training

    def on_test_start(self, trainer: Any, pl_module: Any) -> None:
        self.test_starts.append((trainer.global_step, pl_module.training, trainer.state.stage))


class SendAt(pl.Callback):
    """Sends a command through the connected client when step ``step`` starts."""

    def __init__(self, connect: Connect, step: int, kind: str) -> None:
        self.connect, self.step, self.kind = connect, step, kind
        self.command_id: str | None = None

    def on_train_batch_start(self, trainer: Any, pl_module: Any, *args: Any) -> None:
        if trainer.global_step + 1 == self.step and self.connect.client is not None:
            self.command_id = self.connect.client.send(self.kind)


def fit(home: Path | None) -> tuple[Losses, Connect | None, SendAt | None]:
    torch.manual_seed(0)
    model = TinyWithTestData()
    losses = Losses()
    callbacks: list[pl.Callback] = [losses]
    connect = send = None
    if home is not None:
        connect = Connect(home)
        send = SendAt(connect, step=3, kind="test")
        callbacks += [OnTheFly(project="tests", port=0, quiet=True), connect, send]
    trainer = lightning_trainer(max_epochs=2, callbacks=callbacks)
    trainer.fit(model, loader(64, shuffle=True), loader(16, seed=1))
    return losses, connect, send


def test_the_test_command_runs_lightnings_test_loop_mid_fit(onthefly_home: Path) -> None:
    losses, connect, send = fit(onthefly_home)
    assert connect is not None and send is not None and send.command_id is not None
    client = connect.finished()
    reply = client.answers[send.command_id]
    assert reply["type"] == "reply", reply
    result = client.of("test_result")[0]
    assert result["label"] == reply["data"]["label"] == "test_1"
    assert 3 <= result["step"] < 16  # at the first boundary after it arrived
    assert set(result["metrics"]) == {"test_loss", "test_acc"}
    assert result["loss"] == result["metrics"]["test_loss"]
    states = [(e["state"], e["reason"]) for e in client.of("status")]
    assert states[:2] == [("testing", "test_1"), ("running", "test_1 done")]
    # The module's own test hooks ran, in eval mode, under Lightning's testing stage.
    assert losses.test_starts == [(result["step"], False, "test")]

    # The test changed nothing in training: same losses as a run without it, bit for bit.
    bare, _, _ = fit(None)
    assert torch.equal(torch.stack(losses.losses), torch.stack(bare.losses))
    client.close()


class TinyWithTestData(Tiny):
    def test_dataloader(self) -> Any:
        return loader(16, seed=2)


class NoTestStep(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Linear(8, 2)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        time.sleep(0.01)  # leaves the command time to arrive while training runs
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_the_test_command_without_test_step_is_unsupported(onthefly_home: Path) -> None:
    connect = Connect(onthefly_home)
    send = SendAt(connect, step=2, kind="test")
    otf = OnTheFly(project="tests", port=0, quiet=True)
    trainer = lightning_trainer(max_epochs=1, callbacks=[otf, connect, send])
    trainer.fit(NoTestStep(), loader(256))
    client = connect.finished()
    assert send.command_id is not None
    error = client.answers[send.command_id]["error"]
    assert error["code"] == "unsupported"
    assert "defines no test_step" in error["message"]
    assert trainer.global_step == 32  # and training went on
    client.close()


def test_do_test_after_holds_paused_then_extends_and_stops(
    onthefly_home: Path, tmp_path: Path
) -> None:
    args = ("--max-steps", "6", "--do-test-after")
    with training(onthefly_home, tmp_path, *args, keep_alive="1") as run:
        client = LiveClient(wait_for_session(onthefly_home))
        first = client.wait_event(lambda e: e["type"] == "test_result")
        assert (first["label"], first["step"]) == ("test_1", 6)
        held = client.wait_event(lambda e: e.get("state") == "paused")
        assert (held["step"], held["reason"]) == (6, "stop condition reached")

        again = client.call("test")
        assert (again["data"]["label"], again["data"]["step"]) == ("test_2", 6)
        refused = client.call("resume")
        assert refused["error"]["code"] == "invalid_state"

        extended = client.call("resume", steps=3)
        assert extended["data"]["max_steps"] == 9
        third = client.wait_event(lambda e: e["type"] == "test_result" and e["step"] == 9)
        assert third["label"] == "test_3"
        client.wait_event(lambda e: e.get("state") == "paused" and e["step"] == 9)
        steps = [e["step"] for e in client.of("metrics", split="train")]
        assert steps == list(range(1, 10))

        assert client.call("stop")["type"] == "reply"
        assert run.wait() == 0, run.stderr()
        assert "FIT RETURNED 9 ON RANK 0" in run.stdout()
        assert session_files(onthefly_home) == []
        client.close()


def test_do_test_after_without_keep_alive_tests_once_and_exits(
    onthefly_home: Path, tmp_path: Path
) -> None:
    args = ("--max-epochs", "1", "--do-test-after", "--step-sleep", "0.2")
    with training(onthefly_home, tmp_path, *args, keep_alive="0") as run:
        client = LiveClient(wait_for_session(onthefly_home))
        assert run.wait() == 0, run.stderr()
        assert "FIT RETURNED 8 ON RANK 0" in run.stdout()
        assert "ONTHEFLY_KEEP_ALIVE=1" in run.stderr()
        client.wait_event(lambda e: e.get("state") == "finished")
        assert [(e["label"], e["step"]) for e in client.of("test_result")] == [("test_1", 8)]
        assert not client.of("status", state="paused")
        assert session_files(onthefly_home) == []
        client.close()


class LabelledFiles(TinyWithTestData):
    """Writes a file named after ONTHEFLY_TEST_LABEL at the end of each test run."""

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def on_test_end(self) -> None:
        label = os.environ[LABEL_ENV]
        (self.folder / label).write_text(str(self.global_step))


def test_two_mid_run_tests_and_the_final_one_label_their_files(
    onthefly_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LABEL_ENV, raising=False)
    torch.manual_seed(0)
    connect, losses = Connect(onthefly_home), Losses()
    senders = [CommandsAt(connect, 3, ("test", {})), CommandsAt(connect, 7, ("test", {}))]
    otf = OnTheFly(project="tests", port=0, quiet=True, do_test_after=True)
    trainer = lightning_trainer(max_steps=12, callbacks=[otf, connect, *senders, losses])
    trainer.fit(LabelledFiles(tmp_path), loader(64, shuffle=True), loader(16, seed=1))

    files = {path.name: int(path.read_text()) for path in tmp_path.iterdir()}
    assert files == {"test_1": 3, "test_2": 7, "test_3": 12}
    assert LABEL_ENV not in os.environ  # put back as it was
    client = connect.finished()
    results = client.of("test_result")
    assert [(r["label"], r["step"]) for r in results] == [
        ("test_1", 3),
        ("test_2", 7),
        ("test_3", 12),
    ]
    for result in results:
        assert set(result["metrics"]) == {"test_loss", "test_acc"} and result["duration"] > 0
    assert [s.answers()[0]["data"]["label"] for s in senders] == ["test_1", "test_2"]
    client.close()

    torch.manual_seed(0)
    bare = Losses()
    lightning_trainer(max_steps=12, callbacks=[bare]).fit(
        LabelledFiles(tmp_path / "unused"), loader(64, shuffle=True), loader(16, seed=1)
    )
    assert torch.equal(torch.stack(losses.losses), torch.stack(bare.losses))


class AsksAgain(TinyWithTestData):
    """Sends a second ``test`` from inside the first one's test_step and keeps the answer."""

    def __init__(self, connect: Connect) -> None:
        super().__init__()
        self.connect = connect
        self.second: dict[str, Any] | None = None

    def test_step(self, batch: Any, batch_idx: int) -> None:
        if self.second is None and self.connect.client is not None:
            self.second = self.connect.client.call("test")
        super().test_step(batch, batch_idx)


def test_a_second_test_while_one_runs_is_busy(onthefly_home: Path) -> None:
    connect = Connect(onthefly_home)
    sender = CommandsAt(connect, 2, ("test", {}))
    otf = OnTheFly(project="tests", port=0, quiet=True)
    module = AsksAgain(connect)
    lightning_trainer(max_steps=4, callbacks=[otf, connect, sender]).fit(
        module, loader(64), loader(16, seed=1)
    )
    assert sender.answers()[0]["data"]["label"] == "test_1"
    assert module.second is not None
    assert module.second["error"]["code"] == "busy"
    assert "'test' command is already waiting or running" in module.second["error"]["message"]
    assert connect.client is not None
    connect.client.close()


def test_labels_count_per_run_and_forks_get_their_own_namespace() -> None:
    assert [test_label(n) for n in (1, 2)] == ["test_1", "test_2"]
    assert test_label(1, "hard/slice") == "hard_slice-test_1"


@pytest.mark.parametrize(
    ("metrics", "loss"),
    [
        ({"test_loss": 1.0, "acc": 0.5}, 1.0),
        ({"loss": 2.0}, 2.0),
        ({"test/loss": 3.0, "loss": 9.0}, 3.0),
        ({"test_loss/dataloader_idx_1": 5.0, "test_loss/dataloader_idx_0": 4.0}, 4.0),
        ({"loss/dataloader_idx_0": 6.0, "loss/dataloader_idx_1": 7.0}, 6.0),
        ({"recon_loss": 8.0}, 8.0),
        ({"acc": 0.5}, None),
    ],
)
def test_the_result_s_loss_is_the_test_loss_or_the_first_loader_s(
    metrics: dict[str, float], loss: float | None
) -> None:
    assert pick_loss(metrics) == loss
