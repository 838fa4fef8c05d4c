"""Checkpointer: export, snapshot, checkpoints, restore and import commands on a live run."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from lightning.pytorch import Callback
from torch import nn

import onthefly
from onthefly.callbacks.onthefly import OnTheFly
from onthefly.client import Client
from onthefly.errors import CommandError
from onthefly.sessions import resume
from onthefly.sessions.archive import SessionArchive
from tests.callbacks.commanding import CommandsAt
from tests.callbacks.conftest import Connect
from tests.callbacks.live import wait_for_session
from tests.native.conftest import loader, make_model
from tests.sessions.training import lightning_run, native_run


class Pace(Callback):
    """Slows each step a little, so commands arrive mid-run."""

    def on_train_batch_end(self, *args: Any) -> None:
        time.sleep(0.005)


@contextmanager
def live_run(home: Path, steps: int = 100_000) -> Iterator[tuple[Client, onthefly.Trainer]]:
    """A native run on a thread, and a client connected to it; stopped on the way out."""
    trainer = onthefly.Trainer(
        project="ckpt", max_steps=steps, callbacks=[Pace()], progress_bar=False, quiet=True
    )
    model = make_model()
    fit = threading.Thread(
        target=trainer.fit,
        kwargs={
            "model": model,
            "optimizer": torch.optim.SGD(model.parameters(), lr=0.1),
            "loss_fn": nn.CrossEntropyLoss(),
            "train_loader": loader(shuffle=True),
        },
    )
    fit.start()
    client = onthefly.connect(wait_for_session(home).run, home=home)
    try:
        yield client, trainer
    finally:
        with contextlib.suppress(Exception):  # the run may have ended already
            client.stop()
        client.close()
        fit.join(timeout=60)
        assert not fit.is_alive()


def weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in state.items()}


def test_export_snapshot_restore_and_import_at_a_pause(onthefly_home: Path, tmp_path: Path) -> None:
    with live_run(onthefly_home) as (client, trainer):
        paused = client.pause()
        ring = client.checkpoints()["checkpoints"]
        assert [(e["id"], e["step"], e["reason"]) for e in ring] == [
            ("c1", paused["step"], "pause")
        ]
        assert ring[0]["size"] > 0
        exported = client.export(tmp_path / "first")
        assert exported["path"] == str(tmp_path / "first.otf")
        at_pause = weights(trainer.model.state_dict())

        client.resume()
        time.sleep(0.2)
        later = client.pause()
        assert later["step"] > paused["step"]
        assert client.snapshot()["reason"] == "request"
        assert [e["id"] for e in client.checkpoints()["checkpoints"]] == ["c1", "c2", "c3"]
        assert not torch.equal(trainer.model.state_dict()["0.weight"], at_pause["0.weight"])

        restored = client.restore("c1")
        assert (restored["step"], restored["loaded_step"]) == (later["step"], paused["step"])
        for key, value in trainer.model.state_dict().items():
            assert torch.equal(value, at_pause[key]), key

        client.resume()
        time.sleep(0.1)
        client.pause()
        client.load_session(tmp_path / "first.otf")
        assert torch.equal(trainer.model.state_dict()["0.weight"], at_pause["0.weight"])

    with SessionArchive(tmp_path / "first.otf") as archive:
        assert archive.manifest.step == paused["step"]
        history = archive.read_json("history/history.json")
    loss = history["runs"][0]["series"]["loss"]
    assert loss["steps"] and loss["steps"][-1] <= paused["step"]
    saved = resume.read(tmp_path / "first.otf")
    assert torch.equal(saved.model["0.weight"], at_pause["0.weight"])


def test_commands_that_cannot_apply_say_why(onthefly_home: Path, tmp_path: Path) -> None:
    with live_run(onthefly_home) as (client, _):
        with pytest.raises(CommandError) as running:
            client.load_session(tmp_path / "none.otf")
        assert running.value.code == "invalid_state"
        client.pause()
        with pytest.raises(CommandError) as missing:
            client.load_session(tmp_path / "none.otf")
        assert missing.value.code == "file_error" and "no session file" in str(missing.value)
        with pytest.raises(CommandError) as bad_path:
            client.export(tmp_path / "no-such-dir" / "x.otf")
        assert bad_path.value.code == "file_error" and "does not exist" in str(bad_path.value)
        with pytest.raises(CommandError) as unknown:
            client.restore("c99")
        assert unknown.value.code == "invalid_state" and "expected one of: c1" in str(unknown.value)


class Fail(Callback):
    def __init__(self, error: BaseException) -> None:
        self.error = error
        self.workdir: Path | None = None

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        otf = next(cb for cb in trainer.callbacks if isinstance(cb, OnTheFly))
        otf.checkpointer.snapshot(trainer, "request")  # something in the folder
        self.workdir = otf.session.workdir
        raise self.error


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_the_session_folder_goes_away_on_errors_and_ctrl_c(error: BaseException) -> None:
    fail = Fail(error)
    trainer = onthefly.Trainer(
        project="ckpt", max_steps=5, callbacks=[fail], progress_bar=False, quiet=True
    )
    model = make_model()
    with pytest.raises(type(error)):
        trainer.fit(
            model=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=loader(),
        )
    assert fail.workdir is not None and (fail.workdir / "checkpoints").name == "checkpoints"
    assert not fail.workdir.exists()


@pytest.mark.parametrize("run", [native_run, lightning_run], ids=["native", "lightning"])
def test_loading_at_a_pause_keeps_the_per_sample_history(
    run: Any, onthefly_home: Path, tmp_path: Path
) -> None:
    # Load Session (import) and Restore of the state the run pauses at: training and the
    # per-sample store go on exactly as in the run that never paused.
    full = run(15, 2)
    path = tmp_path / "at-pause.otf"
    connect = Connect(onthefly_home)
    commands = CommandsAt(
        connect,
        8,
        ("pause", {}),
        ("export", {"path": str(path)}),
        ("import", {"path": str(path)}),
        ("restore", {"checkpoint": "c1"}),
        ("resume", {}),
    )
    loaded = run(15, 2, extra=(connect, commands))
    answers = commands.answers()
    assert [a["type"] for a in answers] == ["reply"] * 5, answers
    # (Lightning runs OnTheFly's hooks after the test's: the commands land at step 8's start.)
    assert answers[3]["data"]["loaded_step"] == answers[0]["data"]["step"] in (7, 8)
    connect.finished().close()
    assert loaded.losses == full.losses
    for name, value in full.store["training"].items():
        got = loaded.store["training"][name]
        assert torch.equal(got, value) if isinstance(value, torch.Tensor) else got == value, name
