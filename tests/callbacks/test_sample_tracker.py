"""SampleTracker in real runs: exact per-sample losses by dataset index, under both drivers."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, IterableDataset, TensorDataset
from websockets.exceptions import ConnectionClosed

import onthefly
from onthefly.samples import buffer
from onthefly.samples.loss_mode import LossMode
from tests.callbacks.live import LiveClient, wait_for_session
from tests.callbacks.models import lightning_trainer
from tests.callbacks.sample_runs import N, assert_squares, squares, tracker_of, zero_linear


class History(pl.Callback):
    """Reads the Parquet history before the session (and its folder) goes away."""

    def __init__(self) -> None:
        self.rows = 0

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        tracker = tracker_of(trainer.callbacks)
        tracker.flush()
        self.rows = pq.read_table(tracker.session.workdir / "samples" / "history").num_rows


@pytest.mark.parametrize("workers", [0, 2])
def test_native_runs_attribute_every_shuffled_sample_exactly(workers: int) -> None:
    extra = {"num_workers": 2, "persistent_workers": True} if workers else {}
    loader = DataLoader(squares(), batch_size=7, shuffle=True, **extra)
    history = History()
    trainer = onthefly.Trainer(
        project="samples", max_epochs=2, progress_bar=False, quiet=True, port=0, callbacks=[history]
    )
    model = zero_linear()
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), nn.MSELoss(), loader)
    assert_squares(tracker_of(trainer.callbacks), list(range(N)), seen=2)
    assert history.rows == 2 * N


def test_a_shipment_that_cannot_be_read_is_skipped_and_the_run_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    read = buffer._Transfer.chunk
    calls = []

    def first_fails(transfer: Any) -> Any:
        calls.append(len(transfer))
        if len(calls) == 1:
            raise ValueError("shapes do not match")
        return read(transfer)

    monkeypatch.setattr(buffer._Transfer, "chunk", first_fails)
    history = History()
    trainer = onthefly.Trainer(
        project="samples", max_epochs=2, progress_bar=False, quiet=True, port=0, callbacks=[history]
    )
    model = zero_linear()
    loader = DataLoader(squares(), batch_size=1, shuffle=True)  # 2N batches: 2+ shipments
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), nn.MSELoss(), loader)
    assert trainer.global_step == 2 * N  # the run went on
    assert "could not read shipped per-sample values" in caplog.text
    assert len(calls) >= 2 and history.rows == 2 * N - calls[0]  # only the first one is lost
    stats = tracker_of(trainer.callbacks).store.training
    assert int(stats.count.sum()) == history.rows  # the rest is folded and written


def custom_step(trainer: Any, loss_of: Callable[[Any, Any, Any], torch.Tensor]) -> None:
    """Register a custom training step, as users write them, whose loss is ``loss_of(state,
    x, y)``."""

    @trainer.training_step
    def step(batch: Any, state: Any) -> dict[str, Any]:
        x, y = batch
        loss = loss_of(state, x, y)
        state.optimizer.zero_grad()
        state.backward(loss)
        state.optimizer.step()
        return {"loss": loss}


def test_native_custom_steps_and_plain_functions_are_captured() -> None:
    trainer = onthefly.Trainer(
        project="samples", max_epochs=1, progress_bar=False, quiet=True, port=0
    )

    custom_step(trainer, lambda state, x, y: F.mse_loss(state.model(x), y, reduction="sum"))
    model = zero_linear()
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), None, DataLoader(squares()))
    assert_squares(tracker_of(trainer.callbacks), list(range(N)), seen=1)

    plain = onthefly.Trainer(
        project="samples", max_epochs=1, progress_bar=False, quiet=True, port=0
    )
    model = zero_linear()
    loss_fn = lambda preds, target: F.l1_loss(preds, target) ** 2  # noqa: E731
    plain.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), loss_fn, DataLoader(squares()))
    stats = tracker_of(plain.callbacks).store.training
    np.testing.assert_allclose(stats.loss_last[:N], np.arange(N))  # |i|, before the square


def _classification() -> TensorDataset:
    g = torch.Generator().manual_seed(3)
    return TensorDataset(torch.randn(64, 5, generator=g), torch.randint(0, 4, (64,), generator=g))


@pytest.mark.parametrize(
    "form",
    ["plain", "regularised on odd batches", "halved", "one batch without cross-entropy"],
)
def test_an_inline_cross_entropy_is_watched_once_then_read_from_the_loss_backpropagated(
    monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    # Watching the step's torch calls costs at each of them; once the watched call proved to
    # be the loss backpropagated, later batches' values come from that loss's graph.
    entered: list[int] = []
    enter = LossMode.enter

    def counted(mode: LossMode) -> None:
        entered.append(len(entered))
        enter(mode)

    monkeypatch.setattr(LossMode, "enter", counted)
    data = _classification()
    trainer = onthefly.Trainer(
        project="samples", max_epochs=1, progress_bar=False, quiet=True, port=0
    )
    batches: list[int] = []

    def loss_of(state: Any, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        batches.append(len(batches))
        logits = state.model(x)
        if form == "one batch without cross-entropy" and len(batches) == 4:
            return F.mse_loss(logits, F.one_hot(y, 4).float())
        loss = F.cross_entropy(logits, y)
        if form == "halved":
            return loss / 2
        if form == "regularised on odd batches" and len(batches) % 2:
            return loss + 0.0 * state.model.weight.square().sum()
        return loss

    custom_step(trainer, loss_of)
    model = nn.Linear(5, 4)
    loader = DataLoader(data, batch_size=8, shuffle=True)
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), None, loader)
    stats = tracker_of(trainer.callbacks).store.training
    x, y = data.tensors
    with torch.no_grad():
        expected = F.cross_entropy(model(x), y, reduction="none").numpy()
    if form == "one batch without cross-entropy":
        # That batch's loss holds no NLL node: it is recorded without values, and the calls
        # are watched again from the next batch on, for good.
        assert len(entered) == 1 + len(batches) - 4
        kept = np.flatnonzero(stats.count)
        assert len(kept) == len(data) - 8 and set(stats.count[kept]) == {1}  # that batch: none
    else:
        assert entered == [0]  # the first batch only
        kept = np.arange(len(data))
        assert stats.count.tolist() == [1] * len(data)
    np.testing.assert_allclose(stats.loss_last[kept], expected[kept], rtol=1e-6)


class _Inline(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(5, 4)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.layer(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.0)


@pytest.mark.parametrize("accumulate", [1, 2])
def test_lightning_reads_an_inline_cross_entropy_from_the_loss_backpropagated(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, accumulate: int
) -> None:
    # Lightning zeroes the gradients between the step and the backward pass (the watch ends
    # there), and divides the loss when it accumulates gradients.
    entered: list[int] = []
    enter = LossMode.enter
    monkeypatch.setattr(LossMode, "enter", lambda mode: (entered.append(0), enter(mode)))
    trainer = lightning_trainer(
        max_epochs=1, default_root_dir=tmp_path, accumulate_grad_batches=accumulate
    )
    onthefly.attach_lightning(trainer, project="samples", quiet=True, port=0)
    module, data = _Inline(), _classification()
    trainer.fit(module, DataLoader(data, batch_size=8, shuffle=True))
    stats = tracker_of(trainer.callbacks).store.training
    x, y = data.tensors
    with torch.no_grad():
        expected = F.cross_entropy(module.layer(x), y, reduction="none").numpy()
    assert len(entered) == 1
    assert stats.count.tolist() == [1] * len(data)
    np.testing.assert_allclose(stats.loss_last[: len(data)], expected, rtol=1e-6)


class Tapped(pl.Callback):
    """Records, at every training batch, whether a loss module's calls are observed."""

    def __init__(self, module: nn.Module) -> None:
        self.module, self.kind = module, type(module)
        self.seen: set[bool] = set()

    def on_train_batch_end(self, *args: Any) -> None:
        self.seen.add(type(self.module) is not self.kind)


