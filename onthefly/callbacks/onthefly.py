"""OnTheFly: the one callback that makes a run live and steerable.

It bundles the parts (:class:`Recorder`, :class:`Checkpointer`, :class:`Telemetry`,
:class:`Watchdog`, :class:`TestLauncher`, :class:`HealthMonitor`, :class:`HparamEditor`,
:class:`ForkSpawner`, :class:`PauseGate`) around one shared :class:`RunSession`, opens the
session when ``fit`` is set up (global rank 0 only) and closes it when ``fit`` ends, fails or
is interrupted, so the discovery file never outlives the run. Every other Lightning hook goes
to the parts, in order, but for the hooks of a training step: those are the
:class:`Recorder`'s alone (it runs the other parts' batch hooks when something waits at the
boundary), and its optional ones are switched on only while needed (see
:mod:`onthefly.callbacks._recorder`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightning.pytorch import Callback

from onthefly.callbacks._recorder import Recorder
from onthefly.callbacks._runtime_sampler import StepClock
from onthefly.callbacks.checkpointer import Checkpointer
from onthefly.callbacks.fork_spawner import ForkSpawner
from onthefly.callbacks.health_monitor import HealthMonitor
from onthefly.callbacks.hparam_editor import HparamEditor
from onthefly.callbacks.pause_gate import PauseGate
from onthefly.callbacks.sample_tracker import SampleTracker
from onthefly.callbacks.session import RunSession
from onthefly.callbacks.telemetry import Telemetry
from onthefly.callbacks.test_launcher import TestLauncher
from onthefly.callbacks.watchdog import Watchdog
from onthefly.drivers.base import TrainerHost
from onthefly.errors import ConfigurationError
from onthefly.native.hooks import STEP_HOOKS, HookTable, implementations

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunInputs:
    """What the user handed over besides the trainer, for features that need the model, the
    data or the loss; ``None`` where Lightning's own sources apply."""

    model: Any = None
    train_loader: Any = None
    val_loader: Any = None
    test_loader: Any = None
    loss_fn: Any = None
    datamodule: Any = None


