"""SampleTracker: every training sample's loss, attributed to its dataset index, for free.

During ``fit`` it records the per-sample losses that the training step's own loss call
yields (see :mod:`onthefly.samples.capture`), seen through taps on the run's loss
modules (:class:`~onthefly.samples.slot.LossTap`) or, for functional losses, a function mode
active during the step (:class:`~onthefly.samples.loss_mode.LossMode`); a step may also
return ``per_sample_loss``. It pairs them with the samples' dataset indices
(:mod:`onthefly.samples.attribution`) and folds them into the run's per-sample store and
Parquet history: the values travel to the host in batches, never with a host sync per step.
It also answers the per-sample commands (``scan``, ``histogram``, ``select``, …; see
``docs/per-sample.md``).

It has no hook at a training step: the run's
:class:`~onthefly.callbacks._recorder.Recorder` takes each batch's ids from the sampler's
recording, opens the slot the loss call reports to, and hands the batches over in
segments. Per training batch that is a few attribute writes and, where the loss is not
left to the copy to the host, one evaluation of the loss function alone with
``reduction="none"``; it never runs the model.

In a distributed run every rank records its own samples; the other ranks send theirs to
rank 0 at the data exchanges of :class:`~onthefly.distributed.control.RankSync` (about every
64 batches, and before a pause, a command or the end), so rank 0's store holds every rank's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import torch
from lightning.pytorch import Callback

from onthefly.batches import batch_size
from onthefly.callbacks._recorder import Recorder, Segment
from onthefly.callbacks.session import RunSession
from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.samples import sources
from onthefly.samples.attribution import Counter, Ids, SamplerTaps, ids_from_batch
from onthefly.samples.buffer import Chunk, SampleBuffer, Shipment, read
from onthefly.samples.capture import SampleValues, backward_values
from onthefly.samples.commands import register_commands
from onthefly.samples.history import HistoryWriter
from onthefly.samples.loss_mode import LossMode
from onthefly.samples.loss_spec import FUNCTIONAL_LOSSES, LossSpec, describe_loss
from onthefly.samples.preview import Describe
from onthefly.samples.scan import EmbeddingFn
from onthefly.samples.selection import Selections
from onthefly.samples.slot import CLOSED, LossTap, Slot, arm
from onthefly.samples.store import SampleStore

log = logging.getLogger(__name__)

GIVE_UP_AFTER = 8
"""Training batches in a row without per-sample values before the functional calls are no
longer watched (and commands say why nothing is recorded)."""

PER_SAMPLE_KEY = "per_sample_loss"
"""A training step's output key for per-sample losses it computed itself (``Tensor[B]``)."""


