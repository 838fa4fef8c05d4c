"""The per-sample commands, answered on the training thread at a batch boundary.

``scan`` runs the model (so it must run where the model is quiet); the queries read the
store, which the training thread owns. Errors map to protocol codes: ``invalid_state`` when
the data is not there yet (never scanned, nothing trained), ``unsupported`` when this run
cannot do it (no loader, no loss function, a missing extra, an invalid criterion or path),
``file_error`` when an export cannot be written (a full disk) or its file exists.

While a scan runs, the training thread does not drain the inbox; the scan looks at it
before each batch instead (:class:`~onthefly.commands.interrupts.Interrupts`): a
``cancel`` stops the scan, anything else waits and is run in order once the scan ends.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
from torch.utils.data import DataLoader, IterableDataset

from onthefly.commands.interrupts import Inbox, Interrupts
from onthefly.commands.registry import Boundary
from onthefly.drivers import driver
from onthefly.drivers.base import distributed
from onthefly.errors import ConfigurationError
from onthefly.protocol import (
    Cancelled,
    CancelReply,
    DataMapReply,
    EventBody,
    ExplorerReply,
    ExportSelectionReply,
    HistogramReply,
    QuantilesReply,
    RowsReply,
    SamplePreviewReply,
    ScanProgressBody,
    ScanReply,
    SelectionsReply,
    SelectReply,
    Split,
)
from onthefly.samples import explorer, export, preview, queries, sources
from onthefly.samples.loss_spec import describe_loss
from onthefly.samples.preview import Describe
from onthefly.samples.scan import EmbeddingFn, Progress, run_scan
from onthefly.samples.selection import Criterion, Selection, Selections, choose
from onthefly.samples.store import NoData, SampleStore, SampleView

if TYPE_CHECKING:
    from onthefly.server import PendingCommand


class SampleSession(Inbox, Protocol):
    """The run's session as the per-sample commands use it."""

    def quiesce(self) -> None:
        """Everything buffered so far reaches the server."""
        ...

    def publish(self, event: EventBody) -> None:
        """Send one event of the main run."""
        ...


class SampleHost(Protocol):
    """The part that records per-sample losses (``SampleTracker``), as its commands see it."""

    store: SampleStore
    selections: Selections
    inputs: Callable[[], Any]
    embedding_fn: EmbeddingFn | None
    describe: Describe | None

    @property
    def session(self) -> SampleSession:
        """The run's session."""
        ...

    def sync(self) -> None:
        """Bring the store up to date with what the training thread recorded."""
        ...


Handler = Callable[[SampleHost, Boundary, "PendingCommand"], None]


