"""The umbrella callback: hook forwarding, state, argument checks, LightningCLI."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import lightning.pytorch as pl
import pytest
import torch

import onthefly
from onthefly import OnTheFly
from onthefly.errors import ConfigurationError
from tests.callbacks.live import session_files
from tests.callbacks.models import Tiny, lightning_trainer, loader

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
HOOKS = sorted(
    name for name in vars(pl.Callback) if name.startswith("on_") or name in ("setup", "teardown")
)


class HookLog(pl.Callback):
    """Records the name of every hook it receives."""

    def __init__(self) -> None:
        self.calls: list[str] = []


def _recording(name: str) -> Any:
    def hook(self: HookLog, trainer: Any, pl_module: Any, *args: Any, **kwargs: Any) -> None:
        self.calls.append(name)

    return hook


for _name in HOOKS:
    setattr(HookLog, _name, _recording(_name))


def test_every_hook_reaches_the_parts_in_lightnings_order() -> None:
    direct, first, second = HookLog(), HookLog(), HookLog()
    otf = OnTheFly(project="tests", port=0, quiet=True)
    otf.parts = [first, second]
    trainer = lightning_trainer(max_epochs=1, limit_train_batches=2, callbacks=[otf, direct])
    trainer.fit(Tiny(), loader(32), loader(16))
    trainer.test(Tiny(), loader(16), verbose=False)
    assert first.calls == second.calls == direct.calls
    assert {"setup", "on_train_batch_end", "on_before_optimizer_step", "on_test_end"} <= set(
        direct.calls
    )


@pytest.mark.parametrize("test_after", [False, True])
def test_a_step_calls_the_recorder_alone_and_the_parts_only_at_a_waiting_boundary(
    test_after: bool,
) -> None:
    otf = OnTheFly(project="tests", do_test_after=test_after)
    # What the native trainer calls, and what the callback forwards to under Lightning.
    for hook in ("on_train_batch_start", "on_train_batch_end"):
        methods = otf.hook_implementations(hook)
        assert methods is not None
        assert {type(method.__self__).__name__ for method in methods} == {"Recorder"}
        assert getattr(otf, hook) == methods[0]
    for hook in ("on_before_optimizer_step", "on_before_zero_grad", "on_before_backward"):
        assert otf.hook_implementations(hook) == [] and getattr(otf, hook) is None  # off
    assert otf.hook_implementations("on_after_backward") == []
    # The parts' own batch hooks, which the recorder runs when something waits there.
    ends = {type(method.__self__).__name__ for method in otf.recorder.boundary_end}
    assert ends == ({"TestLauncher", "PauseGate"} if test_after else {"PauseGate"})
    starts = {type(method.__self__).__name__ for method in otf.recorder.boundary_start}
    assert starts == {"PauseGate"}


def test_state_dict_round_trip() -> None:
    otf = OnTheFly(project="tests")
    otf.test_launcher.tests_run = 3
    state = otf.state_dict()
    assert state["TestLauncher"] == {"tests_run": 3}
    other = OnTheFly(project="tests")
    other.load_state_dict(state)
    assert other.test_launcher.tests_run == 3


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"project": ""}, "project=''; expected a non-empty name"),
        ({"project": "p", "port": "80"}, "port='80'; expected an int"),
        ({"project": "p", "keep_alive": "yes"}, "keep_alive='yes'; expected True, False or None"),
        ({"project": "p", "log_level": "LOUD"}, "log_level='LOUD'; expected a logging level"),
        ({"project": "p", "run_name": " "}, "run_name=' '; expected a non-empty name"),
    ],
)
def test_bad_options_are_refused_with_what_was_expected(options: Any, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        OnTheFly(**options)


def test_a_session_that_cannot_start_costs_nothing_but_the_dashboard(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    otf = OnTheFly(project="tests", port=0, quiet=True, home=not_a_folder)
    trainer = lightning_trainer(max_epochs=1, callbacks=[otf])
    with caplog.at_level(logging.ERROR):
        trainer.fit(Tiny(), loader(32), loader(16))
    assert trainer.global_step == 4
    assert "could not start its session" in caplog.text
    assert not otf.session.active


class _FailsToCleanUp(pl.Callback):
    def on_exception(self, *args: Any) -> None:
        raise RuntimeError("cleanup failed")


class _UserBug(pl.Callback):
    def on_train_batch_end(self, *args: Any) -> None:
        raise ValueError("user bug")


def test_every_part_cleans_up_when_another_part_fails(
    onthefly_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    after = HookLog()
    otf = OnTheFly(project="tests", port=0, quiet=True)
    otf.parts = [_FailsToCleanUp(), after]
    trainer = lightning_trainer(max_epochs=1, callbacks=[otf, _UserBug()])
    with caplog.at_level(logging.ERROR), pytest.raises(ValueError, match="user bug"):
        trainer.fit(Tiny(), loader(32), loader(16))
    assert "on_exception" in after.calls  # the part after the failing one still ran
    assert "cleanup failed" in caplog.text
    assert not otf.session.active
    assert session_files(onthefly_home) == []


@pytest.fixture
def cli_argv(monkeypatch: pytest.MonkeyPatch) -> None:
    """LightningCLI warns when pytest's own arguments are on the command line too."""
    monkeypatch.setattr("sys.argv", ["lightning_cli.py"])
    # Lightning 2.6 calls a jsonargparse API that jsonargparse 4.5x deprecates (not ours).
    monkeypatch.setenv("JSONARGPARSE_DEPRECATION_WARNINGS", "off")


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.usefixtures("cli_argv")
def test_the_example_config_lists_onthefly_by_class_path() -> None:
    cli = load_example("lightning_cli").main(
        ["--config", str(EXAMPLES / "lightning_cli.yaml")], run=False
    )
    [otf] = [cb for cb in cli.trainer.callbacks if isinstance(cb, onthefly.OnTheFly)]
    assert otf.session.project == "lightning-cli"
    assert otf.test_launcher.do_test_after and otf.pause_gate.hold_at_end


