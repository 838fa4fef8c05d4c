"""Merge weights chosen on held-out data from a small grid, as greedy soup chooses members.

A merge's free numbers decide whether it helps: a uniform soup of a parent and a fork that
fixed a slice is halfway between the two, an adapter folded with weight 1 is the fork
itself, a distillation at the wrong temperature copies a specialist's blind spots. Where the
user gave none, each candidate below is built and scored (``score(model)``: the validation
loss, lower is better) and the best one is kept:

* ``soup`` — the forks' total weight ``s`` in :data:`SOUP_SHARES` (the parent ``1 - s``,
  each of ``n`` forks ``s / n``; ``s = 1`` is the forks' own average);
* ``adapter`` — one fusion weight for every fork in :data:`ADAPTER_WEIGHTS`;
* ``distill`` — each temperature of :data:`DISTILL_TEMPERATURES` with each strength (the
  weight of the distillation loss) of :data:`DISTILL_STRENGTHS`: one distillation each;
* ``greedy`` chooses its members itself, ``fisher`` weighs by Fisher information: one
  candidate each.

Building a candidate never touches the run; only the best model is kept in memory.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from onthefly.forks.merging import Merged, MergeData, Options, merge

SOUP_SHARES = (0.25, 0.5, 0.75, 1.0)
"""The forks' total weight in a soup (the parent has the rest)."""

ADAPTER_WEIGHTS = (0.25, 0.5, 0.75, 1.0)
"""The fusion weight of every fork's adapter update."""

DISTILL_TEMPERATURES = (1.0, 4.0)
DISTILL_STRENGTHS = (0.5, 1.0)
"""A distillation per pair: softmax temperature, and the weight of the distillation loss."""


@dataclass(frozen=True)
class Candidate:
    """One point of the grid: the options to build with, and how the report shows them."""

    options: Options
    choice: dict[str, Any]


@dataclass
class Chosen:
    """The merge built from the best candidate.

    Attributes:
        merged: the merged model (and what its method reports).
        choice: the options it was built with (``{}`` when there was nothing to choose).
        grid: every candidate with its ``score`` (``[]`` when only one was built).
    """

    merged: Merged
    choice: dict[str, Any]
    grid: list[dict[str, Any]] = field(default_factory=list)


def candidates(
    method: str,
    forks: int,
    options: Options,
    temperature: float | None = None,
    strength: float | None = None,
) -> list[Candidate]:
    """The grid of ``method`` for ``forks`` forks; options the user set are not searched.

    Args:
        method: the merge method.
        forks: how many forks are merged.
        options: the merge's options (``weights`` ``None``: searched for soup and adapter).
        temperature: ``distill``: the given temperature, ``None`` to search.
        strength: ``distill``: the given strength, ``None`` to search.
    """
    if method == "soup" and options.weights is None:
        return [
            Candidate(dataclasses.replace(options, weights=w), {"weights": w})
            for w in ([1 - share, *[share / forks] * forks] for share in SOUP_SHARES)
        ]
    if method == "adapter" and options.weights is None:
        return [
            Candidate(dataclasses.replace(options, weights=[w] * forks), {"weights": [w] * forks})
            for w in ADAPTER_WEIGHTS
        ]
    if method == "distill":
        temperatures = DISTILL_TEMPERATURES if temperature is None else (temperature,)
        strengths = DISTILL_STRENGTHS if strength is None else (strength,)
        return [
            Candidate(
                dataclasses.replace(options, temperature=t, strength=s),
                {"temperature": t, "strength": s},
            )
            for t, s in itertools.product(temperatures, strengths)
        ]
    given = {"weights": options.weights} if options.weights is not None else {}
    return [Candidate(options, given)]


def choose(
    method: str,
    parent: nn.Module,
    forks: Sequence[nn.Module],
    data: MergeData,
    grid: list[Candidate],
    score: Callable[[nn.Module], float],
) -> Chosen | None:
    """Build every candidate of ``grid`` and keep the one ``score`` ranks best; ``None``
    when ``data.cancelled()`` stopped it.

    Ties keep the earlier candidate; a ``NaN`` score never wins over a number. A grid of one
    is built without being scored.

    Raises:
        ConfigurationError: as :func:`~onthefly.forks.merging.merge`.
    """
    if len(grid) == 1:
        return Chosen(merge(method, parent, forks, data, grid[0].options), grid[0].choice)
    best: tuple[float, Candidate, Merged] | None = None
    scored = []
    for candidate in grid:
        if data.cancelled():
            return None
        merged = merge(method, parent, forks, data, candidate.options)
        value = float(score(merged.model))
        scored.append({**candidate.choice, "score": None if math.isnan(value) else value})
        if best is None or (not math.isnan(value) and (math.isnan(best[0]) or value < best[0])):
            best = (value, candidate, merged)
        del merged
    assert best is not None  # the grid is never empty
    _, candidate, merged = best
    return Chosen(merged, candidate.choice, scored)
