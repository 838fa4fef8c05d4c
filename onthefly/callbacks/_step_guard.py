"""The optimizer's first step after an accepted edit, caught if it fails.

The checks before an edit (:mod:`onthefly._representable`, :mod:`._hparam_trial`) cannot
know every optimizer; should the real step still raise under the new values, the run must
not die of it. :class:`StepGuard` wraps ``optimizer.step`` (an instance attribute shadows the
class's, as torch's LR schedulers do themselves) until the next step that succeeds. When the
step raises, the guard calls ``on_failure`` with the exception (the editor rolls the edit
back and pauses the run) and returns as if the step had been skipped: that step's update is
not applied (an optimizer that changed part of its state before raising keeps that part).
An exception from the step's closure (the training step itself, under Lightning) is the
user's and is raised unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


class StepGuard:
    """Guards ``optimizer``'s steps from :meth:`arm` until one succeeds.

    Args:
        optimizer: the torch optimizer.
        on_failure: called with what the step raised (at most once per arming).

    Example:
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.1)
        >>> guard = StepGuard(opt, on_failure=print)
        >>> guard.arm(); opt.step(); guard.armed
        False
    """

    def __init__(
        self, optimizer: torch.optim.Optimizer, on_failure: Callable[[Exception], None]
    ) -> None:
        self.optimizer = optimizer
        self.on_failure = on_failure
        self.armed = False
        self._had_own: bool = False
        self._own: Any = None

    def arm(self) -> None:
        """Guard the next steps (a second call while armed changes nothing)."""
        if self.armed:
            return
        attributes = vars(self.optimizer)
        self._had_own, self._own = "step" in attributes, attributes.get("step")
        attributes["step"] = self._guarded
        self.armed = True

    def disarm(self) -> None:
        """Put ``optimizer.step`` back as it was (unless something wrapped it meanwhile)."""
        if not self.armed:
            return
        self.armed = False
        attributes = vars(self.optimizer)
        if attributes.get("step") == self._guarded:
            if self._had_own:
                attributes["step"] = self._own
            else:
                del attributes["step"]

    def _guarded(self, *args: Any, **kwargs: Any) -> Any:
        step = self._own if self._had_own else type(self.optimizer).step.__get__(self.optimizer)
        if not self.armed:  # disarmed while something else had wrapped us: pass through
            return step(*args, **kwargs)
        failed_inside: list[bool] = []
        closure = kwargs.get("closure", args[0] if args else None)
        if closure is not None:

            def watched() -> Any:
                try:
                    return closure()
                except BaseException:
                    failed_inside.append(True)
                    raise

            args, kwargs = (), {**kwargs, "closure": watched}
        try:
            result = step(*args, **kwargs)
        except Exception as exc:
            if failed_inside:
                raise  # the training step's own error, not the optimizer's
            self.disarm()
            self.on_failure(exc)
            return None
        self.disarm()
        return result
