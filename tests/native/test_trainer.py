"""``onthefly.Trainer``: loss parity with a plain loop, its public API, and bad input."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torchmetrics
from torch import nn

import onthefly
from onthefly.errors import ConfigurationError
from onthefly.trainer import Trainer
from tests.native.conftest import Recorder, loader, make_model

HOOKS = ["setup", "teardown", "on_exception", "on_fit_end", "on_train_epoch_end"]


def plain_losses(epochs: int, validate: bool = False) -> list[torch.Tensor]:
    """A hand-written loop; with ``validate``, each epoch ends with a validation pass."""
    model = make_model()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    train = loader(40, shuffle=True)
    val = loader(16, shuffle=True, seed=1)
    torch.manual_seed(123)
    losses = []
    for _ in range(epochs):
        for x, y in train:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            losses.append(loss.detach())
        if validate:
            model.eval()
            with torch.no_grad():
                for x, y in val:  # draws the val loader's seed and order from the RNG
                    loss_fn(model(x), y)
            model.train()
    return losses


class LossLog:
    def __init__(self) -> None:
        self.losses: list[torch.Tensor] = []

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(outputs["loss"])


def bare(**kwargs: Any) -> Trainer:
    kwargs.setdefault("max_epochs", 1)
    return Trainer(project="t", session=False, progress_bar=False, **kwargs)


@pytest.mark.parametrize("validate", [False, True])
def test_losses_equal_a_plain_loop_bit_for_bit(validate: bool) -> None:
    expected = plain_losses(epochs=3, validate=validate)

    model = make_model()
    log = LossLog()
    trainer = bare(max_epochs=3, callbacks=[log], val_every_n_epochs=int(validate))
    torch.manual_seed(123)
    trainer.fit(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=0.01),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(40, shuffle=True),
        val_loader=loader(16, shuffle=True, seed=1),  # shuffling draws from the RNG
    )

    assert len(log.losses) == len(expected) == 15
    assert torch.equal(torch.stack(log.losses), torch.stack(expected))
    assert trainer.global_step == 15 and trainer.current_epoch == 3


def test_is_the_public_trainer_and_a_trainer_host() -> None:
    from onthefly.drivers.base import TrainerHost

    trainer = bare()
    assert onthefly.Trainer is Trainer
    assert isinstance(trainer, TrainerHost)
    assert (trainer.global_rank, trainer.world_size, trainer.is_global_zero) == (0, 1, True)


def test_callbacks_see_the_plain_module_and_the_step_outputs(fit_kwargs: dict[str, Any]) -> None:
    seen: dict[str, Any] = {}

    class Peek:
        def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, *a: Any) -> None:
            seen.update(module=pl_module, metrics=dict(trainer.callback_metrics), outputs=outputs)

    trainer = bare(callbacks=[Peek()])
    trainer.fit(**fit_kwargs)
    assert seen["module"] is fit_kwargs["model"] is trainer.lightning_module
    assert set(seen["outputs"]) == {"loss"} and not seen["outputs"]["loss"].requires_grad
    assert seen["metrics"]["loss"] is seen["outputs"]["loss"]
    assert trainer.optimizers == [fit_kwargs["optimizer"]]


def test_run_test_after_fit_evaluates_as_a_hand_written_test_loop(
    fit_kwargs: dict[str, Any],
) -> None:
    accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=2)
    recorder = Recorder(["setup", "teardown", "on_test_start", "on_test_end"])
    trainer = bare(metrics={"acc": accuracy}, callbacks=[recorder])
    trainer.fit(**fit_kwargs)
    recorder.calls.clear()
    model = fit_kwargs["model"]
    rng = torch.get_rng_state()
    for _ in fit_kwargs["test_loader"]:  # what a hand-written test loop draws
        pass
    drawn = torch.get_rng_state()
    torch.set_rng_state(rng)

    results = trainer.run_test(label="final")

    assert model.training  # restored
    x, y = fit_kwargs["test_loader"].dataset.tensors  # 12 samples in batches of 5, 5, 2
    model.eval()
    with torch.no_grad():
        logits = model(x)
    assert results["loss"] == pytest.approx(nn.functional.cross_entropy(logits, y).item())
    assert results["acc"] == pytest.approx((logits.argmax(1) == y).float().mean().item())
    assert float(trainer.callback_metrics["test_loss"]) == pytest.approx(results["loss"])
    assert torch.equal(torch.get_rng_state(), drawn)
    assert recorder.calls == [
        ("setup", "test"),
        ("on_test_start",),
        ("on_test_end",),
        ("teardown", "test"),
    ]
    assert trainer.evaluation_label is None


def test_run_test_restores_train_mode_and_exposes_the_label(fit_kwargs: dict[str, Any]) -> None:
    seen: dict[str, Any] = {}

    class TestMidRun:
        def on_train_batch_end(self, trainer: Any, pl_module: Any, *args: Any) -> None:
            if trainer.global_step == 2 and "results" not in seen:
                seen["results"] = trainer.run_test("mid")
                seen["training"] = pl_module.training

        def on_test_start(self, trainer: Any, pl_module: Any) -> None:
            seen["label"], seen["eval"] = trainer.evaluation_label, not pl_module.training

    trainer = bare(callbacks=[TestMidRun()])
    trainer.fit(**fit_kwargs)
    assert set(seen["results"]) == {"loss"}
    assert seen["label"] == "mid" and seen["eval"] and seen["training"]


def test_train_and_validation_metrics_are_computed_per_epoch(fit_kwargs: dict[str, Any]) -> None:
    accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=2)
    seen: list[dict[str, Any]] = []

    class AtEpochEnd:
        def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
            seen.append(dict(trainer.callback_metrics))

    trainer = bare(
        max_epochs=2, val_every_n_epochs=1, metrics={"acc": accuracy}, callbacks=[AtEpochEnd()]
    )
    trainer.fit(**fit_kwargs)
    assert len(seen) == 2
    assert {"loss", "acc", "val_loss", "val_acc"} <= set(seen[0])
    assert 0.0 <= float(seen[1]["acc"]) <= 1.0
    assert accuracy.update_count == 0  # reset after each epoch's compute
    assert trainer.run_validation()["acc"] == pytest.approx(float(seen[1]["val_acc"]))


def test_several_validation_and_test_loaders_as_lightning_names_them(
    fit_kwargs: dict[str, Any],
) -> None:
    accuracy = torchmetrics.Accuracy(task="multiclass", num_classes=2)
    vals = [loader(16, seed=1), loader(24, batch_size=5, seed=3)]
    plateau = Plateau(fit_kwargs["optimizer"], patience=0)
    trainer = bare(max_epochs=2, val_every_n_epochs=1, metrics={"acc": accuracy})
    fit_kwargs.update(val_loader=vals, test_loader={"a": loader(12, seed=2), "b": vals[1]})
    trainer.fit(**fit_kwargs, scheduler=plateau)
    names = {f"val_{k}/dataloader_idx_{i}" for k in ("loss", "acc") for i in (0, 1)}
    assert names <= set(trainer.callback_metrics)
    assert "val_loss" not in trainer.callback_metrics
    # The plateau follows the first loader's loss (the documented choice).
    first = float(trainer.callback_metrics["val_loss/dataloader_idx_0"])
    assert plateau.seen[-1] == first
    # Each loader's mean over its own samples, as one loader alone gives it.
    model = fit_kwargs["model"]
    for index, val in enumerate(vals):
        shown = float(trainer.callback_metrics[f"val_loss/dataloader_idx_{index}"])
        assert shown == pytest.approx(_mean_loss(model, val), rel=1e-6)
    tested = trainer.run_test()
    assert set(tested) == {f"{k}/dataloader_idx_{i}" for k in ("loss", "acc") for i in (0, 1)}
    assert tested["loss/dataloader_idx_1"] == pytest.approx(_mean_loss(model, vals[1]), rel=1e-6)
    assert trainer.val_loader is vals[0]  # per-sample features use a split's first loader


class Plateau(torch.optim.lr_scheduler.ReduceLROnPlateau):
    """Keeps the values it is stepped with."""

    seen: list[float]

    def step(self, metrics: Any, epoch: int | None = None) -> None:  # type: ignore[override]
        self.seen = [*getattr(self, "seen", []), float(metrics)]
        super().step(metrics)


def _mean_loss(model: nn.Module, batches: Any) -> float:
    model.eval()
    with torch.no_grad():
        losses = [
            (nn.functional.cross_entropy(model(x), y, reduction="sum"), len(y)) for x, y in batches
        ]
    model.train()
    return float(sum(loss for loss, _ in losses)) / sum(n for _, n in losses)


@pytest.mark.parametrize("error", [RuntimeError("boom"), KeyboardInterrupt()])
def test_exceptions_reach_on_exception_then_teardown_and_propagate(
    fit_kwargs: dict[str, Any], error: BaseException
) -> None:
    class Fail:
        def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, i: int) -> None:
            if trainer.global_step == 1:
                raise error

    recorder = Recorder(HOOKS)
    trainer = bare(callbacks=[Fail(), recorder])
    with pytest.raises(type(error)):
        trainer.fit(**fit_kwargs)
    assert recorder.calls == [
        ("setup", "fit"),
        ("on_exception", type(error).__name__),
        ("teardown", "fit"),
    ]
    assert not fit_kwargs["optimizer"]._optimizer_step_post_hooks  # observers removed


def test_grad_clip_norm_clips_and_exposes_the_norm(fit_kwargs: dict[str, Any]) -> None:
    norms: list[torch.Tensor] = []

    class After:
        def on_train_batch_end(self, trainer: Any, *args: Any) -> None:
            grads = [p.grad.norm() for p in trainer.lightning_module.parameters()]
            norms.append(torch.stack(grads).norm())
            assert trainer.grad_norm is not None and trainer.grad_norm > 0

    trainer = bare(grad_clip_norm=1e-3, callbacks=[After()])
    trainer.fit(**fit_kwargs)
    assert max(float(n) for n in norms) <= 1e-3 * (1 + 1e-4)
    assert bare().grad_norm is None


def test_bf16_mixed_runs_the_forward_under_autocast(fit_kwargs: dict[str, Any]) -> None:
    dtypes: list[torch.dtype] = []
    fit_kwargs["model"].register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    trainer = bare(precision="bf16-mixed")
    trainer.fit(**fit_kwargs)
    assert dtypes and set(dtypes) == {torch.bfloat16}


def test_callback_states_round_trip() -> None:
    class Counter:
        state_key = "Counter[a]"

        def __init__(self) -> None:
            self.n = 0

        def state_dict(self) -> dict[str, Any]:
            return {"n": self.n}

        def load_state_dict(self, state: dict[str, Any]) -> None:
            self.n = state["n"]

    source, target = Counter(), Counter()
    source.n = 7
    states = bare(callbacks=[source]).callback_states()
    bare(callbacks=[target]).load_callback_states(states)
    assert states == {"Counter[a]": {"n": 7}} and target.n == 7


def test_session_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    assert bare().callbacks == []
    with pytest.raises(ConfigurationError, match="session options"):
        bare(port=1234)
    monkeypatch.setenv("ONTHEFLY_SESSION", "0")
    assert Trainer(project="t", max_epochs=1).callbacks == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_epochs": None}, "set max_epochs"),
        ({"max_epochs": 0}, "max_epochs=0"),
        ({"max_steps": -5}, "max_steps=-5"),
        ({"precision": "64"}, "precision='64'"),
        ({"val_every_n_epochs": -1}, "val_every_n_epochs"),
        ({"grad_clip_norm": 0}, "grad_clip_norm"),
        ({"device": "warp-drive"}, "not a device"),
        ({"metrics": {"acc": lambda p, t: 0}}, "torchmetrics.Metric"),
    ],
)
def test_bad_trainer_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        bare(**kwargs)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"optimizer": None}, "expected a torch.optim.Optimizer"),
        ({"model": "net"}, "expected a torch.nn.Module"),
        ({"loss_fn": None}, "needs loss_fn"),
        ({"train_loader": None}, "expected an iterable"),
        ({"scheduler_interval": "batch"}, "scheduler_interval='batch'"),
    ],
)
def test_bad_fit_arguments(
    fit_kwargs: dict[str, Any], change: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        bare().fit(**{**fit_kwargs, **change})


def test_validation_and_plateau_need_a_val_loader(fit_kwargs: dict[str, Any]) -> None:
    del fit_kwargs["val_loader"]
    with pytest.raises(ConfigurationError, match="needs fit\\(val_loader"):
        bare(val_every_n_epochs=1).fit(**fit_kwargs)
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(fit_kwargs["optimizer"])
    with pytest.raises(ConfigurationError, match="ReduceLROnPlateau"):
        bare().fit(**fit_kwargs, scheduler=plateau)


def test_evaluation_before_fit_or_without_loader_is_an_error(fit_kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match=r"run_test\(\) needs a model: call fit"):
        bare().run_test()
    with pytest.raises(ConfigurationError, match=r"run_validation\(\) needs a model"):
        bare().run_validation()
    trainer = bare()
    trainer.fit(**{**fit_kwargs, "val_loader": None})
    with pytest.raises(ConfigurationError, match="found no val_loader"):
        trainer.run_validation()


@pytest.mark.parametrize(
    ("options", "val_loader", "said"),
    [
        ({}, True, True),  # a val_loader and no val_every_n_epochs: off, and said so
        ({"val_every_n_epochs": 0}, True, False),  # explicitly off
        ({"val_every_n_epochs": 1}, True, False),
        ({}, False, False),
    ],
)
def test_fit_says_when_a_given_val_loader_is_not_used(
    options: dict[str, Any],
    val_loader: bool,
    said: bool,
    fit_kwargs: dict[str, Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    validations = Recorder(["on_validation_start"])
    if not val_loader:
        fit_kwargs.pop("val_loader")
    bare(callbacks=[validations], **options).fit(**fit_kwargs)
    lines = [r.getMessage() for r in caplog.records if "validation is off" in r.getMessage()]
    assert lines == (
        [
            "validation is off: fit() got a val_loader, but the Trainer no "
            "val_every_n_epochs; pass onthefly.Trainer(val_every_n_epochs=1) to run it"
        ]
        if said
        else []
    )
    ran = options.get("val_every_n_epochs", 0) > 0
    assert validations.calls == ([("on_validation_start",)] if ran else [])