def test_the_native_default_step_reports_its_loss_module_without_a_tap() -> None:
    # The default step reports its loss call itself: a tap would cost every step and
    # repeat the report. A custom step's loss module is tapped.
    loss_fn = nn.MSELoss()
    tapped = Tapped(loss_fn)
    trainer = onthefly.Trainer(
        project="samples", max_epochs=1, progress_bar=False, quiet=True, port=0, callbacks=[tapped]
    )
    model = zero_linear()
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), loss_fn, DataLoader(squares()))
    assert tapped.seen == {False}
    assert_squares(tracker_of(trainer.callbacks), list(range(N)), seen=1)

    custom_tapped = Tapped(loss_fn)
    custom = onthefly.Trainer(
        project="samples", max_epochs=1, progress_bar=False, quiet=True, port=0,
        callbacks=[custom_tapped],
    )  # fmt: skip

    custom_step(custom, lambda state, x, y: state.loss_fn(state.model(x), y))
    model = zero_linear()
    custom.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), loss_fn, DataLoader(squares()))
    assert custom_tapped.seen == {True} and type(loss_fn) is nn.MSELoss  # untapped after fit
    assert_squares(tracker_of(custom.callbacks), list(range(N)), seen=1)


class Stream(IterableDataset[Any]):
    def __iter__(self) -> Any:
        for i in range(20):
            yield {"x": torch.zeros(3), "y": torch.tensor([float(i)]), "idx": 100 + i}


