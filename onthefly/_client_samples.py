"""The per-sample commands of :class:`onthefly.client.Client` (scan, histogram, selections, …).

All of them run on the training thread at the next batch boundary, so they wait for as long
as that takes. See ``docs/per-sample.md`` for the replies. Never imports torch.
"""

from __future__ import annotations

from typing import Any


class SampleCommands:
    """Mixed into :class:`~onthefly.client.Client`; every method returns the reply's data."""

    def _call(self, kind: str, **fields: Any) -> dict[str, Any]:
        raise NotImplementedError  # provided by Client

    def scan(self, split: str = "train") -> dict[str, Any]:
        """Evaluate every sample of ``split`` with the current model (progress comes as
        ``scan_progress`` events); the reply summarises it (``cancelled`` when cancelled)."""
        return self._call("scan", split=split)

    def cancel(self) -> dict[str, Any]:
        """Cancel the scan in progress; ``{"cancelled": False}`` when none was running."""
        return self._call("cancel")

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
        return self._call("histogram", split=split, bins=bins, min=min, max=max, source=source)

    def quantiles(
        self, split: str = "train", q: list[float] | None = None, source: str | None = None
    ) -> dict[str, Any]:
        """Quantiles ``q`` (default 0.5, 0.9, 0.99) of the per-sample losses of ``split``."""
        return self._call("quantiles", split=split, q=q, source=source)

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
            >>> run.select(region="mislabeled", name="suspects")["size"]  # doctest: +SKIP
            151
        """
        return self._call("select", split=split, name=name, **criterion)

    def selections(self) -> dict[str, Any]:
        """The run's selections: ``{"selections": [{name, split, source, criterion, size}]}``."""
        return self._call("selections")

    def selection_rows(
        self,
        name: str,
        offset: int = 0,
        limit: int = 100,
        sort: str = "loss",
        descending: bool = True,
    ) -> dict[str, Any]:
        """A page of the selection ``name``: ``rows`` with index, loss, confidence, … ."""
        return self._call(
            "selection_rows",
            name=name,
            offset=offset,
            limit=limit,
            sort=sort,
            descending=descending,
        )

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
        return self._call(
            "export_selection",
            name=name,
            directory=directory,
            format=format,
            file=file,
            overwrite=overwrite,
        )

    def data_map(self, split: str = "train", max_points: int = 20_000) -> dict[str, Any]:
        """Confidence and variability per training sample (subsampled to ``max_points``)."""
        return self._call("data_map", split=split, max_points=max_points)

    def explorer(
        self, split: str = "train", method: str = "auto", max_points: int = 20_000
    ) -> dict[str, Any]:
        """A 2-D projection of the scanned split's embeddings: ``x``, ``y``, ``loss``, ``index``."""
        return self._call("explorer", split=split, method=method, max_points=max_points)
