"""Recorder: the training thread's only work at every step — stamps, references, one check.

:class:`Recorder` is the one part of :class:`~onthefly.callbacks.onthefly.OnTheFly` whose
hooks run at every training batch. As a batch starts it stamps the step clock, takes the
batch's sample ids from the sampler's recording, opens the per-sample slot and looks at the
learning rates (kept only when they change, read where Lightning's ``LearningRateMonitor``
reads them). As it ends it stamps the clock again and appends one row of references — the
optimizer step, the step's outputs, the ids, the per-sample values — to a list. Nothing is
stacked, copied, converted or validated there: every ``every_steps`` rows (or ``every_s``
seconds, or at an epoch's end, a pause, a test, the end of the run) the rows go to their
readers at once as one :class:`Segment` (Telemetry ships the steps' values, the sample
tracker the per-sample ones).

Optional hooks cost a trainer nothing while they are off (Lightning skips a hook that is
``None``; the native loop calls the hooks it was given), so they are switched on only while
needed: ``on_before_optimizer_step`` while gradient norms are taken (pulsed on for the steps
whose norm is due, at most one every ``norm_every_s`` of training) or under a grad scaler
(to count the steps it skips), ``on_before_zero_grad`` / ``on_before_backward`` while
functional losses are watched, ``on_before_backward`` while the per-sample values are read
from the loss backpropagated. The other parts' batch hooks (the pause gate, the final
test) run only when something waits at the boundary: a command in the inbox, a run that is
not running, or :attr:`Recorder.attend`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Protocol

from lightning.pytorch import Callback

from onthefly.callbacks._runtime_sampler import StepClock, batch_size
from onthefly.drivers import Driver, driver
from onthefly.drivers.base import TrainerHost
from onthefly.samples.slot import CLOSED, Slot

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

    from onthefly.callbacks.session import RunSession
    from onthefly.sessions.data_position import TrackedLoader

log = logging.getLogger(__name__)

Hook = Callable[..., Any]
SetHook = Callable[[str, "Hook | None", bool], None]
"""``set_hook(name, method, pulse)``: switch one of the recorder's optional hooks on (a
method) or off (``None``). With ``pulse`` the switch is for the coming steps only (it flips
often): a trainer that calls hook methods directly keeps calling the method it had (it
returns at once while the hook is off), one that dispatches every hook through its own
machinery (Lightning) calls it only while on."""

Row = tuple[int, Any, Any, Any, Any]
"""One training batch as recorded: ``(step, loss, ids, sample values, extra)``.