def test_iterable_data_is_identified_by_its_batch_key() -> None:
    trainer = onthefly.Trainer(
        project="samples", max_epochs=1, progress_bar=False, quiet=True, port=0
    )
    model = zero_linear()
    trainer.fit(
        model,
        torch.optim.SGD(model.parameters(), lr=0.0),
        nn.MSELoss(),
        DataLoader(Stream(), batch_size=6),
    )
    stats = tracker_of(trainer.callbacks).store.training
    assert np.flatnonzero(stats.count).tolist() == list(range(100, 120))
    np.testing.assert_allclose(stats.loss_last[100:120], np.arange(20) ** 2)


def _losses(with_onthefly: bool) -> list[torch.Tensor]:
    torch.manual_seed(0)
    x, y = torch.randn(96, 5), torch.randint(0, 3, (96,))
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)

    class Classifier(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = nn.Linear(5, 3)
            self.loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 0.5]))
            self.seen: list[torch.Tensor] = []

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            loss = self.loss(self.net(batch[0]), batch[1])
            self.seen.append(loss.detach().clone())
            return loss

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.Adam(self.parameters(), lr=0.01)

    model = Classifier()
    trainer = lightning_trainer(max_epochs=2)
    if with_onthefly:
        onthefly.attach_lightning(trainer, project="parity", loss_fn=model.loss, quiet=True, port=0)
    trainer.fit(model, loader)
    return model.seen


def test_training_is_unchanged_bit_for_bit() -> None:
    plain, tracked = _losses(False), _losses(True)
    assert len(plain) == len(tracked) == 12
    assert all(torch.equal(a, b) for a, b in zip(plain, tracked, strict=True))


# ------------------------------------------------------------------------------ the commands


class _EndWhen(pl.Callback):
    """Ends the run once ``done`` is set: the run trains for as long as the script talks."""

    def __init__(self, done: threading.Event) -> None:
        self.done = done

    def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
        if self.done.is_set():
            trainer.should_stop = True


def run_live(script: Callable[[LiveClient], None], home: Path, embedding_fn: Any = None) -> None:
    """Train (native) while ``script`` talks to the session from another thread, then stop.

    The run's own limit is out of reach: a short run could end before a client slowed down
    by a busy machine even connects. It ends with the script's ``stop`` or, should that
    fail, once the script is done.
    """
    failures: list[BaseException] = []
    done = threading.Event()

    def talk() -> None:
        try:
            client = LiveClient(wait_for_session(home))
        except BaseException as exc:  # reported once the run has ended
            failures.append(exc)
            done.set()
            return
        try:
            # Train a step first: on a busy machine the pause could land before the first batch.
            client.wait_event(lambda e: e["type"] == "metrics" and e.get("split") == "train")
            client.call("pause")
            script(client)
        except BaseException as exc:  # reported on the test's thread
            failures.append(exc)
        finally:
            # A run that already ended closed the connection: there is nothing left to stop.
            with contextlib.suppress(ConnectionClosed, OSError):
                client.call("stop")
            client.close()
            done.set()

    thread = threading.Thread(target=talk, daemon=True)
    thread.start()
    model = zero_linear()
    trainer = onthefly.Trainer(
        project="samples",
        max_epochs=1_000_000,  # out of reach: the run ends with the script
        progress_bar=False,
        quiet=True,
        port=0,
        embedding_fn=embedding_fn,
        callbacks=[_EndWhen(done)],
    )
    train = DataLoader(squares(), batch_size=5, shuffle=True)
    val = DataLoader(squares(), batch_size=5)
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.0), nn.MSELoss(), train, val)
    thread.join(30)
    if failures:
        raise failures[0]


