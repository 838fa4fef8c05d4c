"""Distillation: the student moves toward the teacher on its slice and keeps the rest."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from onthefly.errors import ConfigurationError
from onthefly.forks.distill import distill
from tests.forks import synthetic

Batch = tuple[torch.Tensor, torch.Tensor]


def _kl(teacher: nn.Module, student: nn.Module, x: torch.Tensor) -> float:
    """KL(teacher || student) of the softmax outputs, in eval mode."""
    teacher.eval(), student.eval()
    with torch.no_grad():
        t, s = F.log_softmax(teacher(x), -1), F.log_softmax(student(x), -1)
        return float(F.kl_div(s, t, reduction="batchmean", log_target=True))


def test_distill_pulls_the_student_toward_the_specialist_and_keeps_the_rest() -> None:
    task = synthetic.make_task()
    parent, specialist = synthetic.parent_and_specialist()
    teacher_state = copy.deepcopy(specialist.state_dict())
    student = copy.deepcopy(parent)
    hard_x = task.val.tensors[0][task.hard_val_idx]
    rest_val = [i for i in range(len(task.val)) if i not in set(task.hard_val_idx)]
    stats = distill(
        student,
        [(specialist, synthetic.batches(task.train, task.hard_train_idx, 64))],
        synthetic.batches(task.train, task.rest_train_idx, 64),
        synthetic.sample_losses,
        synthetic.logits,
        steps=60,
        lr=5e-4,
        optimizer="adam",
    )
    assert stats["steps"] == 60 and stats["cancelled"] == 0.0
    assert stats["distill_loss"] > 0 and stats["own_loss"] > 0
    assert _kl(specialist, student, hard_x) < 0.75 * _kl(specialist, parent, hard_x)
    hard = task.hard_val_idx
    assert synthetic.loss_on(student, task.val, hard) < synthetic.loss_on(parent, task.val, hard)
    # Learning the discs costs some easy points that border them (about +30 %; the soups of
    # the same specialist pay more), so the rest gets a wider tolerance than the full set.
    parent_rest = synthetic.loss_on(parent, task.val, rest_val)
    assert synthetic.loss_on(student, task.val, rest_val) <= 1.5 * parent_rest
    parent_val = synthetic.loss_on(parent, task.val)
    assert synthetic.loss_on(student, task.val) <= synthetic.tolerated(parent_val)
    assert all(torch.equal(v, teacher_state[k]) for k, v in specialist.state_dict().items())


def _tagged(tags: list[float]) -> list[Batch]:
    """One batch per tag: every input equals the tag, so calls can be traced."""
    return [(torch.full((4, 2), tag), torch.zeros(4, dtype=torch.long)) for tag in tags]


def _tiny(seed: int = 0) -> nn.Module:
    model = nn.Sequential(nn.Linear(2, 3))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator))
    return model


def test_distill_takes_turns_and_cycles_each_source() -> None:
    seen: list[tuple[str, float]] = []

    def outputs_of(model: nn.Module, batch: Batch) -> torch.Tensor:
        seen.append(("distill", batch[0][0, 0].item()))
        return model(batch[0])

    def loss_of(model: nn.Module, batch: Batch) -> torch.Tensor:
        seen.append(("own", batch[0][0, 0].item()))
        return F.cross_entropy(model(batch[0]), batch[1], reduction="none")

    teachers = [(_tiny(1), _tagged([1.0, 2.0])), (_tiny(2), _tagged([10.0]))]
    distill(_tiny(), teachers, _tagged([-1.0, -2.0, -3.0]), loss_of, outputs_of, steps=7, lr=0.1)
    # Teacher 0, teacher 1, rest, ...; a distill step asks the teacher, then the student.
    distilled = [("distill", tag) for tag in (1.0, 10.0, 2.0, 10.0, 1.0) for _ in range(2)]
    assert seen == [*distilled[:4], ("own", -1.0), *distilled[4:8], ("own", -2.0), *distilled[8:]]


def test_distill_restores_modes_and_gradients_and_leaves_the_run_optimizer_alone() -> None:
    student, teacher = _tiny(), _tiny(1)
    run_optimizer = torch.optim.Adam(student.parameters(), lr=0.1)
    F.cross_entropy(student(torch.ones(2, 2)), torch.zeros(2, dtype=torch.long)).backward()
    run_optimizer.step()
    run_state = copy.deepcopy(run_optimizer.state_dict())
    student.eval()
    sentinel = torch.ones_like(student[0].weight)
    student[0].weight.grad = sentinel
    student[0].bias.grad = None
    stats = distill(
        student,
        [(teacher, _tagged([0.5]))],
        None,
        synthetic.sample_losses,
        synthetic.logits,
        steps=3,
        lr=0.1,
        optimizer="adamw",
    )
    assert stats["steps"] == 3 and math.isnan(stats["own_loss"])  # no rest batches
    assert not student.training and teacher.training
    assert student[0].weight.grad is sentinel and student[0].bias.grad is None
    state = run_optimizer.state_dict()
    assert state["param_groups"] == run_state["param_groups"]
    for key, saved in run_state["state"].items():
        assert all(torch.equal(state["state"][key][k], v) for k, v in saved.items())


def test_distill_stops_when_cancelled() -> None:
    student = _tiny()
    before = copy.deepcopy(student.state_dict())
    calls = 0

    def cancelled() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3

    stats = distill(
        student,
        [(_tiny(1), _tagged([1.0]))],
        _tagged([2.0]),
        synthetic.sample_losses,
        synthetic.logits,
        steps=100,
        lr=0.1,
        cancelled=cancelled,
    )
    assert stats["steps"] == 3 and stats["cancelled"] == 1.0 and calls == 4
    assert not torch.equal(student[0].weight, before["0.weight"])


def test_distill_regression_outputs_use_the_mean_squared_error() -> None:
    torch.manual_seed(0)
    student, teacher = nn.Linear(3, 1), nn.Linear(3, 1)
    x = torch.randn(32, 3)
    batches = [(x, torch.zeros(32))]
    with torch.no_grad():
        gap_before = float(F.mse_loss(student(x), teacher(x)))
    stats = distill(
        student,
        [(teacher, batches)],
        None,
        synthetic.sample_losses,
        lambda m, b: m(b[0]),
        steps=200,
        lr=0.1,
    )
    with torch.no_grad():
        gap_after = float(F.mse_loss(student(x), teacher(x)))
    assert gap_after < 0.01 * gap_before
    assert stats["distill_loss"] == pytest.approx(gap_after, rel=0.2, abs=1e-4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"teachers": []}, "at least one"),
        ({"teachers": [_tiny()]}, r"teachers\[0\]: expected a \(teacher model, batches\) pair"),
        ({"steps": -1}, "steps must be"),
        ({"steps": 1.5}, "steps must be"),
        ({"lr": 0.0}, "lr must be"),
        ({"temperature": float("nan")}, "temperature must be"),
        ({"optimizer": "lbfgs"}, "optimizer must be one of"),
        ({"teachers": [(_tiny(1), [])]}, r"teachers\[0\] yielded no batch"),
        ({"rest": iter([])}, "rest yielded no batch"),
        ({"outputs_of": lambda m, b: {"logits": m(b[0])}}, "returned a dict"),
        ({"teachers": [(nn.Linear(2, 4), _tagged([1.0]))]}, r"shape \[4, 3\], the teacher's"),
    ],
)
def test_distill_rejects_bad_input(kwargs: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {
        "student": _tiny(),
        "teachers": [(_tiny(1), _tagged([1.0]))],
        "rest": _tagged([2.0]),
        "loss_of": synthetic.sample_losses,
        "outputs_of": synthetic.logits,
        "steps": 4,
        "lr": 0.1,
    } | kwargs
    with pytest.raises(ConfigurationError, match=message):
        distill(**arguments)


def test_distill_needs_a_trainable_student() -> None:
    with pytest.raises(ConfigurationError, match="no trainable parameter"):
        distill(
            _tiny().requires_grad_(False),
            [(_tiny(1), _tagged([1.0]))],
            None,
            synthetic.sample_losses,
            synthetic.logits,
            steps=1,
            lr=0.1,
        )
