"""Telemetry: what a run reports while it trains.

As training starts: the run's configuration (``config``: optimizer, its hyperparameters,
batch size, limits, model size, the module's hyperparameters). Per optimizer step: the loss,
each param group's learning rate (``lr``, ``lr/group1``, …; ``lr/opt1`` for a second
optimizer), the gradient norm (``grad_norm``) and every value the user logs. Per evaluation:
the validation and test results. Plus epoch boundaries, runtime stats (a background thread,
about once a second) and the run's log records and warnings.

Telemetry has no hook at a training step: the run's
:class:`~onthefly.callbacks._recorder.Recorder` keeps references to each batch's outputs and
hands them over in segments, from which Telemetry makes the steps' rows (a window of
accumulated micro-batches is one step, its loss their mean). No host sync is added: the
values stay device tensors in a :class:`~onthefly.callbacks._step_buffer.StepBuffer` that
ships them in batches, and the gradient norm is one fused ``_foreach_norm`` on the device
(the buffer reduces the per-parameter norms of many steps at once when it ships them). That
norm is taken at every optimizer step that starts at least ``grad_norm_every_s`` (10 ms) of
training after the last one taken: on real models every step, on a model whose steps take
a millisecond about one in ten, since a norm costs tens of microseconds there (its kernels'
code no longer cached in a step). A trainer that clips hands over the norm it computed
anyway, at every step.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable, Iterator
from typing import Any

import torch
from lightning.pytorch import Callback

from onthefly.callbacks._log_forwarder import LogForwarder
from onthefly.callbacks._recorder import Recorder, Segment
from onthefly.callbacks._run_config import describe_run
from onthefly.callbacks._runtime_sampler import RuntimeSampler, StepClock
from onthefly.callbacks._step_buffer import Norms, StepBuffer, Steps
from onthefly.callbacks.session import RunSession
from onthefly.drivers import Driver, driver
from onthefly.drivers.base import TrainerHost
from onthefly.drivers.values import Scalar, host_floats, scalar_or_none
from onthefly.errors import ConfigurationError
from onthefly.protocol import EpochBody, MetricsBody, RunConfigBody, Split

log = logging.getLogger(__name__)

GRAD_NORM_EVERY_S = 0.01
"""The least training time between two steps whose gradient norm is taken (at most 100 a
second; every step of 10 ms or more)."""


class Telemetry(Callback):
    """Streams a run's metrics, runtime stats and logs to its session.

    Args:
        session: the run's shared session.
        recorder: the run's per-batch recorder (it hands over the training steps).
        log_level: the lowest level of log records forwarded (records must also pass the
            level of the logger that emits them).
        flush_every_steps: ship buffered step values after this many steps …
        flush_every_s: … or after this many seconds, whichever comes first.
        runtime_interval_s: seconds between two runtime samples.
        grad_norm_every_s: the least training time between two steps whose gradient norm is
            taken (see the module docstring); ``0`` takes it at every step.

    Example:
        >>> session = RunSession("demo")  # usually created by ``OnTheFly``
        >>> telemetry = Telemetry(session, Recorder(session, StepClock()))
    """

    def __init__(
        self,
        session: RunSession,
        recorder: Recorder,
        log_level: int | str = "INFO",
        flush_every_steps: int = 32,
        flush_every_s: float = 0.1,
        runtime_interval_s: float = 1.0,
        grad_norm_every_s: float = GRAD_NORM_EVERY_S,
    ) -> None:
        every = grad_norm_every_s
        if isinstance(every, bool) or not isinstance(every, int | float) or not every >= 0:
            raise ConfigurationError(
                f"grad_norm_every_s={every!r}; expected a number of seconds >= 0 (0: every step)"
            )
        self.session = session
        self._recorder = recorder
        recorder.norm_every_s = float(every)
        recorder.readers.append(self._receive)
        self._buffer = StepBuffer(self._ship, flush_every_steps, flush_every_s)
        self._clock = recorder.clock
        self._runtime_interval_s = runtime_interval_s
        self._sampler: RuntimeSampler | None = None
        self._logs = LogForwarder(session.publish, log_level)
        self._norms = GradNorms()
        self._losses: list[torch.Tensor] = []  # a window's micro-batch losses so far
        self._last_step: int | None = None
        self._divided = 1
        self._eval_before: dict[str, int] = {}
        self._epoch_before: dict[str, int] = {}
        self.step_observers: list[Callable[[Steps], None]] = []
        """Receive the shipped training steps' host values (the watchdog's rules, the health
        checks' history), after they are published."""
        self._step_names: set[str] = {"loss"}
        self._failed: set[str] = set()
        self._driver: Driver | None = None
        session.on_quiet(self._quiet)

    @property
    def clock(self) -> StepClock:
        """Step and data-wait timing, stamped at every training batch (other parts may read it)."""
        return self._clock

    # ------------------------------------------------------------------ lifecycle

    def on_fit_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not self.session.active:
            self._recorder.norm_of = None
            return
        self._last_step = trainer.global_step
        self._losses = []
        run = self._driver = driver(trainer)
        self._divided = run.accumulation()
        self._norms = GradNorms()
        self._recorder.norm_of = self._norms.of
        self._logs.install()
        self._sampler = RuntimeSampler(
            self._clock,
            lambda: int(trainer.global_step),
            self.session.publish,
            self._runtime_interval_s,
        )
        self._sampler.start()

    def on_train_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if self.session.active:
            with self._guarded("describe the run's configuration"):
                self.session.publish(RunConfigBody(values=describe_run(trainer, pl_module)))

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush()
        self._stop()

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        self._stop()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._stop()

    # ------------------------------------------------------------------ training

    def on_train_epoch_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not self.session.active:
            return
        self._epoch_before = driver(trainer).metric_snapshot()
        self.session.publish(
            EpochBody(epoch=int(trainer.current_epoch), step=int(trainer.global_step) + 1)
        )

    def on_train_epoch_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush()  # the recorder handed its rows over first (it is the first part)
        if self.session.active:
            with self._guarded("report epoch values"):
                values = driver(trainer).epoch_values(self._epoch_before, self._step_names)
                if values:
                    self._publish_values(trainer, "train", values)

    # ------------------------------------------------------------------ evaluation

    def on_validation_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._eval_started(trainer)

    def on_validation_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        if not trainer.sanity_checking:
            self._eval_ended(trainer, "val")

    def on_test_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._eval_started(trainer)

    def on_test_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._eval_ended(trainer, "test")

    # ------------------------------------------------------------------ helpers

    def flush(self) -> None:
        """Ship every buffered step now (pause, test, evaluation, epoch and run end)."""
        self._recorder.flush()
        with self._guarded("ship step values"):
            self._buffer.flush()

    def _quiet(self) -> None:
        # The run stops stepping (pause, test, end): ship the tail, and do not count the
        # time until the next batch as waiting for data.
        self.flush()
        self._clock.forget_gap()

    @contextlib.contextmanager
    def _guarded(self, action: str) -> Iterator[None]:
        try:
            yield
        except Exception:
            self._warn_once(action)

    def _warn_once(self, action: str) -> None:
        # Telemetry is an aid: what it cannot read or send is reported once, never raised.
        # Called from an ``except`` block, so the warning carries the exception.
        if action not in self._failed:
            self._failed.add(action)
            log.warning("OnTheFly could not %s; training goes on", action, exc_info=True)

    def _receive(self, segment: Segment) -> None:
        """The recorder's rows: one buffered step per optimizer step they complete."""
        if not self.session.active or self._driver is None:
            return
        try:
            steps = self._usual_steps(segment) or self._window_steps(segment)
        except Exception:
            self._warn_once("record a step")
            return
        if steps.step:
            self._buffer.add_steps(steps)

    def _usual_steps(self, segment: Segment) -> Steps | None:
        """The usual segment at once, as columns: every batch an optimizer step, each with a
        loss tensor of its own; ``None`` for anything else (see :meth:`_window_steps`)."""
        rows = segment.rows
        steps = [row[0] for row in rows]
        losses = [row[1] for row in rows]
        if (
            self._divided != 1
            or self._losses
            or steps[0] == self._last_step
            or any(a >= b for a, b in itertools.pairwise(steps))
            or not all(type(loss) is torch.Tensor and loss.ndim == 0 for loss in losses)
        ):
            return None
        n = len(rows)
        values: dict[str, list[Any]] = {"loss": losses}
        self._lr_columns(segment, values)
        for index, row in enumerate(rows):
            extra = row[4]
            if extra:
                self._extra_values(values, extra, index, n)
        self._last_step = steps[-1]
        return Steps(steps, [segment.epoch] * n, values)

    def _window_steps(self, segment: Segment) -> Steps:
        """Any segment: micro-batches of a window of accumulation add up to one step (its
        loss their mean), batches without a loss add none."""
        values: dict[str, list[Any]] = {}
        steps: list[int] = []
        last, losses = self._last_step, self._losses
        for (step, loss, _, _, extra), lrs in zip(segment.rows, segment.lrs_by_row(), strict=True):
            if isinstance(loss, torch.Tensor) and (loss.ndim == 0 or loss.numel() == 1):
                losses.append(loss.detach() if loss.requires_grad else loss)
            if step == last:
                continue  # a micro-batch of a window whose optimizer step is still to come
            index = len(steps)
            steps.append(int(step))
            for name, lr in lrs.items():
                _put(values, name, lr if type(lr) is float else scalar_or_none(lr), index)
            if losses:
                usual = self._divided == 1 and len(losses) == 1
                loss = losses[0] if usual else _step_loss(losses, self._divided)
                _put(values, "loss", loss, index)
                losses = []
            if extra:
                self._extra_values(values, extra, index, index + 1)
            last = step
        self._last_step, self._losses = last, losses
        for column in values.values():  # the steps after a column's last value lack it too
            column.extend([None] * (len(steps) - len(column)))
        return Steps(steps, [segment.epoch] * len(steps), values)

    def _lr_columns(self, segment: Segment, values: dict[str, list[Any]]) -> None:
        """Each learning rate as a column (a rate that did not change: one list product)."""
        n = len(segment.rows)
        changes = segment.lrs
        if len(changes) == 1:
            for name, lr in changes[0][1].items():
                values[name] = [lr if type(lr) is float else scalar_or_none(lr)] * n
            return
        for index, lrs in enumerate(segment.lrs_by_row()):
            for name, lr in lrs.items():
                _put(values, name, lr if type(lr) is float else scalar_or_none(lr), index)
        for column in values.values():
            column.extend([None] * (n - len(column)))

    def _extra_values(
        self, values: dict[str, list[Any]], extra: dict[str, Any], index: int, n: int
    ) -> None:
        # Gradient norms are ours; a value the step logged under a learning rate's or the
        # norm's name does not replace them.
        for name, value in extra.items():
            column = values.get(name)
            if column is None:
                column = values[name] = [None] * n
            elif len(column) <= index:
                column.extend([None] * (index + 1 - len(column)))
            if name.startswith("grad_norm"):
                column[index] = value
            else:
                self._step_names.add(name)
                if column[index] is None:
                    column[index] = value

    def _ship(self, steps: Steps) -> None:
        # One ``steps`` event for the batch, its values as columns (a metric a step lacks has
        # no point there): the training thread builds no dictionary per step, and the
        # server's pump validates and serialises one event instead of one per step.
        values: dict[str, dict[str, list[Any]]] = {}
        for name, column in steps.values.items():
            if None not in column:
                values[name] = {"steps": steps.step, "values": column}
                continue
            pairs = [(s, v) for s, v in zip(steps.step, column, strict=True) if v is not None]
            if pairs:
                values[name] = {"steps": [s for s, _ in pairs], "values": [v for _, v in pairs]}
        body = {"type": "steps", "split": "train", "steps": steps.step, "epochs": steps.epoch}
        self.session.publish_fields("steps", [{**body, "values": values}])
        for observe in self.step_observers:
            observe(steps)

    def _eval_started(self, trainer: TrainerHost) -> None:
        self._clock.forget_gap()
        if self.session.active:
            self.flush()  # the training steps before it come first in the stream
            self._eval_before = driver(trainer).metric_snapshot()

    def _eval_ended(self, trainer: TrainerHost, split: Split) -> None:
        if not self.session.active:
            return
        with self._guarded(f"report {split} results"):
            values = driver(trainer).eval_values(self._eval_before)
            self._publish_values(trainer, split, without_split_prefix(values, split))

    def _publish_values(
        self, trainer: TrainerHost, split: Split, values: dict[str, Scalar]
    ) -> None:
        self.session.publish(
            MetricsBody(
                split=split,
                step=int(trainer.global_step),
                epoch=int(trainer.current_epoch),
                values=host_floats(values),
            )
        )

    def _stop(self) -> None:
        self._recorder.norm_of = None
        if self._sampler is not None:
            self._sampler.stop()
            self._sampler = None
        self._logs.uninstall()