@pytest.mark.usefixtures("cli_argv")
def test_lightning_cli_fit_runs_a_live_session(onthefly_home: Path, tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"""
seed_everything: 0
trainer:
  max_epochs: 1
  logger: false
  enable_checkpointing: false
  enable_progress_bar: false
  enable_model_summary: false
  callbacks:
    - class_path: onthefly.OnTheFly
      init_args: {{project: cli, port: 0, quiet: true, do_test_after: true}}
    - class_path: tests.callbacks.conftest.Connect
      init_args: {{home: {onthefly_home}}}
data:
  samples: 256
"""
    )
    cli = load_example("lightning_cli").main(["fit", "--config", str(config)])
    [connect] = [cb for cb in cli.trainer.callbacks if type(cb).__name__ == "Connect"]
    client = connect.finished()
    assert [e["step"] for e in client.of("metrics", split="train")] == list(range(1, 5))
    assert [e["label"] for e in client.of("test_result")] == ["test_1"]
    assert session_files(onthefly_home) == []
    client.close()


class NoisyTiny(Tiny):
    """Dropout, and a validation whose numbers depend on the random state."""

    def __init__(self) -> None:
        super().__init__()
        self.dropout = torch.nn.Dropout(0.3)
        self.seen: list[float] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = torch.nn.functional.cross_entropy(self.net(self.dropout(x)), y)
        self.seen.append(loss.item())
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        noisy = x + 0.1 * torch.randn_like(x)  # a random augmentation in validation
        self.seen.append(torch.nn.functional.cross_entropy(self.net(noisy), y).item())


def own_loader(n: int, seed: int, shuffle: bool, workers: int) -> Any:
    base = loader(n, seed=seed)
    generator = torch.Generator().manual_seed(seed + 10)
    return torch.utils.data.DataLoader(
        base.dataset, batch_size=8, shuffle=shuffle, generator=generator, num_workers=workers
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_attaching_onthefly_changes_no_number_of_a_lightning_run(workers: int) -> None:
    # Loaders with generators of their own, a validation loop with random draws, the
    # sanity check on: every training and validation number is Lightning's own.
    def run(attach: bool) -> list[float]:
        torch.manual_seed(0)
        module = NoisyTiny()
        trainer = lightning_trainer(max_epochs=3)
        if attach:
            onthefly.attach_lightning(trainer, project="tests", quiet=True, port=0)
        trainer.fit(module, own_loader(64, 0, True, workers), own_loader(24, 1, False, workers))
        return module.seen

    assert run(attach=True) == run(attach=False)