class OnTheFly(Callback):
    """Watch and steer a training run from the dashboard.

    Args:
        project: the project name shown by dashboards and the CLI.
        run_name: the run's name; ``None`` names it after the start time.
        port: first port to try on 127.0.0.1; ``None`` reads ``ONTHEFLY_PORT`` (default 47621).
        do_test_after: evaluate the test data when ``max_epochs`` / ``max_steps`` is reached,
            then hold the session open, paused (see ``keep_alive``).
        keep_alive: hold after ``do_test_after``'s test; ``None`` reads ``ONTHEFLY_KEEP_ALIVE``
            (``0``/``1``), else holds when a dashboard is connected or stdin is a terminal.
        log_level: lowest level of the log records forwarded to the dashboard.
        test_loader: Lightning only: a test ``DataLoader`` to use instead of the module's.
        datamodule: Lightning only: a ``LightningDataModule`` whose test data to use.
        quiet: do not print the dashboard's address.
        home: folder for discovery files (default ``$ONTHEFLY_HOME`` or ``~/.onthefly``).
        flush_every_steps: ship buffered step values to the dashboard every this many steps …
        flush_every_s: … or this many seconds, whichever comes first.
        runtime_interval_s: seconds between runtime samples (CPU, memory, GPU).
        grad_norm_every_s: the least training time between two steps whose gradient norm is
            reported (default 10 ms: every step of a real model, about one in ten of a
            model whose steps take a millisecond, where the norm is a tenth of the step's
            cost); ``0`` reports it at every step. A trainer that clips reports every step.
        resume_from: Lightning only: a session file (``.otf``) to continue from, exactly
            (see docs/sessions.md); the native trainer takes ``fit(resume_from=...)``.
        checkpoints: snapshots kept in the session's checkpoint ring (``0``: none).
        checkpoint_bytes: most disk space the checkpoint ring may use.
        loss_fn: Lightning only: the loss module/function ``training_step`` uses, for
            per-sample losses and scans (``attach_lightning(loss_fn=...)`` sets it too).
        embedding_fn: ``fn(model, batch) -> Tensor[B, D]``, a per-sample embedding for
            clustering and the data explorer (see docs/per-sample.md).
        track_samples: record per-sample losses and answer the per-sample commands.
        describe_sample: ``fn(index) -> str | image`` (or ``fn(index, split)``): what the
            dashboard shows of a sample, e.g. the decoded text of token ids; ``None`` shows a
            thumbnail of an image-like input, else a summary of the tensor (docs/per-sample.md).
        stall_seconds: the shortest time without a training step that raises a ``stalled``
            alert (it must also be 10 times the usual step time); ``None`` reads
            ``ONTHEFLY_STALL_SECONDS``, else 30.

    Raises:
        ConfigurationError: an argument of the wrong type or value.

    Example:
        >>> trainer = lightning.Trainer(max_epochs=3, callbacks=[OnTheFly(project="mnist")])
        >>> trainer.fit(model, datamodule=dm)  # doctest: +SKIP

        Or in a LightningCLI config::

            trainer:
              callbacks:
                - class_path: onthefly.OnTheFly
                  init_args: {project: mnist, do_test_after: true}
    """

    def __init__(
        self,
        project: str,
        run_name: str | None = None,
        port: int | None = None,
        do_test_after: bool = False,
        keep_alive: bool | None = None,
        log_level: int | str = "INFO",
        test_loader: Any = None,
        datamodule: Any = None,
        quiet: bool = False,
        home: str | os.PathLike[str] | None = None,
        flush_every_steps: int = 32,
        flush_every_s: float = 0.1,
        runtime_interval_s: float = 1.0,
        grad_norm_every_s: float = 0.01,
        resume_from: str | os.PathLike[str] | None = None,
        checkpoints: int = 3,
        checkpoint_bytes: int = 2 << 30,
        loss_fn: Any = None,
        embedding_fn: Callable[[Any, Any], Any] | None = None,
        track_samples: bool = True,
        describe_sample: Callable[..., Any] | None = None,
        stall_seconds: float | None = None,
    ) -> None:
        # The arguments as given (nothing else is bound yet), to rebuild it in another process.
        self._arguments = {k: v for k, v in locals().items() if k not in ("self", "__class__")}
        _check_options(project, run_name, port, keep_alive, log_level)
        self.inputs = RunInputs(test_loader=test_loader, datamodule=datamodule, loss_fn=loss_fn)
        self.session = RunSession(project, run_name, port=port, home=home, quiet=quiet)
        self.hook_revision = 0
        """Counts the switches of the optional step hooks (the native loop then looks again)."""
        self.recorder = Recorder(
            self.session, StepClock(), every_steps=flush_every_steps, every_s=flush_every_s
        )
        self.telemetry = Telemetry(
            self.session,
            self.recorder,
            log_level=log_level,
            flush_every_steps=flush_every_steps,
            flush_every_s=flush_every_s,
            runtime_interval_s=runtime_interval_s,
            grad_norm_every_s=grad_norm_every_s,
        )
        self.test_launcher = TestLauncher(
            self.session,
            test_source=test_loader if test_loader is not None else datamodule,
            do_test_after=do_test_after,
        )
        self.sample_tracker = (
            SampleTracker(
                self.session, self.recorder, lambda: self.inputs, embedding_fn, describe_sample
            )
            if track_samples
            else None
        )
        self.watchdog = Watchdog(self.session, self.recorder.clock, stall_seconds)
        self.health_monitor = HealthMonitor(self.session, self.recorder)
        self.telemetry.step_observers += [
            self.watchdog.observe_steps,
            self.health_monitor.observe_steps,
        ]
        self.hparam_editor = HparamEditor(self.session)
        # hold_at_end is do_test_after: the gate asks the recorder for every batch's hooks,
        # the test launcher's at the planned end among them.
        self.pause_gate = PauseGate(
            self.session, self.recorder, hold_at_end=do_test_after, keep_alive=keep_alive
        )
        self.checkpointer = Checkpointer(
            self.session, self.recorder, resume_from, checkpoints, checkpoint_bytes
        )
        self.fork_spawner = ForkSpawner(
            self.session, lambda: self.inputs, self.sample_tracker, self.checkpointer.snapshot
        )
        # Order matters at a batch end: record the step, then test, then pause or hold.
        self.parts = [
            self.recorder,  # first: it records each batch before any part acts on it
            self.checkpointer,
            self.telemetry,
            self.watchdog,
            *([self.sample_tracker] if self.sample_tracker is not None else []),
            self.test_launcher,
            self.health_monitor,
            self.hparam_editor,
            self.fork_spawner,
            self.pause_gate,
        ]

    def __reduce__(self) -> tuple[Any, ...]:
        # Lightning's ddp_spawn pickles the trainer, callbacks included, into each new process;
        # a session holds threads, locks and handlers bound to it, so a new one is built there
        # from the same arguments and inputs (nothing has started before fit).
        return (_rebuilt, (type(self), self._arguments, self.inputs))

    @property
    def parts(self) -> list[Callback]:
        """The parts, in the order their hooks run; assign a new list to change them."""
        return self._parts

    @parts.setter
    def parts(self, parts: list[Callback]) -> None:
        self._parts = list(parts)
        self._part_hooks = HookTable()
        self._install_hooks()

    def hook_implementations(self, hook: str) -> list[Callable[..., Any]] | None:
        """The parts' own implementations of ``hook``, for a trainer that calls them itself.

        The native trainer calls these directly instead of going through this callback
        (several hooks fire per step); ``None`` for the hooks this callback (or a subclass)
        handles itself. A step's hooks are the recorder's, as switched now.

        Args:
            hook: a Lightning hook name, e.g. ``"on_train_batch_end"``.
        """
        if hook in _OWN_HOOKS or _overridden(type(self), hook):
            return None
        if self._recorder is not None and hook in STEP_HOOKS:
            method = self._step_methods.get(hook)
            return [] if method is None else [method]
        return self._part_hooks.hooks(self.parts, hook)

    def _install_hooks(self) -> None:
        # Every other Lightning hook goes to the parts unchanged. Each is set on the instance,
        # resolved once: no part implements it -> None (Lightning skips what is not callable,
        # profiler and all); one part -> that part's method itself; several -> one loop.
        recorder = self._recorder = next((p for p in self.parts if isinstance(p, Recorder)), None)
        if recorder is not None:
            others = [part for part in self.parts if part is not recorder]
            for boundary, name in (
                (recorder.boundary_start, "on_train_batch_start"),
                (recorder.boundary_end, "on_train_batch_end"),
            ):
                boundary[:] = [hook for part in others for hook in implementations(part, name)]
            recorder.connect(self._set_step_hook)
        self._step_methods = {} if recorder is None else _recorded(recorder)
        for hook in _FORWARDED:
            if _overridden(type(self), hook):
                continue  # a subclass's own hook
            if recorder is not None and hook in STEP_HOOKS:
                # The recorder's: its batch hooks always, the optional ones while switched on.
                setattr(self, hook, self._step_methods.get(hook))
                continue
            methods = self._part_hooks.hooks(self.parts, hook)
            if not methods:
                if hook in _CALLED_UNCHECKED:
                    vars(self).pop(hook, None)  # back to Callback's empty default
                else:
                    setattr(self, hook, None)
            elif len(methods) == 1:
                setattr(self, hook, methods[0])
            else:
                setattr(self, hook, _fan_out(tuple(methods)))
        self.hook_revision += 1

    def _set_step_hook(self, hook: str, method: Callable[..., Any] | None, pulse: bool) -> None:
        """Switch one of the recorder's optional step hooks on (``method``) or off.

        Lightning sees the switch at once (it skips a hook that is ``None``, profiler and
        all). The native loop calls a hook's methods directly, at the cost of a plain call:
        it rebuilds its lists when ``hook_revision`` moves, which a ``pulse`` (a switch for
        the coming steps only, e.g. a gradient norm that is due) does not do: it keeps
        calling the method, which returns at once while the hook is off.
        """
        if _overridden(type(self), hook):
            return
        setattr(self, hook, method)
        if pulse:
            return
        if method is None:
            dropped = self._step_methods.pop(hook, None) is not None
            if dropped:
                self.hook_revision += 1
        elif self._step_methods.get(hook) is not method:
            self._step_methods[hook] = method
            self.hook_revision += 1

    def _forward(
        self, hook: str, trainer: TrainerHost, pl_module: Any, *args: Any, **kwargs: Any
    ) -> None:
        for method in self._part_hooks.hooks(self.parts, hook):
            method(trainer, pl_module, *args, **kwargs)

    def _release(
        self, hook: str, trainer: TrainerHost, pl_module: Any, *args: Any
    ) -> Exception | None:
        # Every part releases what it holds even when another part's cleanup fails (e.g. after
        # a Ctrl+C that landed mid-setup); the first failure is logged and returned.
        first: Exception | None = None
        for method in self._part_hooks.hooks(self.parts, hook):
            try:
                method(trainer, pl_module, *args)
            except Exception as exc:
                name = getattr(method, "__qualname__", hook)
                log.error("OnTheFly: %s failed: %s", name, exc, exc_info=exc)
                first = first or exc
        return first

    def setup(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._open(trainer)
        self._forward("setup", trainer, pl_module, stage)

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        try:
            self._forward("on_fit_end", trainer, pl_module)
        finally:
            self.session.close(trainer, "training finished")

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        try:
            failure = self._release("teardown", trainer, pl_module, stage)
            if failure is not None:
                raise failure
        finally:
            self.session.close(trainer, "training ended")

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        try:
            # The run's own exception goes on; a part failing to clean up is only logged.
            self._release("on_exception", trainer, pl_module, exception)
        finally:
            self.session.close(trainer, f"stopped by {type(exception).__name__}")

    def state_dict(self) -> dict[str, Any]:
        return {type(part).__name__: part.state_dict() for part in self.parts}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for part in self.parts:
            part.load_state_dict(state_dict.get(type(part).__name__, {}))

    def _open(self, trainer: TrainerHost) -> None:
        try:
            self.session.open(trainer)
        except (ConfigurationError, OSError) as exc:
            # The dashboard is an aid: a session that cannot start must not cost the run.
            log.error("OnTheFly could not start its session (%s); training goes on without it", exc)


def _rebuilt(cls: type[OnTheFly], arguments: dict[str, Any], inputs: RunInputs) -> OnTheFly:
    callback = cls(**arguments)
    callback.inputs = inputs
    return callback


def _overridden(cls: type, hook: str) -> bool:
    """Whether a subclass of OnTheFly implements ``hook`` itself."""
    return getattr(cls, hook, None) is not getattr(Callback, hook, None)


def _recorded(recorder: Recorder) -> dict[str, Callable[..., Any]]:
    """The step hooks the recorder always takes."""
    return {
        "on_train_batch_start": recorder.on_train_batch_start,
        "on_train_batch_end": recorder.on_train_batch_end,
    }


def _fan_out(methods: tuple[Callable[..., Any], ...]) -> Callable[..., None]:
    def forward(trainer: TrainerHost, pl_module: Any, *args: Any, **kwargs: Any) -> None:
        for method in methods:
            method(trainer, pl_module, *args, **kwargs)

    return forward


_OWN_HOOKS = frozenset(
    name for name in vars(OnTheFly) if callable(vars(Callback).get(name)) and name != "__init__"
)
"""The hooks :class:`OnTheFly` handles itself (it opens and closes the session in them)."""

_FORWARDED = tuple(
    name for name in vars(Callback) if name.startswith("on_") and name not in _OWN_HOOKS
)
"""The hooks that go to the parts unchanged."""

_CALLED_UNCHECKED = frozenset({"on_save_checkpoint", "on_load_checkpoint"})
"""Hooks Lightning calls without checking that they are callable: never set to ``None``."""


def _check_options(project: Any, run_name: Any, port: Any, keep_alive: Any, log_level: Any) -> None:
    if not isinstance(project, str) or not project.strip():
        raise ConfigurationError(f"project={project!r}; expected a non-empty name")
    if run_name is not None and (not isinstance(run_name, str) or not run_name.strip()):
        raise ConfigurationError(f"run_name={run_name!r}; expected a non-empty name or None")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int)):
        raise ConfigurationError(f"port={port!r}; expected an int between 0 and 65535 or None")
    if keep_alive is not None and not isinstance(keep_alive, bool):
        raise ConfigurationError(f"keep_alive={keep_alive!r}; expected True, False or None")
    valid = isinstance(log_level, int) or (
        isinstance(log_level, str) and isinstance(logging.getLevelName(log_level.upper()), int)
    )
    if not valid or isinstance(log_level, bool):
        raise ConfigurationError(
            f"log_level={log_level!r}; expected a logging level such as 'INFO' or 'WARNING'"
        )
