"""Distribution Health: rank 0's findings from every rank's report."""

from __future__ import annotations

import time
from types import SimpleNamespace

import torch
from torch import nn

from onthefly.callbacks._recorder import Recorder
from onthefly.callbacks._runtime_sampler import StepClock
from onthefly.callbacks.health_monitor import HealthMonitor
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.distributed.cursor import Cursor
from onthefly.distributed.group import ControlGroup
from onthefly.health.distribution import Control, RankState, compare, local_state

GROUP = ControlGroup(None, rank=0, world_size=2, backend="gloo", timeout=300.0)
CONTROL = Control(interval=16, round_cost_s=0.0008)


def _state(
    rank: int, model: nn.Module, optimizer: torch.optim.Optimizer, step: int = 7
) -> RankState:
    cursor = Cursor(rank, step, 1, 1, 3, step_time=0.003, time=time.time())
    return local_state(model, [optimizer], GROUP, cursor)


def _twins() -> tuple[nn.Sequential, nn.Sequential, torch.optim.Optimizer, torch.optim.Optimizer]:
    torch.manual_seed(0)
    a = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    b = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    b.load_state_dict(a.state_dict())
    return a, b, torch.optim.SGD(a.parameters(), lr=0.1), torch.optim.SGD(b.parameters(), lr=0.1)


def test_identical_ranks_get_a_report_and_no_problem() -> None:
    a, b, opt_a, opt_b = _twins()
    findings = compare([_state(0, a, opt_a), _state(1, b, opt_b)], GROUP, CONTROL)
    assert {f.severity for f in findings} == {"info"}
    overview, _, rank1, same = findings
    assert overview.summary == (
        "2 ranks over gloo; a control round every 16 batches; collective timeout 300 s"
    )
    assert overview.details["control_round_ms"] == 0.8
    assert rank1.summary.startswith(
        "rank 1: step 7, epoch 1 (sampler epoch 1), 3 batches into the epoch, 3.0 ms per batch; "
        "last collective "
    )
    assert rank1.details["rank"] == 1 and rank1.details["batches"] == 3
    assert same.summary == (
        "all 2 ranks hold identical parameters (4), buffers (3) and optimizer state (1 entry)"
    )


def test_every_differing_tensor_and_position_is_named_with_its_rank() -> None:
    a, b, opt_a, opt_b = _twins()
    with torch.no_grad():
        b[0].weight[0, 0] += 1
        b[1].running_mean += 1
    opt_b.param_groups[0]["lr"] = 0.2
    findings = compare([_state(0, a, opt_a), _state(1, b, opt_b, step=8)], GROUP, CONTROL)
    errors = [f for f in findings if f.severity == "error"]
    assert [f.summary for f in errors] == [
        "rank 1 is elsewhere than rank 0: step 8 (rank 0: 7)",
        "rank 1 differs in 1 parameter tensor: 0.weight",
        "rank 1 differs in 1 optimizer state tensor: opt0.group0",
    ]
    assert errors[1].details["tensors"] == ["0.weight"] and errors[1].details["rank"] == 1
    # BatchNorm statistics differ between two steps under DDP by design: a note, not an error.
    (own,) = [f for f in findings if "BatchNorm running statistics" in f.summary]
    assert own.severity == "info" and own.details["tensors"] == ["1.running_mean"]
    assert not any(f.summary.startswith("all 2 ranks") for f in findings)


def test_a_long_list_is_shortened_in_the_summary_only() -> None:
    torch.manual_seed(0)
    wide = [nn.ModuleList(nn.Linear(1, 1) for _ in range(4)) for _ in range(2)]
    states = [_state(r, m, torch.optim.SGD(m.parameters(), lr=0.1)) for r, m in enumerate(wide)]
    differing = next(f for f in compare(states, GROUP, CONTROL) if f.severity == "error")
    assert differing.summary.endswith("… (8 in all)")
    assert len(differing.details["tensors"]) == 8


def test_a_single_process_run_has_no_ranks_to_compare() -> None:
    session = RunSession("demo")
    monitor = HealthMonitor(session, Recorder(session, StepClock()))
    trainer = SimpleNamespace(global_step=0, current_epoch=0, world_size=1, optimizers=[])
    result = monitor.run(Boundary(trainer, nn.Linear(1, 1)), "distribution")
    (note,) = result["findings"]
    assert note["severity"] == "info" and "single process" in note["summary"]