def _reply(answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["type"] == "reply", answer
    data: dict[str, Any] = answer["data"]
    return data


def test_scan_histogram_select_rows_and_export_over_the_wire(
    onthefly_home: Path, tmp_path: Path
) -> None:
    def script(client: LiveClient) -> None:
        scan = _reply(client.call("scan", split="val"))
        assert scan["size"] == N and scan["source"] == "scan" and scan["cancelled"] is False
        client.wait_event(lambda e: e["type"] == "scan_progress" and e["state"] == "done")
        states = [e["state"] for e in client.events if e["type"] == "scan_progress"]
        assert states[0] == "running" and states[-1] == "done"
        hist = _reply(client.call("histogram", split="val", bins=6, min=0.0, max=3600.0))
        assert sum(hist["counts"]) == N and hist["counts"][0] == 25  # i**2 < 600: i < 25
        q = _reply(client.call("quantiles", split="val", q=[0.0, 1.0]))
        assert q["values"] == [0.0, float((N - 1) ** 2)]
        chosen = _reply(client.call("select", split="val", top=3, name="worst"))
        assert chosen["size"] == 3 and [r["index"] for r in chosen["preview"]] == [59, 58, 57]
        rows = _reply(client.call("selection_rows", name="worst", sort="index", descending=False))
        assert [r["index"] for r in rows["rows"]] == [57, 58, 59]
        exported = _reply(
            client.call("export_selection", name="worst", format="parquet", directory=str(tmp_path))
        )
        table = pq.read_table(exported["path"])
        assert table.column("index").to_pylist() == [59, 58, 57]
        assert table.column("item_1").to_pylist() == [[59.0], [58.0], [57.0]]
        bad = client.call("export_selection", name="worst", directory=str(tmp_path), file="../x")
        assert bad["type"] == "error" and bad["error"]["code"] == "unsupported"
        train = _reply(client.call("select", split="train", quantile=0.5))
        assert train["source"] == "training" and train["name"] == "q0.5"
        listed = _reply(client.call("selections"))
        assert [s["name"] for s in listed["selections"]] == ["worst", "q0.5"]
        assert _reply(client.call("data_map"))["total"] > 0
        projection = _reply(client.call("explorer", split="val", method="pca"))
        assert projection["method"] == "pca" and len(projection["x"]) == N
        missing = client.call("histogram", split="test")
        assert missing["type"] == "error" and missing["error"]["code"] == "invalid_state"

    run_live(script, onthefly_home)


def test_a_scan_can_be_cancelled_and_commands_sent_meanwhile_still_run(onthefly_home: Path) -> None:
    def slow(model: nn.Module, batch: Any) -> torch.Tensor:
        threading.Event().wait(0.05)
        return batch[1]

    def script(client: LiveClient) -> None:
        scan_id = client.send("scan", split="val")
        client.wait_event(lambda e: e["type"] == "scan_progress")
        selections_id = client.send("selections")
        cancel = _reply(client.call("cancel"))
        assert cancel == {"cancelled": True, "split": "val"}
        assert _reply(client.wait(lambda: client.answers.get(scan_id)))["cancelled"] is True
        assert _reply(client.wait(lambda: client.answers.get(selections_id))) == {"selections": []}
        assert _reply(client.call("cancel")) == {"cancelled": False}

    run_live(script, onthefly_home, embedding_fn=slow)
