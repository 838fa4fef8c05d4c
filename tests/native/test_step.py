"""Default and custom steps: batch unpacking, gradient accumulation, step outputs."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader

from onthefly.batches import batch_size, predictions, unpack
from onthefly.errors import ConfigurationError
from onthefly.native.state import StepState
from onthefly.native.step import checked_output
from onthefly.trainer import Trainer
from tests.native.conftest import Recorder, loader, make_dataset, make_model


def bare(**kwargs: Any) -> Trainer:
    kwargs.setdefault("max_epochs", 1)
    return Trainer(project="t", session=False, progress_bar=False, **kwargs)


x, y = torch.zeros(3, 2), torch.ones(3)


@pytest.mark.parametrize(
    "batch",
    [
        (x, y),
        [x, y, "extra"],
        {"x": x, "y": y},
        {"inputs": x, "labels": y, "id": 0},
        {"image": x, "label": y},
        {"pixel_values": x, "labels": y},
        {"input_ids": x, "labels": y},
        {"input": x, "target": y},
    ],
)
def test_unpack_accepts_tuples_lists_and_documented_dict_keys(batch: Any) -> None:
    got_x, got_y = unpack(batch)
    assert got_x is x and got_y is y


def test_unpack_keeps_the_attention_mask_with_the_token_ids() -> None:
    mask = torch.ones(3, 2)
    inputs, target = unpack({"input_ids": x, "attention_mask": mask, "labels": y})
    assert inputs == {"input_ids": x, "attention_mask": mask} and target is y


def test_unpack_follows_the_batch_keys_given() -> None:
    assert unpack({"features": x, "price": y, "y": "no"}, ("features", "price")) == (x, y)
    with pytest.raises(ConfigurationError, match=r"the keys \('a', 'b'\)"):
        unpack({"features": x, "price": y}, ("a", "b"))


def test_the_trainer_checks_its_batch_keys() -> None:
    with pytest.raises(ConfigurationError, match=r"expected \(input_key, target_key\)"):
        bare(batch_keys=("only one",))


@pytest.mark.parametrize(
    "output",
    [x, (x, "features"), [x], {"logits": x, "hidden": y}, SimpleNamespace(logits=x, loss=None)],
)
def test_predictions_follow_the_documented_rule(output: Any) -> None:
    assert predictions(output) is x


@pytest.mark.parametrize(
    ("output", "message"), [({"scores": x}, "keys 'scores'"), (3, "a int"), ((), "a tuple")]
)
def test_outputs_without_predictions_name_the_fix(output: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        predictions(output)
    assert "@trainer.training_step" in str(info.value)


class TokenModel(nn.Module):
    """Token ids to per-token scores, Hugging Face style: keyword inputs, an output object."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> Any:
        hidden = self.embed(input_ids) * attention_mask.unsqueeze(-1)
        return SimpleNamespace(logits=self.head(hidden).transpose(1, 2))


def test_token_batches_and_output_objects_train_with_the_default_step() -> None:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 10, (8, 5), generator=g)
    batches = [{"input_ids": ids, "attention_mask": torch.ones(8, 5), "labels": ids}] * 3
    model = TokenModel()
    trainer = bare()
    trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), batches)
    assert trainer.global_step == 3


def test_dict_batches_with_keys_of_their_own_train_with_batch_keys() -> None:
    data = make_dataset(16)
    batches = [{"features": xb, "class": yb} for xb, yb in DataLoader(data, batch_size=4)]
    model = make_model()
    trainer = bare(batch_keys=("features", "class"), val_every_n_epochs=1)
    trainer.fit(
        model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), batches, batches
    )
    assert trainer.global_step == 4 and "val_loss" in trainer.callback_metrics


@pytest.mark.parametrize(
    ("batch", "message"),
    [(x, "batch of type Tensor"), ({"image": x, "z": y}, "keys 'image', 'z'"), ((x,), "tuple")],
)
def test_unpack_rejects_other_batches_pointing_to_a_custom_step(batch: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message) as info:
        unpack(batch)
    assert "@trainer.training_step" in str(info.value)


def test_batch_size_is_the_first_tensor_dimension() -> None:
    assert batch_size((torch.zeros(5, 2), torch.zeros(5))) == 5
    assert batch_size({"id": "a", "x": torch.zeros(7, 1)}) == 7
    assert batch_size(torch.zeros(4)) == 4
    assert batch_size(["no tensors"]) == 1


@pytest.mark.parametrize("output", [None, torch.tensor(1.0), {"acc": 1.0}, {"loss": 0.5}])
def test_a_step_must_return_a_dict_with_a_loss_tensor(output: Any) -> None:
    with pytest.raises(ConfigurationError, match="expected a dict holding a 'loss' tensor"):
        checked_output(output, "training")


