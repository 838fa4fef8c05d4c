"""A Python client of a live session: :func:`connect` returns a :class:`Client`.

Every command is one plain method over :meth:`Client.request`, the single path to the
session (:class:`~onthefly.client.connection.Connection`). Never imports torch.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

from onthefly.client.connection import Connection, StreamMessage
from onthefly.client.resolve import find_session
from onthefly.server.discovery import SessionFile


class Client:
    """A connection to one live session; create it with :func:`connect`.

    Every command method returns the reply's ``data`` dict. Control commands (``pause``,
    ``set``, the per-sample and fork commands, …) take effect on the training thread at the
    next batch boundary, so they wait for as long as that takes; other commands wait at most
    ``timeout`` seconds. Replies: docs/per-sample.md, docs/forks.md, docs/sessions.md.

    Raises (from every command method):
        CommandError: the session answered with an error; ``.code`` is the protocol's code.
        SessionGone: the session ended before answering — the connection dropped, or the
            session answered ``session_closed`` (the run ended before the command took effect).
        TimeoutError: a non-control command got no answer within ``timeout``.
        ConfigurationError: an argument is out of range (nothing was sent).

    Example:
        >>> with onthefly.connect("mnist/baseline") as run:  # doctest: +SKIP
        ...     run.pause()["step"]
        118
    """

    def __init__(self, session: SessionFile, *, timeout: float = 10.0) -> None:
        self.session = session  # its discovery record
        self._connection = Connection(session, timeout)
        self.hello = self._connection.hello

    def request(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Send any command by its ``type`` and return its reply's data; fields left ``None``
        take the protocol's defaults.

        Example:
            >>> run.request("quantiles", split="val", q=[0.5])["quantiles"]  # doctest: +SKIP
            [0.31]
        """
        return self._connection.request(kind, **fields)

    def status(self) -> dict[str, Any]:
        """The main run's state (``running``/``paused``/``testing``/``finished``), step, epoch
        and latest metrics."""
        return self.request("status")

    def ping(self) -> dict[str, Any]:
        """A round trip through the session server (the training thread is not involved)."""
        return self.request("ping")

    def pause(self) -> dict[str, Any]:
        """Pause at the next batch boundary; the reply says at which ``step`` it took effect."""
        return self.request("pause")

    def resume(self, epochs: int | None = None, steps: int | None = None) -> dict[str, Any]:
        """Resume a paused run; ``epochs`` / ``steps`` more extend a run that reached its
        stop condition."""
        return self.request("resume", epochs=epochs, steps=steps)

    def stop(self) -> dict[str, Any]:
        """Stop the run at the next batch boundary, as ``trainer.should_stop`` would."""
        return self.request("stop")

    def test(self, label: str | None = None) -> dict[str, Any]:
        """Evaluate the test loader at the next boundary (labelled ``test_N`` unless ``label``)."""
        return self.request("test", label=label)

    def health(self, check: str) -> dict[str, Any]:
        """Run the health check ``check`` (``determinism``, ``gradients``, ``instability``,
        ``activations``, ``throughput`` or ``distribution``) at the next boundary; the reply
        is ``{check, step, findings: [{check, severity, summary, details}], duration}``."""
        return self.request("health", check=check)

    def set_hparams(
        self,
        lr: float | None = None,
        weight_decay: float | None = None,
        momentum: float | None = None,
        betas: tuple[float, float] | None = None,
        group: int | None = None,
        optimizer: int = 0,
        eps: float | None = None,
    ) -> dict[str, Any]:
        """Change optimizer hyperparameters at the next boundary (the ``set`` command).

        Each value is checked against the parameters' dtype and tried on a copy of the
        optimizer's step before anything changes.

        Args: the fields of :class:`~onthefly.protocol.SetHparams`: ``lr``,
        ``weight_decay``, ``momentum``, ``betas``, ``eps``; ``group`` ``None`` changes every
        param group of optimizer ``optimizer``.

        Returns:
            ``{step, changes: [{step, optimizer, group, name, old, new}]}``.

        Raises:
            CommandError: ``unsupported`` for a value the run cannot take (nothing changed).

        Example:
            >>> run.set_hparams(lr=1e-4, group=0)["changes"][0]["old"]  # doctest: +SKIP
            0.001
        """
        return self.request("set", **_fields(locals()))

    def export(self, path: str | os.PathLike[str], overwrite: bool = False) -> dict[str, Any]:
        """Write the whole session to the ``.otf`` file ``path`` at the next boundary
        (resolved against this process's directory, ``.otf`` appended when missing; its
        directory must exist). The reply is ``{path, size, step, epoch}``.

        Raises:
            CommandError: ``file_error``: the file exists (without ``overwrite``) or cannot
                be written.
        """
        return self.request("export", path=os.path.abspath(os.fspath(path)), overwrite=overwrite)

    def load_session(self, path: str | os.PathLike[str]) -> dict[str, Any]:
        """Load a session file's model, optimizer, scheduler and scaler state into the paused
        run (the ``import`` command; the run's step, data position and RNG go on as they are).
        """
        return self.request("import", path=os.path.abspath(os.fspath(path)))

    def checkpoints(self) -> dict[str, Any]:
        """The checkpoint ring: ``{"checkpoints": [{id, step, epoch, reason, time, size}],
        "capacity", "max_bytes"}``."""
        return self.request("checkpoints")

    def snapshot(self) -> dict[str, Any]:
        """Add a snapshot of the run to its checkpoint ring now; returns the new entry."""
        return self.request("snapshot")

    def restore(self, checkpoint: str) -> dict[str, Any]:
        """Load checkpoint ``checkpoint``'s model, optimizer, scheduler and scaler state into
        the paused run (ids from :meth:`checkpoints`)."""
        return self.request("restore", checkpoint=checkpoint)

    def history(
        self,
        metric: str,
        split: str = "train",
        start: int | None = None,
        end: int | None = None,
        max_points: int = 4000,
    ) -> dict[str, Any]:
        """A metric's series between steps ``start`` and ``end`` (inclusive), min/max-decimated
        to at most ``max_points`` points."""
        return self.request("history", **_fields(locals()))

    def watch(self) -> Iterator[StreamMessage]:
        """Subscribe and yield the stream as protocol models, in ``seq`` order, until the
        main run finishes (:meth:`Connection.watch <onthefly.client.connection.Connection.watch>`).

        Example:
            >>> for message in client.watch():  # doctest: +SKIP
            ...     if message.type == "metrics":
            ...         print(message.step, message.values)
        """
        return self._connection.watch()

    # ------------------------------------------------------------------ per-sample data

    def scan(self, split: str = "train") -> dict[str, Any]:
        """Evaluate every sample of ``split`` with the current model (progress comes as
        ``scan_progress`` events); the reply summarises it (``cancelled`` when cancelled)."""
        return self.request("scan", split=split)

    def cancel(self) -> dict[str, Any]:
        """Cancel the scan in progress; ``{"cancelled": False}`` when none was running."""
        return self.request("cancel")

    def histogram(
        self,
        split: str = "train",
        bins: int = 50,
        min: float | None = None,
        max: float | None = None,
        source: str | None = None,
    ) -> dict[str, Any]:
        """The per-sample loss histogram of ``split``: ``edges``, ``counts``, and how many
        samples fall ``below`` / ``above`` the range or are ``missing``."""
        return self.request("histogram", **_fields(locals()))

    def quantiles(
        self, split: str = "train", q: list[float] | None = None, source: str | None = None
    ) -> dict[str, Any]:
        """Quantiles ``q`` (default 0.5, 0.9, 0.99) of the per-sample losses of ``split``."""
        return self.request("quantiles", split=split, q=q, source=source)

    def select(
        self, split: str = "train", name: str | None = None, **criterion: Any
    ) -> dict[str, Any]:
        """Make a named selection by one criterion: ``top=K``, ``loss_min``/``loss_max``,
        ``quantile=Q``, ``region="easy"|"ambiguous"|"hard"|"mislabeled"`` (with ``fraction``
        or ``size``; ``with_correctness=True`` for ``mislabeled``), a box on the data map
        (``confidence_min``, ``confidence_max``, ``variability_min``, ``variability_max``),
        or ``clusters=K`` (with ``cluster``); ``source`` picks the data.

        Example:
            >>> run.select(split="val", quantile=0.9, name="tail")["size"]  # doctest: +SKIP
            100
        """
        return self.request("select", split=split, name=name, **criterion)

    def selections(self) -> dict[str, Any]:
        """The run's selections: ``{"selections": [{name, split, source, criterion, size}]}``."""
        return self.request("selections")

    def selection_rows(
        self,
        name: str,
        offset: int = 0,
        limit: int = 100,
        sort: str = "loss",
        descending: bool = True,
    ) -> dict[str, Any]:
        """A page of the selection ``name``: ``rows`` with index, loss, confidence, … ."""
        return self.request("selection_rows", **_fields(locals()))

    def export_selection(
        self,
        name: str,
        directory: str,
        format: str = "parquet",
        file: str | None = None,
        overwrite: bool = False,
    ) -> dict[str, Any]:
        """Write the selection ``name`` to ``directory`` (absolute) as csv, parquet or json;
        the reply holds the ``path``, ``rows`` and ``bytes`` written. A file already there is
        replaced only with ``overwrite`` (else ``file_error``)."""
        return self.request("export_selection", **_fields(locals()))

    def data_map(self, split: str = "train", max_points: int = 20_000) -> dict[str, Any]:
        """Confidence and variability per training sample (subsampled to ``max_points``)."""
        return self.request("data_map", **_fields(locals()))

    def explorer(
        self, split: str = "train", method: str = "auto", max_points: int = 20_000
    ) -> dict[str, Any]:
        """A 2-D projection of the scanned split's embeddings: ``x``, ``y``, ``loss``, ``index``."""
        return self.request("explorer", **_fields(locals()))

    # ------------------------------------------------------------------ forks and merges

    def fork(
        self,
        *,
        steps: int | None = None,
        epochs: int | None = None,
        selection: str | None = None,
        indices: Sequence[int] | None = None,
        name: str | None = None,
        lr: float | None = None,
        batch_size: int | None = None,
        optimizer: str = "fresh",
        adapter_rank: int | None = None,
        replay: float = 0.0,
        source: str | None = None,
        **criterion: Any,
    ) -> dict[str, Any]:
        """Train a copy of the paused model on a slice of the training set.

        Args: the fields of :class:`~onthefly.protocol.Fork`, each documented there: one
        slice (``selection``, ``indices`` or one criterion as in :meth:`select`) and one
        budget (``steps`` or ``epochs``).

        Returns:
            The fork's record: ``name, run, status`` (``done``, ``cancelled`` or ``failed``),
            ``steps, duration, slice_loss, parent_slice_loss, message, warnings``, …

        Example:
            >>> run.fork(selection="tail", steps=200, lr=1e-3)["slice_loss"]  # doctest: +SKIP
            0.41
        """
        return self.request("fork", **_fields(locals()))

    def forks(self) -> dict[str, Any]:
        """The session's forks: ``{"forks": [{name, run, status, selection, budget, …}]}``."""
        return self.request("forks")

    def compare(
        self, *forks: str, rest_max: int = 10_000, baselines: bool = True
    ) -> dict[str, Any]:
        """The current model and ``forks`` (default: every fork with weights) on each fork's
        slice, the rest of the training set and the validation set; with ``baselines``, also
        what the same compute gives without a fork (``continue-<steps>``,
        ``oversample-<fork>``). The reply is ``{targets, rows, notes}``, each row's ``loss``
        and ``accuracy`` aligned with ``targets``.
        """
        return self.request("compare", forks=list(forks), rest_max=rest_max, baselines=baselines)

    def merge(
        self,
        method: str,
        forks: Sequence[str],
        *,
        name: str | None = None,
        weights: Sequence[float] | None = None,
        optimizer: str = "keep",
        steps: int = 100,
        lr: float | None = None,
        temperature: float | None = None,
        strength: float | None = None,
        tolerance: float = 0.0,
        force: bool = False,
        rest_max: int = 10_000,
    ) -> dict[str, Any]:
        """Merge ``forks`` into the paused model; training resumes from the merged model.

        The merge is scored on validation first: one that is worse than the paused model
        beyond ``tolerance`` is reported (``applied: False``, ``reason``) and not applied
        unless ``force``. Weights, temperature and strength left ``None`` are chosen on
        validation from a small grid (the reply's ``choice`` and ``grid``).

        Args: the fields of :class:`~onthefly.protocol.Merge`, each documented there
        (``method``: ``soup``, ``greedy``, ``fisher``, ``distill`` or ``adapter``).

        Returns:
            ``{name, run, applied, gate, reason, method, forks, kept, choice, grid,
            optimizer, targets, before, after, …}``.

        Example:
            >>> run.merge("fisher", ["hard"])["after"]["loss"]  # doctest: +SKIP
            [0.52, 0.21, 0.33]
        """
        return self.request("merge", **_fields(locals()))

    def discard_merge(self) -> dict[str, Any]:
        """Undo the latest merge (weights and optimizer state) while the run is still paused."""
        return self.request("discard_merge")

    def lineage(self) -> dict[str, Any]:
        """The session's models as a DAG: ``{active, nodes, edges}``."""
        return self.request("lineage")

    def close(self) -> None:
        """Close the connection (idempotent); pending commands raise :class:`SessionGone`."""
        self._connection.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    run: str | None = None,
    *,
    home: str | os.PathLike[str] | None = None,
    timeout: float = 10.0,
) -> Client:
    """Connect to a live training session.

    Args:
        run: a run name, ``project/run`` or the session's port; may be omitted when exactly
            one session is live.
        home: the OnTheFly home whose discovery files to read (default ``$ONTHEFLY_HOME``,
            else ``~/.onthefly``).
        timeout: seconds to wait for the connection and for each non-control reply.

    Raises:
        SessionNotFound: no live session matches ``run`` (or it did not accept a connection).
        AmbiguousSession: several live sessions match ``run``.
        AuthenticationError: the session refused the token from its discovery file.

    Example:
        >>> import onthefly
        >>> with onthefly.connect("mnist/baseline") as run:  # doctest: +SKIP
        ...     print(run.status()["state"])
        running
    """
    return Client(find_session(run, home), timeout=timeout)


def _fields(arguments: dict[str, Any]) -> dict[str, Any]:
    # A command method's locals() as the command's fields: the signature stays typed and
    # every name is spelt once. ``self`` is dropped, ``**criterion`` spread, sequences listed.
    fields = {k: v for k, v in arguments.items() if k not in ("self", "criterion")}
    fields.update(arguments.get("criterion", {}))
    return {
        k: list(v) if isinstance(v, Sequence) and not isinstance(v, str) else v
        for k, v in fields.items()
    }
