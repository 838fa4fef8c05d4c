"""TestLauncher: evaluate the test data on demand (``test`` command) and after training.

Each evaluation runs at a batch boundary with the run in state ``testing``, gets a label
and is published as a ``test_result``. Under Lightning it is Lightning's own test loop (the
module's ``test_step``, ``on_test_epoch_end``, ``on_test_end`` and ``self.log`` work as in
``trainer.test()``); under the native trainer, ``trainer.run_test()``. Training goes on
unaffected: modes, grad mode, optimizer and data position are as before, and a ``test``
command leaves every random generator as it was (the run's loaders' own included). The
``do_test_after`` test is part of the run the user configured: it draws from the random
generators as ``trainer.test()`` after ``fit`` (or a hand-written test loop) would.

Labels: ``test_1``, ``test_2``, … numbered per run by every evaluation (commands, custom
labels and ``do_test_after`` alike), unless the command names one. A fork's launcher is
created with ``namespace=<fork name>``: its labels are ``<fork name>-test_1``, … with a
counter of its own, so files named after labels never collide with the parent's. The label
is the environment variable ``ONTHEFLY_TEST_LABEL`` while the evaluation runs (the previous
value is put back afterwards), so user hooks can name files after it.

One test at a time: the session server answers a second ``test`` command ``busy`` while one
is waiting or running. In a distributed run every rank evaluates at the same control round
(Lightning's test loop with its distributed sampler; the native trainer reduces the loss
over the ranks); rank 0 publishes the result.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from lightning.pytorch import Callback

from onthefly.callbacks import limits
from onthefly.callbacks.session import RunSession
from onthefly.commands.registry import Boundary
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost, distributed
from onthefly.drivers.values import host_floats, scalars
from onthefly.errors import ConfigurationError
from onthefly.protocol import TestOutcome, TestResultBody
from onthefly.sessions import loader_rng, loaders

if TYPE_CHECKING:
    from onthefly.server import PendingCommand

log = logging.getLogger(__name__)

LABEL_ENV = "ONTHEFLY_TEST_LABEL"
_LOSS_NAMES = ("test_loss", "test/loss", "loss")


class TestLauncher(Callback):
    """Runs the test evaluation for the ``test`` command and for ``do_test_after``.

    Args:
        session: the run's shared session (the ``test`` command is registered on it).
        test_source: Lightning only: a test ``DataLoader`` or ``LightningDataModule`` to use
            instead of the one given to ``fit``.
        do_test_after: evaluate once when the run reaches ``max_epochs`` / ``max_steps``.
        namespace: prefix of the automatic labels (a fork's name); ``""`` for the main run.

    Example:
        >>> from onthefly.callbacks.session import RunSession
        >>> launcher = TestLauncher(RunSession("demo"), do_test_after=True)
    """

    __test__ = False  # not a pytest test class

    def __init__(
        self,
        session: RunSession,
        test_source: Any = None,
        do_test_after: bool = False,
        namespace: str = "",
    ) -> None:
        self.session = session
        self.test_source = test_source
        self.do_test_after = do_test_after
        self.namespace = namespace
        self.tests_run = 0
        session.commands.register("test", self._on_command)

    def hook_implementations(self, hook: str) -> list[Callable[..., Any]] | None:
        """What a trainer that asks (the native one; :class:`OnTheFly` for Lightning) calls of
        ``hook``: without ``do_test_after``, nothing at a batch's end. ``None``: the hook
        itself."""
        if hook == "on_train_batch_end" and not self.do_test_after:
            return []
        return None

    def on_train_batch_end(
        self, trainer: TrainerHost, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        # In a distributed run every rank evaluates (its own test data; see docs/distributed.md).
        serving = self.session.active or distributed(trainer)
        if not (self.do_test_after and serving) or trainer.should_stop:
            return
        if limits.is_final_step(driver(trainer), batch_idx):
            try:
                self.run(Boundary(trainer, pl_module), isolated=False)
            except ConfigurationError as exc:
                log.warning("do_test_after: the test data was not evaluated: %s", exc)

    def state_dict(self) -> dict[str, Any]:
        return {"tests_run": self.tests_run}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.tests_run = int(state_dict.get("tests_run", 0))

    def run(
        self, boundary: Boundary, label: str | None = None, isolated: bool = True
    ) -> dict[str, Any]:
        """Evaluate the test data now and publish the ``test_result``.

        Args:
            boundary: the trainer and module, at a batch boundary.
            label: the result's label; ``None`` numbers it (``test_<n>``).
            isolated: leave every random generator as it was (a test beside training);
                ``False`` draws as ``trainer.test()`` after ``fit`` would.

        Returns:
            The published ``test_result`` fields (label, step, loss, metrics, duration).

        Raises:
            ConfigurationError: there is no test data or no test step.
        """
        trainer = boundary.trainer
        label = label or test_label(self.tests_run + 1, self.namespace)
        previous = self.session.state
        self.session.quiesce()
        self.session.set_state("testing", trainer, label)
        started = time.perf_counter()
        try:
            with _label_env(label):
                raw = self._evaluate(trainer, label, isolated)
        finally:
            self.session.set_state(previous, trainer, f"{label} done")
        self.tests_run += 1
        metrics = host_floats(scalars(raw.items()))
        result: dict[str, Any] = {
            "label": label,
            "step": int(trainer.global_step),
            "loss": pick_loss(metrics),
            "metrics": metrics,
            "duration": time.perf_counter() - started,
        }
        self.session.publish(TestResultBody(**result))
        return result

    def _evaluate(self, trainer: TrainerHost, label: str, isolated: bool) -> dict[str, Any]:
        run_test = driver(trainer).run_test
        if not isolated:
            return run_test(label, self.test_source)
        # Beside training: the global generators and the run's loaders' own are put back.
        with loader_rng.preserved([self.test_source, *loaders.run_loaders(trainer)]):
            return run_test(label, self.test_source)

    def _on_command(self, boundary: Boundary, cmd: PendingCommand) -> None:
        label = getattr(cmd.command, "label", None)
        if label is not None and (_UNSAFE_LABEL.search(label) or label.strip(".") == ""):
            # It goes into ONTHEFLY_TEST_LABEL (no NUL there) and user code names files after it.
            cmd.fail(
                "unsupported",
                f"label {label!r} cannot name a file; expected text without '/', '\\' or "
                "control characters",
            )
            return
        try:
            result = self.run(boundary, label)
        except ConfigurationError as exc:
            cmd.fail("unsupported", str(exc))
            return
        cmd.reply(TestOutcome(**result))


_UNSAFE_LABEL = re.compile(r"[/\\\x00-\x1f\x7f]")


def test_label(number: int, namespace: str = "") -> str:
    """The automatic label of a run's ``number``-th test: ``test_3``, or ``<fork>-test_3``.

    The namespace is made file-name safe (other characters become ``_``).

    Example:
        >>> test_label(3), test_label(1, "hard slice")
        ('test_3', 'hard_slice-test_1')
    """
    prefix = re.sub(r"[^A-Za-z0-9._-]", "_", namespace)
    return f"{prefix}-test_{number}" if prefix else f"test_{number}"


test_label.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


@contextmanager
def _label_env(label: str) -> Iterator[None]:
    previous = os.environ.get(LABEL_ENV)
    os.environ[LABEL_ENV] = label
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(LABEL_ENV, None)
        else:
            os.environ[LABEL_ENV] = previous


def pick_loss(metrics: dict[str, float]) -> float | None:
    """The test loss among ``metrics``: ``test_loss``, ``test/loss``, ``loss``, or a ``*loss``;
    with several test loaders, the first loader's (``test_loss/dataloader_idx_0``)."""
    for suffix in ("", "/dataloader_idx_0"):
        for name in _LOSS_NAMES:
            if name + suffix in metrics:
                return metrics[name + suffix]
    return next((v for k, v in metrics.items() if k.endswith("loss")), None)