``step``: ``global_step`` once the batch ended; ``loss``: the step's output ``"loss"`` (or
the output itself when it is no dict; the outputs are not kept: a trainer may hand over
tensors that still hold their graph); ``ids``: the batch's sample ids (``None``: none
recorded); ``sample values``: what the per-sample slot received (``None``: nothing);
``extra``: a dict of the batch's other values (gradient norms, values the step logged), or
``None``."""

OPTIONAL_HOOKS = ("on_before_optimizer_step", "on_before_zero_grad", "on_before_backward")
"""The hooks the recorder switches on only while they are needed."""

_LR = itemgetter("lr")


@dataclass
class Segment:
    """The rows recorded since the last hand-over.

    Attributes:
        rows: one :data:`Row` per training batch, in order.
        epoch: the epoch they belong to (a segment never spans an epoch's end).
        before: ``global_step`` before the first row.
        lrs: ``(row index, {name: lr})``: the learning rates from that row on, oldest first;
            the first entry is at row 0.
    """

    rows: list[Row]
    epoch: int
    before: int
    lrs: list[tuple[int, dict[str, Any]]]

    def lrs_by_row(self) -> list[dict[str, Any]]:
        """Each row's learning rates, in order."""
        out: list[dict[str, Any]] = []
        changes, at, current = self.lrs, 0, {}
        for index in range(len(self.rows)):
            while at < len(changes) and changes[at][0] <= index:
                current = changes[at][1]
                at += 1
            out.append(current)
        return out


class SampleSource(Protocol):
    """What the recorder asks of the per-sample tracker (only off its usual path)."""

    def ids_of(self, batch: Any, item: Any) -> Any:
        """The ids of ``batch`` whose sampler recording gave ``item`` (not a list of ints)."""

    def settle(self, outputs: Any, values: Any) -> Any:
        """The batch's per-sample values, from the slot's ``values`` and the step's
        ``outputs`` (a step may return its own)."""

    def enter_watch(self) -> None:
        """Watch the step's functional loss calls (the batch starts)."""

    def leave_watch(self) -> None:
        """Stop watching them."""

    def before_backward(self, loss: Any) -> None:
        """The step's loss is about to be backpropagated (stop watching; the values may be
        read from it)."""


class LearningRates:
    """The learning rates of the run's optimizers, their names worked out once.

    Names as Telemetry reports them: ``lr`` (``lr/group1``, … for further param groups;
    ``lr/opt1`` for a second optimizer).

    Args:
        optimizers: the run's optimizers.

    Attributes:
        groups: every param group, in name order.
        single: the usual case: one optimizer whose rates are Python floats (they are then
            compared at each batch; a tensor's value could not be read without a sync, so
            other rates are recorded at every batch).
    """

    def __init__(self, optimizers: Sequence[Any]) -> None:
        self.optimizers = list(optimizers)
        lists = [optimizer.param_groups for optimizer in self.optimizers]
        self._lists = lists
        self._sizes = [len(groups) for groups in lists]
        self.groups = [group for groups in lists for group in groups]
        self.names = [
            (f"lr/opt{i}" if i else "lr") + (f"/group{j}" if j else "")
            for i, groups in enumerate(lists)
            for j in range(len(groups))
        ]
        floats = all(type(_LR(group)) is float for group in self.groups)
        self.single = floats and len(lists) == 1
        self.first = lists[0] if lists else []
        self.first_size = len(self.first)

    def current(self, optimizers: Sequence[Any]) -> bool:
        """Whether ``optimizers`` are still these, with no param group added."""
        return list(optimizers) == self.optimizers and all(
            len(groups) == size for groups, size in zip(self._lists, self._sizes, strict=True)
        )

    def named(self, values: Sequence[Any]) -> dict[str, Any]:
        """``values`` (one per group, in order) by name."""
        return dict(zip(self.names, values, strict=True))


class Recorder(Callback):
    """Records each training batch with as little work as the training thread can do.

    Args:
        session: the run's shared session (its inbox and state are read at every batch).
        clock: the step clock it stamps (the runtime sampler and the health checks read it).
        every_steps: hand the rows over after this many batches …
        every_s: … or this many seconds after the last hand-over, whichever comes first.

    Attributes:
        batch: the batch in progress (or the last one), for the health checks' probes.
        batch_idx: its index in the epoch.
        trained: batches of the current epoch trained on so far.
        attend: run the other parts' batch hooks at every batch (a distributed run's control
            rounds, a hold or test at the planned end, an extension waiting for it).
        readers: receive each :class:`Segment`, in order.
        boundary_start: the other parts' ``on_train_batch_start`` hooks.
        boundary_end: the other parts' ``on_train_batch_end`` hooks.
        norm_every_s: the least training time between two steps whose gradient norm is taken.
        norm_of: ``fn(optimizer) -> norms`` of its gradients; ``None``: no norm is taken.
        samples: the per-sample tracker, while it records (see :meth:`track_samples`).
        attempted: optimizer steps attempted under a grad scaler (``on_before_optimizer_step``).
        taken: optimizer steps taken under a grad scaler (the optimizers' step hooks).

    Example:
        >>> recorder = Recorder(RunSession("demo"), StepClock())  # usually made by ``OnTheFly``
    """

    def __init__(
        self, session: RunSession, clock: StepClock, every_steps: int = 32, every_s: float = 0.1
    ) -> None:
        if every_steps < 1 or not every_s > 0:
            raise ValueError(
                f"every_steps={every_steps!r} and every_s={every_s!r}: expected every_steps >= 1 "
                "and every_s > 0"
            )
        self.session = session
        self.clock = clock
        self.every_steps = every_steps
        self.every_s = every_s
        self.batch: Any = None
        self.batch_idx = 0
        self.trained = 0
        self.readers: list[Callable[[Segment], None]] = []
        self.boundary_start: list[Hook] = []
        self.boundary_end: list[Hook] = []
        self.norm_every_s = 0.01
        self.norm_of: Callable[[Any], Any] | None = None
        self.samples: SampleSource | None = None
        self.attempted = 0
        self.taken = 0
        self._set_hook: SetHook = _no_hook
        self._running = False
        self._driver: Driver | None = None
        self._rows: list[Row] = []
        self._epochs: Any = None
        self._epochs_name = "current_epoch"
        self._before = 0
        self._flush_at = math.inf
        self._counter: Any = None
        self._counter_name = "global_step"
        self._logs: Any = None  # truthy when the step logged values kept only until the next
        self._in_outputs = False  # the values a step logs are the extra keys of its outputs
        self._trainer_norm = False  # the trainer computes the norm itself (it clips)
        self._lrs: LearningRates | None = None
        self._lr_groups: list[dict[str, Any]] | None = None  # compared at each batch (floats)
        self._lr_count = 0
        self._lr_values: tuple[Any, ...] = ()
        self._lr_now: dict[str, Any] = {}
        self._lr_changes: list[tuple[int, dict[str, Any]]] = [(0, {})]
        self._norm_next = -math.inf  # the training time from which a norm is due again
        self._norming = False  # gradient norms are taken in this fit
        self._norm_on = False  # this step's is due: on_before_optimizer_step is switched on
        self._extra: dict[str, Any] | None = None
        self.attend = False
        self._watching = False  # functional losses are watched (samples.enter_watch per batch)
        self._slot: Slot | None = None
        self._pending: Any = None  # the sampler's recorded index lists (a deque), if any
        self._ids: Any = None
        self._counted: list[TrackedLoader] = []
        self._scaled = False
        self._handles: list[RemovableHandle] = []
        session.on_quiet(self.flush)

    def watching(self, watched: bool) -> None:
        """The per-sample tracker watches functional loss calls (or stops): each batch then
        enters its watch, and its end always settles the batch's values."""
        self._watching = watched

    # ------------------------------------------------------------------ wiring

    def connect(self, set_hook: SetHook) -> None:
        """Switch the optional hooks through ``set_hook`` (see the module docstring)."""
        self._set_hook = set_hook

    def track_samples(self, samples: SampleSource | None, slot: Slot | None, pending: Any) -> None:
        """Record per-sample values in ``slot`` (``None``: none), with the ids from ``pending``
        (the deque of index lists a sampler's recording fills; ``None``: ``samples`` finds
        each batch's ids itself)."""
        self.samples = samples
        self._slot = slot
        self._pending = pending

    def count_fetches(self, counted: list[TrackedLoader]) -> None:
        """Native: tell these loaders' iterators how many batches of the epoch are trained
        (a fetch up to there needs no RNG state)."""
        self._counted = counted

    def watch_hooks(self, watch: bool, backward: bool = False) -> None:
        """Switch the hooks that end a watched loss computation (``watch``) or hand over the
        loss about to be backpropagated (``backward``) on or off."""
        self._set_hook("on_before_zero_grad", self.leave_watch if watch else None, False)
        hook = self.before_backward if watch or backward else None
        self._set_hook("on_before_backward", hook, False)

    # ------------------------------------------------------------------ lifecycle

    def on_fit_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        run = self._driver = driver(trainer)
        self._counter, self._counter_name = run.step_counter()
        self._epochs, self._epochs_name = run.epoch_counter()
        self._logs = run.step_log()
        self._in_outputs = run.values_in_outputs
        self._trainer_norm = run.computes_grad_norm()
        self._scaled = run.scales_gradients()
        self._lrs, self._lr_groups, self._lr_values, self._lr_now = None, None, (), {}
        self._lr_changes = [(0, {})]
        self._norm_next, self._norm_on = -math.inf, False
        self.attempted = self.taken = 0
        self._rows, self._extra = [], None
        self._before = int(trainer.global_step)
        self._flush_at = time.perf_counter() + self.every_s
        self._running = True
        if self._scaled:  # skipped steps are counted (the instability check reads them)
            self._set_hook("on_before_optimizer_step", self.on_before_optimizer_step, False)
            self._handles = [
                optimizer.register_step_post_hook(self._count_taken)
                for optimizer in trainer.optimizers
            ]

    def on_train_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        # Telemetry gave its norm_of by now (or none: nothing is reported from this process).
        self._norming = self.norm_of is not None and not self._trainer_norm
        if self._norming:
            self._set_hook("on_before_optimizer_step", self.on_before_optimizer_step, False)
        self._switch_norm(True)  # the first step's norm is due

    def on_train_epoch_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.trained = 0

    def on_train_epoch_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush()

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._stop()

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        self._stop()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._stop()

    # ------------------------------------------------------------------ per batch

    def on_train_batch_start(
        self, trainer: TrainerHost, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        # All of this runs at every training batch: plain reads and writes and a few calls
        # into C; a Python call only for what is rare.
        now = time.perf_counter()
        clock = self.clock
        last = clock.last_end
        if last is not None:
            clock.data_wait_total += now - last
        clock.batch_start = now
        self.batch = batch
        self.batch_idx = self.trained = batch_idx
        pending = self._pending
        if pending:  # the index list the sampler yielded for this batch
            ids = pending.popleft()
            if type(ids) is list:
                slot = self._slot
                slot.n, slot.values = len(ids), None  # type: ignore[union-attr]
            else:
                ids = self._open(batch, ids)
        else:
            ids = self._open(batch, None)
        self._ids = ids
        groups = self._lr_groups
        if (
            groups is None
            or len(groups) != self._lr_count
            or tuple(map(_LR, groups)) != self._lr_values
        ):
            self._read_lrs(trainer)
        if self._watching:
            self.samples.enter_watch()  # type: ignore[union-attr]
        session = self.session
        if self.attend or session.inbox.waiting or session.state != "running":
            for hook in self.boundary_start:
                hook(trainer, pl_module, batch, batch_idx)

    def on_train_batch_end(
        self, trainer: TrainerHost, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        now = time.perf_counter()
        clock = self.clock
        start = clock.batch_start
        if start is not None:
            clock.step_time_total += now - start
            clock.steps += 1
        clock.last_end = now
        trained = self.trained = batch_idx + 1
        for loader in self._counted:
            iterator = loader.iterator
            if iterator is not None:
                iterator.trained = trained
        ids, values = self._ids, None
        if ids is not None:
            slot = self._slot
            if slot is not None:
                values = slot.values
                slot.values = CLOSED
            if (
                values is None
                or self._watching
                or type(outputs) is not dict
                or "per_sample_loss" in outputs
            ):
                values = self._settle(outputs, values)
        if type(outputs) is dict:
            loss = outputs.get("loss")
            logged = self._in_outputs and len(outputs) > 1
        else:
            loss, logged = outputs, False
        extra = self._extra
        if extra is not None or logged or self._logs or self._trainer_norm:
            self._extra = None
            extra = self._step_extra(outputs, extra)
        rows = self._rows
        rows.append((getattr(self._counter, self._counter_name), loss, ids, values, extra))
        if len(rows) >= self.every_steps or now >= self._flush_at:
            self._flush(now)
        if self._norming and self._norm_on is not (now >= self._norm_next):
            self._switch_norm(not self._norm_on)
        session = self.session
        if self.attend or session.inbox.waiting or session.state != "running":
            for hook in self.boundary_end:
                hook(trainer, pl_module, outputs, batch, batch_idx)

    def on_before_optimizer_step(
        self, trainer: TrainerHost, pl_module: Any, optimizer: Any
    ) -> None:
        """On for the steps whose gradient norm is due, and under a grad scaler."""
        if self._scaled:
            self.attempted += 1
        norm_of = self.norm_of
        if not self._norm_on or norm_of is None:
            return
        self._norm_next = (self.clock.batch_start or time.perf_counter()) + self.norm_every_s
        lrs = self._lrs
        index = 0 if lrs is None else _position(lrs.optimizers, optimizer)
        norms = norm_of(optimizer)
        if norms is not None:
            extra = self._extra if self._extra is not None else {}
            extra["grad_norm" if index == 0 else f"grad_norm/opt{index}"] = norms
            self._extra = extra

    def leave_watch(self, trainer: TrainerHost, pl_module: Any, optimizer: Any) -> None:
        """``on_before_zero_grad`` while functional losses are watched: the step's loss is
        computed, the rest of the step is not watched."""
        if self.samples is not None:
            self.samples.leave_watch()

    def before_backward(self, trainer: TrainerHost, pl_module: Any, loss: Any) -> None:
        """``on_before_backward`` while functional losses are watched or read from the loss
        backpropagated (see :meth:`SampleSource.before_backward`)."""
        if self.samples is not None:
            self.samples.before_backward(loss)

    def take_open_samples(self) -> tuple[Any, Any] | None:
        """The ids and per-sample values of a batch trained on whose end hook has not run
        yet (``None``: none); that batch's row is then recorded without them."""
        ids, slot = self._ids, self._slot
        if ids is None or slot is None or slot.values is None or slot.values is CLOSED:
            return None
        values, slot.values = slot.values, CLOSED
        self._ids = None
        return ids, values

    # ------------------------------------------------------------------ hand-over

    def flush(self) -> None:
        """Hand every recorded row to the readers now (epoch end, pause, test, end of run)."""
        self._flush(time.perf_counter())

    def _flush(self, now: float) -> None:
        self._flush_at = now + self.every_s
        rows = self._rows
        if not rows:
            return
        # The epoch counter moves on only after an epoch's end hooks, where rows are handed
        # over: it holds the epoch of every row here (also of an epoch resumed mid-way).
        epoch = int(getattr(self._epochs, self._epochs_name))
        self.clock.samples += sum([len(row[2]) for row in rows if row[2] is not None])
        segment = Segment(rows, epoch, self._before, self._lr_changes)
        self._rows = []
        self._lr_changes = [(0, self._lr_now)]
        self._before = rows[-1][0]
        for reader in self.readers:
            reader(segment)

    # ------------------------------------------------------------------ rare paths

    def _read_lrs(self, trainer: TrainerHost) -> None:
        """The learning rates changed (or are read for the first time, or cannot be compared
        without a sync): record them from this batch on."""
        lrs = self._lrs
        optimizers = trainer.optimizers
        if not optimizers:
            return
        if lrs is None or not lrs.current(optimizers):
            lrs = self._lrs = LearningRates(optimizers)
            # One optimizer of float rates (the usual case) is compared at each batch start.
            self._lr_groups = lrs.first if lrs.single else None
            self._lr_count = lrs.first_size
        values = tuple(map(_LR, lrs.groups))
        if not lrs.single or values != self._lr_values:
            self._lr_values = values
            self._lr_changed(lrs.named(values))

    def _lr_changed(self, named: dict[str, Any]) -> None:
        self._lr_now = named
        changes, index = self._lr_changes, len(self._rows)
        if changes[-1][0] == index:
            changes[-1] = (index, named)
        else:
            changes.append((index, named))

    def _step_extra(self, outputs: Any, extra: dict[str, Any] | None) -> dict[str, Any] | None:
        run = self._driver
        if run is None:
            return extra
        found: dict[str, Any] = {}
        try:
            if self._logs or self._in_outputs:  # values the step logged
                found.update(run.step_values(outputs))
            if self._trainer_norm:
                norm = run.grad_norm()
                if norm is not None:
                    found["grad_norm"] = norm
        except Exception:
            # Recording is an aid: a trainer that keeps its values elsewhere (a Lightning
            # release that moved them) loses them for this run, once said, never raised.
            self._logs, self._trainer_norm = None, False
            log.warning("OnTheFly could not record a step; training goes on", exc_info=True)
        if extra:
            found.update(extra)
        return found or extra

    def _switch_norm(self, on: bool) -> None:
        on = on and self._norming and self._running
        self._norm_on = on
        if not self._scaled:  # (under a scaler it stays on to count the attempts)
            hook = self.on_before_optimizer_step if on else None
            self._set_hook("on_before_optimizer_step", hook, True)

    def _open(self, batch: Any, item: Any) -> Any:
        """A batch whose ids the sampler's recording did not give as a list: ask the tracker
        (iterable data, a single index), or count the batch's samples (nothing recorded)."""
        slot, samples = self._slot, self.samples
        ids = None
        if samples is not None and (item is not None or self._pending is None):
            ids = samples.ids_of(batch, item)
        if ids is not None and slot is not None:
            slot.n, slot.values = len(ids), None
        else:
            # Without ids the batch is counted here; with them, when the rows are handed over.
            self.clock.samples += batch_size(batch) or 0
        return ids

    def _settle(self, outputs: Any, values: Any) -> Any:
        samples = self.samples
        return values if samples is None else samples.settle(outputs, values)

    def _count_taken(self, *args: Any) -> None:
        self.taken += 1

    def _stop(self) -> None:
        if not self._running:
            return
        self.flush()
        self._running = False
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for name in OPTIONAL_HOOKS:
            self._set_hook(name, None, False)
        self._norm_on = self._norming = False
        self._ids = None
        self.batch = None


def _position(optimizers: Sequence[Any], optimizer: Any) -> int:
    return next((i for i, o in enumerate(optimizers) if o is optimizer), 0)


def _no_hook(name: str, hook: Hook | None, pulse: bool) -> None:
    """Without a trainer's hooks to switch, the optional hooks stay as they are."""
