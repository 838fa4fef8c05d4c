"""Run Lightning's own test loop in the middle of ``fit``.

``trainer.test()`` cannot be called from a callback during ``fit`` (it would set the run up
again and tear it down). The test loop itself can run, as the validation loop does inside
``fit``: switch the trainer's state to testing, run ``trainer.test_loop``, and put the state
back. The module's ``test_step`` and every ``on_test_*`` hook fire as in ``trainer.test()``,
and the loop restores the module's train/eval modes itself.

Under DDP every rank must run it at the same boundary (the test command reaches every rank
at the same control round). It draws what ``trainer.test()`` draws: a caller that wants the
training's random stream untouched restores the generators around it. The test results stay
in ``trainer.callback_metrics`` as they would after ``trainer.test()``.

Lightning's private attributes used here (``test_loop._data_source``,
``test_loop._combined_loader``, ``trainer._logger_connector._first_loop_iter``) were checked
against Lightning 2.6.6.
"""

from __future__ import annotations

from typing import Any

from lightning.pytorch.trainer.states import RunningStage, TrainerFn
from lightning.pytorch.utilities.model_helpers import is_overridden

from onthefly.errors import ConfigurationError


class TestUnavailable(ConfigurationError):
    """This run has nothing to test with (no ``test_step`` or no test data)."""

    __test__ = False  # not a pytest test class


def run_test_loop(trainer: Any, source: Any = None) -> dict[str, Any]:
    """Evaluate the test data with Lightning's test loop, from a batch boundary during ``fit``.

    Args:
        trainer: a ``lightning.pytorch.Trainer`` that is fitting.
        source: a test ``DataLoader`` or ``LightningDataModule``; ``None`` uses the loop's own
            source (the datamodule or module given to ``fit``).

    Returns:
        The logged test values, merged over test dataloaders.

    Raises:
        TestUnavailable: the module defines no ``test_step`` or there is no test data.
    """
    module = trainer.lightning_module
    if not is_overridden("test_step", module):
        raise TestUnavailable(
            f"{type(module).__name__} defines no test_step; expected a LightningModule with "
            "test_step to evaluate the test data"
        )
    loop = trainer.test_loop
    saved_source = loop._data_source.instance
    if source is not None:
        loop._data_source.instance = source
    try:
        if not loop._data_source.is_defined():
            raise TestUnavailable(
                "this run has no test data; expected test_loader= (or a datamodule) passed to "
                "attach_lightning / OnTheFly, or a test_dataloader() on the module"
            )
        return _run(trainer, loop)
    finally:
        loop._data_source.instance = saved_source


def _run(trainer: Any, loop: Any) -> dict[str, Any]:
    state = trainer.state
    saved = (state.fn, state.stage)
    connector = trainer._logger_connector
    first_loop_iter = connector._first_loop_iter
    loop._combined_loader = None  # ask the source for a fresh loader each time
    try:
        state.fn, state.stage = TrainerFn.TESTING, RunningStage.TESTING
        outputs = loop.run()
    finally:
        loop.teardown()
        state.fn, state.stage = saved
        # As Lightning does around a validation run inside the training epoch.
        connector._first_loop_iter = first_loop_iter
    merged: dict[str, Any] = {}
    for per_loader in outputs:
        merged.update(per_loader)
    return merged