class SampleTracker(Callback):
    """Records per-sample training losses and answers the per-sample commands.

        Args:
            session: the run's shared session.
            recorder: the run's per-batch recorder (it hands over the training batches).
            inputs: returns what the user gave besides the trainer (loss function, loaders).
            embedding_fn: ``fn(model, batch) -> Tensor[B, D]``, a per-sample embedding used by
                scans for clustering and the data explorer; ``None`` uses small model outputs.
            describe_sample: ``fn(index) -> str | image`` (or ``fn(index, split)``): what the
                dashboard shows of a sample (``sample_preview``); ``None`` shows the dataset's
                item itself (see :mod:`onthefly.samples.preview`).
            flush_every_steps: copy buffered values to the host every this many batches …
            flush_every_s: … or this many seconds, whichever comes first.

        Example:
            >>> from onthefly.callbacks._recorder import Recorder, Segment
    from onthefly.callbacks.session import RunSession
            >>> tracker = SampleTracker(RunSession("demo"))  # usually created by ``OnTheFly``
    """

    def __init__(
        self,
        session: RunSession,
        recorder: Recorder,
        inputs: Callable[[], Any] = lambda: None,
        embedding_fn: EmbeddingFn | None = None,
        describe_sample: Describe | None = None,
        flush_every_steps: int = 64,
        flush_every_s: float = 0.5,
    ) -> None:
        self.session = session
        self._recorder = recorder
        self.inputs = inputs
        self.embedding_fn = embedding_fn
        self.describe = describe_sample
        self.store = SampleStore()
        self.selections = Selections()
        self._buffer = SampleBuffer(self._receive, flush_every_steps, flush_every_s)
        self._taps = SamplerTaps()
        self._indexed = False
        self._counter = Counter()
        self._loss_taps: list[LossTap] = []
        self._mode = LossMode()
        self._watch = False  # enter the mode for the next training batch
        # Read each batch's values from the loss backpropagated (no mode): on once a watched
        # batch's loss call proved to be that loss's NLL node, off for good after a miss.
        self._backward = False
        self._backward_lost = False
        self._misses = 0  # batches in a row without per-sample values
        self._history: HistoryWriter | None = None
        self._unwrap_source: Callable[[], None] | None = None
        self._specs: dict[int, LossSpec | None] = {}  # loss descriptions, made once
        # One slot, armed for the whole run and opened at each batch's start (values None),
        # closed at its end: a new object and two thread-local writes per step cost more.
        self._batch_slot = Slot(0, CLOSED, specs=self._specs)
        self._trainer: Any = None
        self._warned = False
        self._outbox: list[Chunk] | None = None  # another rank's values, until sent to rank 0
        recorder.readers.append(self._receive_segment)
        session.on_quiet(self.flush)
        session.ranks.exchange.provide("samples", self._send)
        session.ranks.exchange.consume("samples", self._receive_sent)
        register_commands(session, self)

    # ------------------------------------------------------------------ lifecycle

    def setup(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        other_rank = self.session.ranks.active and not trainer.is_global_zero
        if stage == "fit" and (self.session.active or other_rank):
            self._start(trainer)

    def on_fit_end(self, trainer: TrainerHost, pl_module: Any) -> None:
        self.flush()

    def teardown(self, trainer: TrainerHost, pl_module: Any, stage: str) -> None:
        if stage == "fit":
            self._stop()

    def on_exception(self, trainer: TrainerHost, pl_module: Any, exception: BaseException) -> None:
        self._stop()

    # ------------------------------------------------------------------ training

    def on_train_epoch_start(self, trainer: TrainerHost, pl_module: Any) -> None:
        self._counter = Counter()

    # ------------------------------------------------------------------ the recorder's

    def ids_of(self, batch: Any, item: Any) -> Ids | None:
        """The ids of ``batch``: ``item`` is what the sampler's recording gave for it (a
        single index, or a sequence other than a list), or ``None`` when it has none."""
        if item is None:
            return self._unindexed_ids(batch)
        return [item] if isinstance(item, int) else item

    def settle(self, outputs: Any, values: SampleValues | None) -> SampleValues | None:
        """The batch's values at its end: those the step returned (``per_sample_loss``) win
        over the slot's; without any, functional loss calls are watched from the next batch."""
        if self._mode.active:
            self._mode.leave()
        returned = None
        if type(outputs) is not dict or PER_SAMPLE_KEY in outputs:  # the usual step: neither
            returned = _returned_values(outputs, self._batch_slot.n)
        values = returned or values
        if values is None or returned is not None or self._misses:
            self._adapt(returned is not None, values is not None)  # else nothing would change
        return values

    def enter_watch(self) -> None:
        """Watch the functional loss calls of the batch that starts (if they are watched)."""
        if self._watch:
            self._mode.enter()

    def leave_watch(self) -> None:
        """The batch's loss is computed (or it ended): stop watching."""
        if self._mode.active:
            self._mode.leave()

    def before_backward(self, loss: Any) -> None:
        """The batch's loss is about to be backpropagated: stop watching. Once a watched
        batch's values prove to be those its loss's graph holds, the next batches' values
        are read from their loss's graph instead: watching costs a little at every torch call
        of the forward pass (~90 µs a step on the small MLP of the benchmarks)."""
        slot = self._batch_slot
        if self._backward:  # at every step: no further call unless the slot is empty
            if slot.values is None:
                slot.values = backward_values(loss, slot.n)
            return
        self.leave_watch()
        if self._watch and not self._backward_lost and slot.kept_from(loss):
            self._set_watch(False, 0, backward=True)

    def _receive_segment(self, segment: Segment) -> None:
        if self._history is None and self._outbox is None:  # not tracking
            return
        before, epoch, batches = segment.before, segment.epoch, []
        for step, _, ids, values, _ in segment.rows:
            if ids is not None and values is not None:
                # The optimizer step the batch counts to, as telemetry numbers it: the step
                # after it, also for the micro-batches of a window that has not stepped yet.
                batches.append((step if step > before else before + 1, epoch, ids, values))
            before = step
        if batches:
            self._buffer.add_all(batches)

    # ------------------------------------------------------------------ public

    def flush(self) -> None:
        """Bring every recorded value into the store and the history files now."""
        self._recorder.flush()
        self._buffer.flush()
        if self._history is not None:
            self._history.flush()

    def sync(self) -> None:
        """Bring every recorded value into the store now (queries read it right after)."""
        self._recorder.flush()
        self._buffer.flush()
        if self._history is not None:
            self._history.sync()

    def indices(self, name: str) -> list[int]:
        """The dataset indices of the selection ``name``, highest loss first.

        Raises:
            ConfigurationError: there is no selection of that name.
        """
        return self.selections.indices(name)

    def state_dict(self) -> dict[str, Any]:
        self._recorder.flush()  # the batches recorded before the open one come first
        self._settle()
        self.sync()
        return {"store": self.store.state_dict(), "selections": self.selections.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.store.load_state_dict(state_dict.get("store", {}))
        self.selections.load_state_dict(state_dict.get("selections", {}))

    # ------------------------------------------------------------------ helpers

    def _start(self, trainer: TrainerHost) -> None:
        self._trainer = trainer
        if self.session.active:
            self._history = HistoryWriter(
                self.session.workdir / "samples" / "history", fold=self._fold
            )
        else:  # another rank of a distributed run: rank 0 keeps the values
            self._outbox = []
        # The native default step reports its loss call itself: no tap on the given loss
        # then, nor a watch on the functions it calls, when that report gives values.
        inputs = self.inputs()
        reported = driver(trainer).reports_loss_calls() and (
            describe_loss(sources.loss_fn(trainer, inputs)) is not None
        )
        modules = sources.loss_modules(trainer, inputs, given=not reported)
        taps = [LossTap(m) for m in modules if describe_loss(m) is not None]
        self._loss_taps = [tap for tap in taps if tap.active]
        # Without a loss module to hook, watch the step's functional calls from the start.
        self._backward_lost = False
        self._set_watch(not (self._loss_taps or reported), 0)
        self.store.unrecorded = None
        # Lightning creates the training iterator (and prefetches) before any callback hook
        # sees the loader, so the sampler is instrumented as the trainer requests it.
        self._unwrap_source = driver(trainer).on_train_loaders_requested(self._on_loaders)
        if self._unwrap_source is None:
            log.warning("OnTheFly cannot reach Lightning's training loader; no attribution")
        self._batch_slot.values = CLOSED
        arm(self._batch_slot)  # on the training thread, where setup runs
        self._track()

    def _on_loaders(self, requested: Any) -> None:
        self._indexed = self._taps.install(sources.first_loader(requested))
        self._track()

    def _track(self) -> None:
        """Tell the recorder where each batch's ids and values come from."""
        if self._history is None and self._outbox is None:
            return
        pending = self._taps.recorder.pending if self._indexed else None
        self._recorder.track_samples(self, self._batch_slot, pending)

    def _stop(self) -> None:
        self._mode.leave()
        arm(None)
        self._recorder.track_samples(None, None, None)
        self._set_watch(False, 0)
        self._buffer.flush()
        self._taps.remove()
        self._indexed = False
        if self._unwrap_source is not None:
            self._unwrap_source()
            self._unwrap_source = None
        for tap in self._loss_taps:
            tap.remove()
        self._loss_taps = []
        if self._history is not None:
            self._history.close()
            self._history = None
        self._outbox = None
        self._trainer = None

    def _settle(self) -> None:
        """Record a batch that was trained on but whose end hook has not reached OnTheFly
        yet (a Lightning callback placed before it exports from its own batch end), so that
        a saved state holds every batch the data position counts as trained."""
        trainer = self._trainer
        open_batch = self._recorder.take_open_samples() if trainer is not None else None
        if open_batch is None:
            return
        ids, values = open_batch
        self._buffer.add(int(trainer.global_step), int(trainer.current_epoch), ids, values)

    def _unindexed_ids(self, batch: Any) -> Ids:
        """The ids of a batch whose loader has no index sampler to record."""
        n = batch_size(batch)
        keyed = ids_from_batch(batch, n)
        return keyed if keyed is not None else self._counter.take(n)

    def _send(self, force: bool) -> list[Chunk] | None:
        """Another rank: the values to send rank 0 now (``force``: all of them)."""
        if self._outbox is None:
            return None
        if force:
            self._buffer.flush()
        sent, self._outbox = self._outbox, []
        return sent or None

    def _receive_sent(self, rank: int, chunks: list[Chunk]) -> None:
        for chunk in chunks:
            self._receive(chunk)

    def _receive(self, shipment: Shipment) -> None:
        # On the training thread, once per shipment (64 batches): only references are kept.
        # Reading the shipment (a few NumPy and torch calls), folding it into the statistics
        # and writing it wait for the history thread, which takes many shipments at once
        # (see onthefly.samples.history).
        if self._history is not None:
            self._history.add(shipment)
            return
        if self._outbox is not None:  # another rank: what it sends to rank 0 is read here
            chunk = read([shipment])
            if chunk is not None:
                self._outbox.append(chunk)

    def _fold(self, chunk: Chunk) -> None:
        """On the history thread: fold ``chunk`` into the store (queries wait for it: sync)."""
        self.store.training.update(chunk)

    def _adapt(self, returned: bool, recorded: bool) -> None:
        """Watch the functional calls only while they are the way to per-sample values."""
        if returned:  # the step gives its own values: nothing to watch
            self._set_watch(False, 0)
            return
        if recorded:
            self._set_watch(self._watch, 0, self._backward)
            return
        if self._backward:  # this batch's loss held no such node: watch the calls again
            self._backward_lost = True
        misses = self._misses + 1
        if not self._watch and misses == 1:
            # The tapped loss modules were not called: try the functions.
            self._set_watch(True, misses)
        elif misses == GIVE_UP_AFTER:
            self._set_watch(False, misses)  # it costs a little per torch call: stop looking
            self._explain(self._mode.seen)
        else:
            self._set_watch(self._watch, misses)

    def _set_watch(self, watch: bool, misses: int, backward: bool = False) -> None:
        if watch != self._watch or backward != self._backward:
            self._recorder.watch_hooks(watch, backward)
        self._watch, self._misses, self._backward = watch, misses, backward
        # Watching, or after a batch without values, every batch's end settles its values.
        self._recorder.watching(watch or misses > 0)

    def _explain(self, seen: bool) -> None:
        why = (
            "the training step's first loss call gave values that do not split into the "
            "batch's samples"
            if seen
            else "the training step calls no recognised loss (a torch.nn loss module, "
            + ", ".join(sorted(f"F.{fn.__name__}" for fn in FUNCTIONAL_LOSSES))
            + ")"
        )
        self.store.unrecorded = (
            f"no per-sample training loss is recorded: {why}; return {PER_SAMPLE_KEY!r} "
            "(a Tensor[batch]) from the training step, or give the loss module as loss_fn= "
            "(see docs/per-sample.md)"
        )
        if not self._warned:
            self._warned = True
            log.info("OnTheFly: %s", self.store.unrecorded)


def _returned_values(outputs: Any, n: int) -> SampleValues | None:
    value = outputs.get(PER_SAMPLE_KEY) if isinstance(outputs, Mapping) else None
    if isinstance(value, torch.Tensor) and value.numel() == n:
        return SampleValues(value.detach().reshape(n).float())
    return None