def _answering(handler: Handler) -> Handler:
    """Turn the expected failures of a handler into protocol errors."""

    @functools.wraps(handler)
    def answer(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
        try:
            handler(tracker, boundary, cmd)
        except NoData as exc:
            cmd.fail("invalid_state", str(exc))
        except (ConfigurationError, ValueError) as exc:
            cmd.fail("unsupported", str(exc))

    return answer


# ---------------------------------------------------------------------------- scan


@_answering
def _scan(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    trainer, session = boundary.trainer, tracker.session
    split: Split = getattr(cmd.command, "split", "train")
    if distributed(trainer):
        raise ConfigurationError(
            "scans in the middle of a distributed run are not supported: every rank would have "
            "to evaluate at the same boundary"
        )
    inputs = tracker.inputs()
    loader = sources.split_loader(trainer, inputs, split)
    if loader is None:
        raise ConfigurationError(f"this run has no {split} loader to scan; pass it to fit()")
    loss_fn = sources.loss_fn(trainer, inputs)
    if loss_fn is None:  # a loss module the model holds (``self.loss = nn.CrossEntropyLoss()``)
        loss_fn = next(iter(sources.loss_modules(trainer, inputs)), None)
    spec = describe_loss(loss_fn)
    if spec is None:
        raise ConfigurationError(
            "a scan needs the loss function with a 'reduction' option (e.g. nn.CrossEntropyLoss); "
            "pass loss_fn= to fit() / attach_lightning / OnTheFly"
        )
    session.quiesce()  # the stream shows the training steps before the scan

    def progress(state: Literal["running", "done", "cancelled"], p: Progress) -> None:
        session.publish(
            ScanProgressBody(
                split=split, state=state, done=p.done, total=p.total, elapsed=p.elapsed
            )
        )

    interrupts = Interrupts(session, split=split)
    progress("running", Progress(0, None, 0.0))
    try:
        result = run_scan(
            trainer.lightning_module,
            loader,
            spec,
            split=split,
            step=int(trainer.global_step),
            epoch=int(trainer.current_epoch),
            embedding_fn=tracker.embedding_fn,
            on_progress=functools.partial(progress, "running"),
            cancelled=interrupts.check,
            batch_keys=driver(trainer).batch_keys(),
        )
        if result is None:
            progress("cancelled", Progress(0, None, 0.0))
            cmd.reply(Cancelled(cancelled=True, split=split))
            return
        tracker.store.scans[split] = result
        progress("done", Progress(len(result.ids), len(result.ids), result.duration))
        view = tracker.store.view(split, "scan")
        cmd.reply(
            ScanReply(
                **queries.header(view),
                cancelled=False,
                duration=result.duration,
                samples_per_s=len(result.ids) / result.duration if result.duration > 0 else None,
                **queries.summary(view),
            )
        )
    finally:
        interrupts.replay(boundary)


def _cancel(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    # A cancel that reaches the registry found no scan running (a scan consumes its own).
    cmd.reply(CancelReply(cancelled=False))


# ---------------------------------------------------------------------------- queries


def _view(tracker: SampleHost, cmd: PendingCommand) -> SampleView:
    command = cmd.command
    tracker.sync()
    return tracker.store.view(getattr(command, "split", "train"), getattr(command, "source", None))


@_answering
def _histogram(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    view = _view(tracker, cmd)
    cmd.reply(HistogramReply(**queries.histogram(view, command.bins, command.min, command.max)))


@_answering
def _quantiles(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    cmd.reply(QuantilesReply(**queries.quantiles(_view(tracker, cmd), command.q)))


def criterion_of(command: Any) -> Criterion:
    """The selection criterion a ``select`` command asks for (it holds exactly one)."""
    if command.top is not None:
        return Criterion("top", k=command.top)
    if command.quantile is not None:
        return Criterion("quantile", q=command.quantile)
    if command.region is not None:
        return Criterion(
            "region",
            region=command.region,
            fraction=command.fraction,
            size=command.size,
            with_correctness=command.with_correctness,
        )
    if command.box_given():
        return Criterion(
            "box",
            confidence=(command.confidence_min, command.confidence_max),
            variability=(command.variability_min, command.variability_max),
        )
    if command.clusters is not None:
        return Criterion("cluster", k=command.clusters, cluster=command.cluster)
    return Criterion("range", loss_min=command.loss_min, loss_max=command.loss_max)


@_answering
def _select(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    view = _view(tracker, cmd)
    criterion = criterion_of(command)
    rows, extra = choose(view, criterion)
    chosen = view.take(rows)
    selection = Selection(
        name=command.name or criterion.default_name(),
        split=view.split,
        source=view.source,
        step=view.step,
        criterion=criterion.describe(),
        ids=chosen.ids,
    )
    tracker.selections.add(selection)
    preview = queries.page(chosen, 0, 20, "loss", True)
    cmd.reply(
        SelectReply.model_validate(
            {**queries.summary(chosen), **selection.summary(), **extra, "preview": preview}
        )
    )


def _selections(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    cmd.reply(SelectionsReply.model_validate({"selections": tracker.selections.summaries()}))


def _selection_view(tracker: SampleHost, name: str) -> tuple[Selection, SampleView]:
    selection = tracker.selections.get(name)
    tracker.sync()
    view = tracker.store.view(selection.split, selection.source)  # type: ignore[arg-type]
    return selection, view.take(view.positions(selection.ids))


@_answering
def _selection_rows(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    selection, view = _selection_view(tracker, command.name)
    rows = queries.page(view, command.offset, command.limit, command.sort, command.descending)
    page = {"name": selection.name, "total": len(view), "offset": command.offset, "rows": rows}
    cmd.reply(RowsReply.model_validate(page))


@_answering
def _export_selection(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    target = f"{command.file or command.name} in {command.directory}"
    try:
        path = export.target_path(command.directory, command.file or command.name, command.format)
        selection, view = _selection_view(tracker, command.name)
        loader = sources.split_loader(boundary.trainer, tracker.inputs(), selection.split)
        dataset = loader.dataset if isinstance(loader, DataLoader) else None
        if isinstance(dataset, IterableDataset):
            dataset = None
        table = export.table(view, dataset, classes=bool(np.isfinite(view.correct).any()))
        size = export.write(table, path, command.format, command.overwrite)
    except FileExistsError as exc:
        cmd.fail("file_error", str(exc.strerror))
        return
    except OSError as exc:  # a full disk, no permission, a name too long: the run goes on
        cmd.fail("file_error", f"could not write {target}: {exc.strerror or exc}")
        return
    cmd.reply(
        ExportSelectionReply(
            name=selection.name,
            path=str(path),
            rows=table.num_rows,
            format=command.format,
            bytes=size,
        )
    )


@_answering
def _data_map(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    tracker.sync()
    view = tracker.store.view(command.split, "training")
    cmd.reply(DataMapReply(**queries.data_map(view, command.max_points)))


@_answering
def _explorer(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    view = tracker.store.view(command.split, "scan")
    projection = explorer.project(view, command.method, command.max_points)
    cmd.reply(
        ExplorerReply(
            **queries.header(view),
            method=projection.method,  # type: ignore[arg-type]  # "umap" or "pca"
            total=projection.total,
            index=projection.ids.tolist(),
            x=queries.floats(projection.x),
            y=queries.floats(projection.y),
            loss=queries.floats(projection.loss),
        )
    )


def _sample_preview(tracker: SampleHost, boundary: Boundary, cmd: PendingCommand) -> None:
    command: Any = cmd.command
    loader = sources.split_loader(boundary.trainer, tracker.inputs(), command.split)
    dataset = loader.dataset if isinstance(loader, DataLoader) else None
    if isinstance(dataset, IterableDataset):
        dataset = None
    shown = preview.previews(
        dataset, command.indices, command.size, split=command.split, describe=tracker.describe
    )
    cmd.reply(SamplePreviewReply(split=command.split, previews=shown))


HANDLERS: dict[str, Handler] = {
    "scan": _scan,
    "cancel": _cancel,
    "histogram": _histogram,
    "quantiles": _quantiles,
    "select": _select,
    "selections": _selections,
    "selection_rows": _selection_rows,
    "export_selection": _export_selection,
    "data_map": _data_map,
    "explorer": _explorer,
    "sample_preview": _sample_preview,
}


def register_commands(session: Inbox, tracker: SampleHost) -> None:
    """Register every per-sample command of ``tracker`` on ``session``."""
    for kind, handler in HANDLERS.items():
        session.commands.register(kind, functools.partial(handler, tracker))
