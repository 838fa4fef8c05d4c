"""The trainer's state as it goes into a session file, and back, under both drivers.

Under Lightning the state is Lightning's own checkpoint dict (``dump_checkpoint``: loops,
optimizers, schedulers, precision plugin, callbacks, hyperparameters), split into the
weights and the rest. Under ``onthefly.Trainer`` it is the optimizer, scheduler and grad
scaler state dicts, the step and epoch counters and every callback's ``state_dict``. The
drivers take and put back each (:meth:`~onthefly.drivers.base.Driver.capture_state`).

Two ways back: a *resume* (a fresh process continues the run: everything, counters and
callbacks included, see :mod:`onthefly.sessions.resume`) and :func:`load_learned` (at a pause
in a live run: model, optimizers, schedulers and scaler only; the clock keeps running).
"""

from __future__ import annotations

from typing import Any

from onthefly.drivers import driver
from onthefly.drivers.base import TrainerHost
from onthefly.sessions.payload import check_model


def capture(trainer: TrainerHost) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model state_dict, everything else)`` of ``trainer`` at a batch boundary."""
    return driver(trainer).capture_state()


def config(trainer: TrainerHost) -> dict[str, Any]:
    """The trainer settings shown in the manifest (for people, not used to restore)."""
    values = driver(trainer).config()
    return {k: v for k, v in values.items() if isinstance(v, (int, str)) or v is None}


def load_learned(
    trainer: TrainerHost, model_state: dict[str, Any], rest: dict[str, Any], source: str
) -> None:
    """Put model, optimizers, schedulers and grad scaler back; counters are left alone.

    Raises:
        SessionFileError: the model does not match, or the file was written by the other
            driver.
    """
    check_model(trainer.lightning_module.state_dict(), model_state, source)
    driver(trainer).load_learned(model_state, rest, source)
