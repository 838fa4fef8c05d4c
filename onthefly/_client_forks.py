"""The fork and merge commands of :class:`onthefly.client.Client`.

They run on the training thread at the next batch boundary (``fork``, ``merge`` and
``discard_merge`` need a paused run) and wait for as long as that takes. See
``docs/forks.md`` for the replies. Never imports torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class ForkCommands:
    """Mixed into :class:`~onthefly.client.Client`; every method returns the reply's data."""

    def _call(self, kind: str, **fields: Any) -> dict[str, Any]:
        raise NotImplementedError  # provided by Client

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

        Args:
            steps: the budget in optimizer steps (or ``epochs``, exactly one of the two).
            epochs: the budget in passes over the slice.
            selection: the slice: a named selection of the train split …
            indices: … or explicit dataset indices …
            name: the fork's name (default ``fork-<n>``).
            lr: learning rate (default: the run's current one).
            batch_size: instead of the training loader's.
            optimizer: ``"fresh"`` (the run's optimizer class and settings, no state) or
                ``"clone"`` (its state too).
            adapter_rank: train only low-rank adapters of this rank (for ``adapter`` merges).
            replay: the share of batches drawn from the rest of the training set, in
                ``[0, 1)``: a fork of a narrow slice (a few classes) then keeps the others.
            source: ``"training"`` or ``"scan"``: the data an inline criterion reads.
            **criterion: … or one criterion as in :meth:`select`: ``top=K``,
                ``loss_min``/``loss_max``, ``quantile=Q``, ``region=...``, ``clusters=K``.

        Returns:
            The fork's record: ``name, run, status`` (``done``, ``cancelled`` or ``failed``),
            ``steps, duration, slice_loss, parent_slice_loss, message, warnings``, …

        Example:
            >>> run.fork(selection="tail", steps=200, lr=1e-3)["slice_loss"]  # doctest: +SKIP
            0.41
        """
        return self._call(
            "fork",
            steps=steps,
            epochs=epochs,
            selection=selection,
            indices=None if indices is None else list(indices),
            name=name,
            lr=lr,
            batch_size=batch_size,
            optimizer=optimizer,
            adapter_rank=adapter_rank,
            replay=replay,
            source=source,
            **criterion,
        )

    def forks(self) -> dict[str, Any]:
        """The session's forks: ``{"forks": [{name, run, status, selection, budget, …}]}``."""
        return self._call("forks")

    def compare(
        self, *forks: str, rest_max: int = 10_000, baselines: bool = True
    ) -> dict[str, Any]:
        """The current model and ``forks`` (default: every fork with weights) on each fork's
        slice, the rest of the training set and the validation set.

        With ``baselines``, also copies of the current model trained for each fork's budget
        on the whole training set (``continue-<steps>``) and with the fork's slice
        oversampled (``oversample-<fork>``): what the same compute gives without a fork.

        Returns:
            ``{targets: [{name, kind, split, samples}], rows: [{model, run, kind, loss,
            accuracy}], notes}`` with ``loss`` and ``accuracy`` aligned with ``targets``.
        """
        return self._call("compare", forks=list(forks), rest_max=rest_max, baselines=baselines)

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

        Args:
            method: ``soup``, ``greedy``, ``fisher``, ``distill`` or ``adapter``.
            forks: the forks' names.
            name: the merge's name (default ``merge-<n>``).
            weights: ``soup``: one per model, the parent first; ``adapter``: one per fork
                (default: chosen on the grid).
            optimizer: ``"keep"`` the run's optimizer state, or ``"reset"`` it.
            steps: ``distill``: optimizer steps.
            lr: ``distill``: learning rate (default: the run's current one).
            temperature: ``distill``: softmax temperature (default: chosen on the grid).
            strength: ``distill``: weight of the distillation loss (default: on the grid).
            tolerance: how much worse on validation (relative to the parent's error rate,
                else its loss) an applied merge may be.
            force: apply the merge even when it fails that check.
            rest_max: samples of the rest of the training set used by the report.

        Returns:
            ``{name, run, applied, gate, reason, method, forks, kept, choice, grid,
            optimizer, targets, before, after, …}``.

        Example:
            >>> run.merge("fisher", ["hard"])["after"]["loss"]  # doctest: +SKIP
            [0.52, 0.21, 0.33]
        """
        return self._call(
            "merge",
            method=method,
            forks=list(forks),
            name=name,
            weights=None if weights is None else list(weights),
            optimizer=optimizer,
            steps=steps,
            lr=lr,
            temperature=temperature,
            strength=strength,
            tolerance=tolerance,
            force=force,
            rest_max=rest_max,
        )

    def discard_merge(self) -> dict[str, Any]:
        """Undo the latest merge (weights and optimizer state) while the run is still paused."""
        return self._call("discard_merge")

    def lineage(self) -> dict[str, Any]:
        """The session's models as a DAG: ``{active, nodes, edges}``."""
        return self._call("lineage")
