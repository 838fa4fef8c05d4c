"""Observing the user's ``optimizer.step()`` calls without wrapping the optimizer.

A custom step decides itself when to step (gradient accumulation, skipped AMP steps), so the
trainer counts the steps that actually happen through the optimizer's own step hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


@contextmanager
def observe_steps(
    optimizer: torch.optim.Optimizer,
    before: Callable[[], None] | None,
    after: Callable[[], None],
) -> Iterator[None]:
    """Call ``before`` / ``after`` around every ``optimizer.step()`` inside the block.

    The hooks are removed on exit, leaving the optimizer as it was.
    """

    def pre_hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        assert before is not None
        before()

    def post_hook(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        after()

    handles = [optimizer.register_step_post_hook(post_hook)]
    if before is not None:
        handles.append(optimizer.register_step_pre_hook(pre_hook))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()