class GradNorms:
    """The gradient norms of an optimizer's parameters; its flat parameter list is worked
    out once (again when param groups are added)."""

    def __init__(self) -> None:
        self._params: dict[int, tuple[Any, int, list[Any]]] = {}

    def of(self, optimizer: Any) -> Norms | None:
        """Each parameter's gradient norm, as device tensors (see :func:`grad_norms`)."""
        groups = optimizer.param_groups
        known = self._params.get(id(optimizer))
        if known is None or known[0] is not groups or known[1] != len(groups):
            params = [p for group in groups for p in group["params"]]
            known = self._params[id(optimizer)] = (groups, len(groups), params)
        return grad_norms(known[2])


def without_split_prefix(values: dict[str, Any], split: str) -> dict[str, Any]:
    """Evaluation results named without their split: ``val_loss`` and ``val/loss`` -> ``loss``.

    Results are published with ``split="val"`` (or ``"test"``) and shown as ``val/<name>``;
    the prefix users and the native trainer put in the name would otherwise show twice
    (``val/val_loss``). A name that is only the prefix, or whose bare form is logged as well,
    is kept as it is.

    Args:
        values: the results, by the name they were logged under.
        split: ``"val"`` or ``"test"``.

    Example:
        >>> without_split_prefix({"val_loss": 0.5, "val/acc": 0.9, "f1": 0.7}, "val")
        {'loss': 0.5, 'acc': 0.9, 'f1': 0.7}
    """
    out: dict[str, Any] = {}
    for name, value in values.items():
        bare = name
        for prefix in (f"{split}_", f"{split}/"):
            if name.startswith(prefix) and len(name) > len(prefix):
                bare = name[len(prefix) :]
                break
        if bare != name and (bare in values or bare in out):
            bare = name  # both spellings logged: keep them apart
        out[bare] = value
    return out