def test_checked_output_detaches_every_tensor() -> None:
    w = torch.ones(1, requires_grad=True)
    out = checked_output({"loss": w * 2, "acc": w * 3, "tag": "a"}, "training")
    assert not out["loss"].requires_grad and not out["acc"].requires_grad and out["tag"] == "a"


def test_default_step_on_an_unsupported_batch_names_the_fix() -> None:
    model = make_model()
    trainer = bare()
    with pytest.raises(ConfigurationError, match=r"@trainer\.training_step"):
        trainer.fit(
            model=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=[torch.zeros(2, 4)],
        )


def test_dict_batches_work_with_the_default_step() -> None:
    data = make_dataset(16)
    batches = [{"inputs": xb, "targets": yb} for xb, yb in DataLoader(data, batch_size=4)]
    model = make_model()
    trainer = bare()
    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=batches,
    )
    assert trainer.global_step == 4


@pytest.mark.parametrize("batches", [16, 18])
def test_gradient_accumulation_counts_real_optimizer_steps(batches: int) -> None:
    model = make_model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    recorder = Recorder(["on_before_optimizer_step", "on_train_batch_end"])
    trainer = bare(callbacks=[recorder])
    accumulate = 4
    steps_seen: list[int] = []
    micro_batches = 0

    def step(batch: Any, state: StepState) -> dict[str, Any]:
        nonlocal micro_batches
        xb, yb = batch
        with state.autocast:
            loss = state.loss_fn(state.model(xb), yb) / accumulate  # type: ignore[misc]
        state.backward(loss)
        micro_batches += 1
        if micro_batches % accumulate == 0:
            state.scaler.step(state.optimizer)
            state.scaler.update()
            state.optimizer.zero_grad()
        steps_seen.append(state.step)
        return {"loss": loss * accumulate, "micro": torch.tensor(micro_batches)}

    assert trainer.training_step(step) is step
    trainer.fit(
        model=model,
        optimizer=optimizer,
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(batches * 2, batch_size=2),
    )

    assert micro_batches == batches
    assert trainer.global_step == batches // accumulate
    names = [call[0] for call in recorder.calls]
    assert names.count("on_before_optimizer_step") == batches // accumulate
    assert names.count("on_train_batch_end") == batches
    # the hook fires inside the 4th micro-batch, before that batch ends
    assert names[:5] == ["on_train_batch_end"] * 3 + ["on_before_optimizer_step"] * 1 + [
        "on_train_batch_end"
    ]
    assert steps_seen[: accumulate + 1] == [0, 0, 0, 0, 1]
    assert int(trainer.callback_metrics["micro"]) == batches


def test_custom_validation_step_is_used_for_validation_and_test() -> None:
    model = make_model()
    trainer = bare(val_every_n_epochs=1)
    calls: list[bool] = []

    @trainer.validation_step
    def validate(batch: Any, state: StepState) -> dict[str, Any]:
        calls.append(torch.is_grad_enabled())
        return {"loss": torch.tensor(2.0)}

    trainer.fit(
        model=model,
        optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
        loss_fn=nn.CrossEntropyLoss(),
        train_loader=loader(8),
        val_loader=loader(8),
        test_loader=loader(8),
    )
    assert float(trainer.callback_metrics["val_loss"]) == 2.0
    assert trainer.run_test() == {"loss": 2.0}
    assert calls == [False, False]


def test_a_custom_step_without_loss_fn_is_allowed_and_registering_junk_is_not() -> None:
    model = make_model()
    trainer = bare()

    @trainer.training_step
    def step(batch: Any, state: StepState) -> dict[str, Any]:
        xb, yb = batch
        loss = nn.functional.cross_entropy(state.model(xb), yb)
        loss.backward()
        state.optimizer.step()
        return {"loss": loss}

    trainer.fit(model=model, optimizer=torch.optim.SGD(model.parameters()), train_loader=loader(16))
    assert trainer.global_step == 2
    with pytest.raises(ConfigurationError, match="expected a function"):
        trainer.training_step("not a function")  # type: ignore[type-var]


class _DictModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.layer(x)
        return {"scores": out, "features": out}


def test_a_model_output_the_loss_cannot_take_names_the_fix() -> None:
    model = _DictModel()
    trainer = bare()
    data = [(torch.zeros(3, 2), torch.zeros(3, dtype=torch.long))]
    with pytest.raises(ConfigurationError, match=r"keys 'scores', 'features'.*'logits'"):
        trainer.fit(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), data)


def test_a_loss_of_one_element_is_fine_and_of_several_is_named() -> None:
    model = nn.Linear(2, 1)
    data = [(torch.zeros(3, 2), torch.zeros(3, 1))]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    bare().fit(model, optimizer, lambda out, y: ((out - y) ** 2).mean().reshape(1), data)
    with pytest.raises(ConfigurationError, match=r"shape \(3, 1\); the default step expected"):
        bare().fit(model, optimizer, lambda out, y: (out - y) ** 2, data)
