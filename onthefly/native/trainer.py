"""The native loop's ``Trainer``: train a plain PyTorch model, driving Lightning callbacks.

It knows no feature of OnTheFly: ``onthefly.Trainer`` (:mod:`onthefly.trainer`) is this
trainer with the OnTheFly callback attached, as ``attach_lightning`` attaches it to a
``lightning.Trainer``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import torch
from torch import nn
from typing_extensions import Unpack

from onthefly.distributed.group import failure, is_collective_failure
from onthefly.distributed.launch import join_from_environment, wrap_model
from onthefly.distributed.sharding import shard_loader
from onthefly.native.config import (
    check_clip_norm,
    check_fit_args,
    check_limits,
    check_options,
    check_validation_interval,
    rank_and_world_size,
)
from onthefly.native.device import resolve_device
from onthefly.native.evaluation import loaders_of
from onthefly.native.hooks import Hooks, callback_list
from onthefly.native.loop import FitLoop, LoopContext
from onthefly.native.metrics import StageMetrics
from onthefly.native.optimizer_steps import observe_steps
from onthefly.native.options import LoopOptions
from onthefly.native.precision import make_autocast, make_scaler, parse_precision
from onthefly.native.progress import ProgressBar
from onthefly.native.stages import Stages
from onthefly.native.state import StepState
from onthefly.native.step import DefaultEvaluationStep, DefaultTrainingStep, check_batch_keys
from onthefly.native.step_registration import StepRegistration

_log = logging.getLogger("onthefly")


class Trainer(StepRegistration):
    """A minimal Lightning-like loop for plain PyTorch that drives Lightning callbacks.

    Callbacks get Lightning's hooks in Lightning's order (see ``docs/hook-order.md``) with the
    user's ``nn.Module`` as ``pl_module``. The loop adds nothing to the training itself: no
    reseeding, no clipping and no mixed precision unless asked, DataLoaders untouched. On CPU its
    per-step losses equal a hand-written ``zero_grad / loss_fn(model(x), y) / backward / step``
    loop bit for bit.

    Under ``torchrun`` (see ``docs/distributed.md``) it joins the launcher's process group
    (``gloo`` on CPU, ``nccl`` on CUDA) unless the script initialised one, wraps the model in
    ``DistributedDataParallel`` unless it already is, gives the training loader a
    ``DistributedSampler`` when it has none, calls ``set_epoch`` each epoch, and reduces
    evaluation losses over the ranks. ``trainer.model`` is always the plain module (the one
    exported and probed); the steps call ``state.model``, its DDP wrapper.

    Args:
        **options: the loop's keyword arguments, :class:`~onthefly.native.options.LoopOptions`
            (each described there, with its default): ``max_epochs``, ``max_steps`` (one of
            the two is required), ``val_every_n_epochs``, ``callbacks``, ``precision``,
            ``device``, ``grad_clip_norm``, ``metrics``, ``progress_bar``, ``batch_keys``.
        ranks: ``(global rank, world size)`` to train as; ``None`` (default): the process
            group's, if any (see :meth:`nested`).

    Raises:
        ConfigurationError: for an invalid argument (the message says what was expected).

    Example:
        >>> trainer = Trainer(max_epochs=3, val_every_n_epochs=1, callbacks=[EarlyStopping(...)])
        >>> trainer.fit(model=model, optimizer=opt, loss_fn=nn.CrossEntropyLoss(),
        ...             train_loader=train, val_loader=val)
    """

    def __init__(
        self, *, ranks: tuple[int, int] | None = None, **options: Unpack[LoopOptions]
    ) -> None:
        check_options(options)
        given = options.get("val_every_n_epochs")
        self._validation_given = given is not None
        self.val_every_n_epochs = check_validation_interval(given)
        grad_clip_norm = check_clip_norm(options.get("grad_clip_norm"))
        self.precision = parse_precision(options.get("precision", "32"))
        self.device = join_from_environment(resolve_device(options.get("device")))
        limits = check_limits(options.get("max_epochs"), options.get("max_steps"))
        self.fit_loop = FitLoop(self, *limits)

        # TrainerHost: the surface callbacks may touch.
        self.current_epoch = 0
        self.global_step = 0
        self.should_stop = False
        self.callback_metrics: dict[str, Any] = {}
        self._ranks = ranks
        self.global_rank, self.world_size = ranks or rank_and_world_size()
        self.is_global_zero = self.global_rank == 0
        self.sanity_checking = False  # Lightning callbacks read it; no sanity check runs here

        self.model: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.loss_fn: Callable[..., torch.Tensor] | None = None
        self.train_loader: Iterable[Any] | None = None
        self.val_loader: Iterable[Any] | None = None
        self.test_loader: Iterable[Any] | None = None
        self.val_loaders: list[Iterable[Any]] = []
        self.test_loaders: list[Iterable[Any]] = []
        self.scheduler: Any = None
        self.scheduler_interval = "epoch"
        self.evaluation_label: str | None = None
        self.resume_from: str | os.PathLike[str] | None = None

        self.callbacks: list[object] = callback_list(options.get("callbacks", ()))
        self._hooks = Hooks(self, self.callbacks)
        self._metrics = StageMetrics(options.get("metrics"), self.device)
        self._progress = ProgressBar(options.get("progress_bar", True) and self.is_global_zero)
        self.batch_keys = check_batch_keys(options.get("batch_keys"))
        self._default_step = DefaultTrainingStep(self._hooks, grad_clip_norm, self.batch_keys)
        self._training_step: Callable[[Any, StepState], Any] = self._default_step
        self._stages = Stages(
            self, self._hooks, self._metrics, self._progress, DefaultEvaluationStep(self.batch_keys)
        )
        self._custom_training_step = False
        self._state: StepState | None = None

    # --- TrainerHost ----------------------------------------------------------------------

    @property
    def lightning_module(self) -> nn.Module | None:
        """The model being trained: the user's plain ``nn.Module`` (not a LightningModule)."""
        return self.model

    @property
    def max_epochs(self) -> int | None:
        """Epoch limit, writable during the run (same as ``fit_loop.max_epochs``)."""
        return self.fit_loop.max_epochs

    @max_epochs.setter
    def max_epochs(self, value: int | None) -> None:
        self.fit_loop.max_epochs = value

    @property
    def max_steps(self) -> int:
        """Optimizer-step limit (``-1``: none), writable during the run."""
        return self.fit_loop.max_steps

    @max_steps.setter
    def max_steps(self, value: int) -> None:
        self.fit_loop.max_steps = value

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        """The run's optimizers (Lightning's name): ``[optimizer]`` once ``fit`` started."""
        return [] if self.optimizer is None else [self.optimizer]

    @property
    def step_state(self) -> StepState | None:
        """What the steps get besides the batch (``None`` before ``fit``)."""
        return self._state

    @property
    def grad_clip_norm(self) -> float | None:
        """The global gradient norm the default step clips to (``None``: it never clips)."""
        return self._default_step.grad_clip_norm

    @property
    def grad_norm(self) -> torch.Tensor | None:
        """Total gradient norm (before clipping) at the last default step when
        ``grad_clip_norm`` is set; ``None`` otherwise. A tensor: reading it syncs."""
        return self._default_step.grad_norm

    # --- running ----------------------------------------------------------------------------

    def fit(
        self,
        model: nn.Module | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        loss_fn: Callable[..., torch.Tensor] | None = None,
        train_loader: Iterable[Any] | None = None,
        val_loader: Iterable[Any] | None = None,
        test_loader: Iterable[Any] | None = None,
        scheduler: Any = None,
        scheduler_interval: str = "epoch",
        resume_from: str | os.PathLike[str] | None = None,
    ) -> None:
        """Train ``model`` until ``max_epochs`` / ``max_steps`` or ``should_stop``.

        Calling ``fit`` again continues from the current epoch and step (raise the limits first).

        Args:
            model: the ``nn.Module`` to train; moved to the trainer's device.
            optimizer: a ``torch.optim.Optimizer`` over the model's parameters.
            loss_fn: ``loss_fn(model(x), y)``; required by the default steps.
            train_loader: the training batches (any iterable; DataLoaders are used as given,
                but for the ``DistributedSampler`` a distributed run adds when there is none).
            val_loader: validation batches, used every ``val_every_n_epochs``; several
                loaders as a list, tuple or dict of ``DataLoader`` objects (as Lightning takes
                them: results are named ``val_loss/dataloader_idx_0``, ...).
            test_loader: test batches, used by :meth:`run_test`; several as for
                ``val_loader``.
            scheduler: an LR scheduler, stepped after each epoch or each optimizer step;
                ``ReduceLROnPlateau`` is stepped with ``val_loss`` after each validation.
            scheduler_interval: ``"epoch"`` or ``"step"``.
            resume_from: a session file (``.otf``) exported from a native run: training
                continues exactly where it was exported (weights, optimizer, scheduler,
                counters, callback states, data position, RNG; see docs/sessions.md).

        Raises:
            ConfigurationError: for a missing or invalid argument.
            SessionFileError: ``resume_from`` cannot be read or does not fit the model.
            BaseException: whatever the run raised, after ``on_exception`` and ``teardown``.
        """
        check_fit_args(
            model,
            optimizer,
            loss_fn,
            train_loader,
            val_loader,
            scheduler,
            scheduler_interval,
            self.val_every_n_epochs,
            self._custom_training_step,
        )
        assert model is not None and optimizer is not None
        if val_loader is not None and not self._validation_given:
            _log.warning(
                "validation is off: fit() got a val_loader, but the Trainer no "
                "val_every_n_epochs; pass onthefly.Trainer(val_every_n_epochs=1) to run it"
            )
        # A process group the script initialised after creating the trainer counts too.
        self.global_rank, self.world_size = self._ranks or rank_and_world_size()
        self.is_global_zero = self.global_rank == 0
        self.model = stepped = model.to(self.device)
        if self.world_size > 1:
            self.model, stepped = wrap_model(self.model, self.device)
            train_loader = shard_loader(train_loader, self.global_rank, self.world_size)
        if isinstance(loss_fn, nn.Module):
            loss_fn = loss_fn.to(self.device)
        self.optimizer, self.loss_fn = optimizer, loss_fn
        self.train_loader = train_loader
        self.val_loaders, self.test_loaders = loaders_of(val_loader), loaders_of(test_loader)
        # Per-sample features (scans, compare) use a split's first loader, as under Lightning.
        self.val_loader = next(iter(self.val_loaders), None)
        self.test_loader = next(iter(self.test_loaders), None)
        self.scheduler, self.scheduler_interval = scheduler, scheduler_interval
        self.should_stop = False
        self._state = StepState(
            model=stepped,
            optimizer=optimizer,
            loss_fn=loss_fn,
            device=self.device,
            autocast=make_autocast(self.precision, self.device),
            scaler=make_scaler(self.precision, self.device),
            scheduler=scheduler,
            metrics=self._metrics.by_stage["train"],
            _hooks=self._hooks,
        )
        self.resume_from = resume_from
        if resume_from is not None:
            from onthefly.sessions.resume import resume_native

            resume_native(self, resume_from)
        # The default step fires on_before_optimizer_step itself (before clipping, as
        # Lightning does); a custom step's optimizer.step() is observed instead.
        before = self._before_optimizer_step if self._custom_training_step else None
        with self._stages.stage("fit"), observe_steps(optimizer, before, self._count_step):
            self._stages.fitting = True
            try:
                self.fit_loop.run(self._loop_context())
            except RuntimeError as exc:
                if self.world_size > 1 and is_collective_failure(exc):
                    what = f"collective of training step {self.global_step + 1}"
                    raise failure(self.global_rank, what, exc) from exc
                raise
            finally:
                self._stages.fitting = False

    def run_validation(self, isolated: bool | None = None) -> dict[str, Any]:
        """Evaluate ``val_loader`` now (firing the ``on_validation_*`` hooks).

        Usable after ``fit`` or from a callback at a batch boundary during it, in eval mode
        and without grad for the duration (the previous mode is restored).

        Args:
            isolated: leave every random generator as it was (the global ones and the run's
                loaders' own), so that training afterwards draws exactly what it would have
                drawn without this evaluation. ``None`` (default): isolated when called
                during ``fit`` (an evaluation beside training); after ``fit`` it draws what
                a hand-written evaluation loop draws, as ``lightning.Trainer.validate`` does.

        Returns:
            ``{"loss": mean loss over samples, **metrics}``; also in ``callback_metrics`` as
            ``val_loss``, ``val_<metric>``. With several loaders each name has its loader's
            suffix (``loss/dataloader_idx_0``, ...).

        Raises:
            ConfigurationError: before ``fit``, or without a ``val_loader``.
        """
        return self._stages.run("validation", isolated)

    def run_test(self, label: str | None = None, isolated: bool | None = None) -> dict[str, Any]:
        """Evaluate ``test_loader`` now (firing the ``on_test_*`` hooks in Lightning's order).

        Usable after ``fit`` (then wrapped in ``setup``/``teardown`` with ``stage="test"``, like
        ``lightning.Trainer.test``) or from a callback at a batch boundary during it, in eval
        mode and without grad for the duration (the previous mode is restored).

        Args:
            label: a name for this evaluation, readable by callbacks as
                ``trainer.evaluation_label`` during the ``on_test_*`` hooks.
            isolated: as for :meth:`run_validation` (``None``: isolated during ``fit``).

        Returns:
            ``{"loss": mean loss over samples, **metrics}``; also in ``callback_metrics`` as
            ``test_loss``, ``test_<metric>``; several loaders as in :meth:`run_validation`.

        Raises:
            ConfigurationError: before ``fit``, or without a ``test_loader``.
        """
        self.evaluation_label = label
        try:
            return self._stages.run("test", isolated)
        finally:
            self.evaluation_label = None

    def nested(
        self,
        *,
        max_steps: int | None = None,
        max_epochs: int | None = None,
        callbacks: Sequence[object] = (),
    ) -> Trainer:
        """A trainer with this one's settings, to train a copy of the model beside the run
        (a fork) in this process alone.

        It takes this trainer's custom training step, precision, device, clipping, batch
        keys and fresh copies of its training metrics; it has no session, no progress bar,
        and one process whatever process group the run has (no DDP wrapper, no sharding, no
        reduction over the ranks, no metric synchronisation): the other ranks hold while it
        trains.

        Args:
            max_steps: its step limit (``None``: none).
            max_epochs: its epoch limit (``None``: none).
            callbacks: its callbacks.

        Example:
            >>> fork = trainer.nested(max_steps=20)  # doctest: +SKIP
            >>> fork.fit(model=copy, optimizer=opt, loss_fn=trainer.loss_fn, train_loader=part)
        """
        fork = Trainer(
            metrics=self._metrics.fresh_copies("train"),
            max_steps=max_steps,
            max_epochs=max_epochs,
            callbacks=callbacks,
            precision=self.precision,
            device=self.device,
            grad_clip_norm=self.grad_clip_norm,
            progress_bar=False,
            batch_keys=self.batch_keys,  # the slice's batches are the run's
            ranks=(0, 1),
        )
        if self._custom_training_step:  # the user's own step
            fork.training_step(self._training_step)
        return fork

    def callback_states(self) -> dict[str, dict[str, Any]]:
        """Each stateful callback's ``state_dict()``, keyed by its ``state_key``
        (what Lightning stores under ``checkpoint["callbacks"]``)."""
        return self._hooks.state_dicts()

    def load_callback_states(self, states: Mapping[str, Mapping[str, Any]]) -> None:
        """Restore callbacks from :meth:`callback_states` output (``load_state_dict`` each)."""
        self._hooks.load_state_dicts(states)

    # --- internals used by the loops ------------------------------------------------------

    def _loop_context(self) -> LoopContext:
        assert self._state is not None
        return LoopContext(
            hooks=self._hooks,
            progress=self._progress,
            metrics=self._metrics,
            state=self._state,
            training_step=self._training_step,
            validation_due=self._validation_due,
            validate=functools.partial(self._stages.evaluate, "validation"),
        )

    def _validation_due(self) -> bool:
        n = self.val_every_n_epochs
        return n > 0 and self.val_loader is not None and (self.current_epoch + 1) % n == 0

    def _before_optimizer_step(self) -> None:
        step = self._hooks.step  # the batch in progress's hooks (see StepHooks)
        for hook in step.before_optimizer_step:
            hook(step.trainer, step.model, self.optimizer)

    def _count_step(self) -> None:
        self.global_step += 1