def grad_norms(parameters: Any) -> Norms | None:
    """The L2 norm of each parameter's gradient, as device tensors (no host sync): one fused
    ``torch._foreach_norm``. Their global norm is taken when the step ships
    (:class:`~onthefly.callbacks._step_buffer.StepBuffer`)."""
    grads = [g for g in [p.grad for p in parameters] if g is not None and not g.is_sparse]
    if not grads:
        return None
    return Norms(torch._foreach_norm(grads))


def _step_loss(losses: list[torch.Tensor], divided: int) -> torch.Tensor:
    """The mean micro-batch loss of one optimizer step's window, from the losses as reported
    (each divided by ``divided``); a short last window is averaged over its own length.
    (The usual step, one loss not divided, is that loss itself: the caller takes it.)"""
    stacked = torch.stack([loss.reshape(()) for loss in losses])
    if divided == 1:
        return stacked.mean()
    total = stacked.sum()
    return total if len(losses) == divided else total * (divided / len(losses))


def _put(values: dict[str, list[Any]], name: str, value: Any, index: int) -> None:
    """Set step ``index``'s ``name`` (the column grows with ``None`` up to it)."""
    column = values.get(name)
    if column is None:
        column = values[name] = []
    column.extend([None] * (index - len(column)))
    column.append(value)
