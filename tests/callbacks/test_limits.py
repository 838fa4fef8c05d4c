"""Stop conditions: extending them (pure), reading and writing them on a real trainer."""

from __future__ import annotations

import pytest

from onthefly.callbacks.limits import UNLIMITED, Limits, extended, read_limits, write_limits
from tests.callbacks.models import lightning_trainer


@pytest.mark.parametrize(
    ("limits", "epoch", "step", "epochs", "steps", "expected"),
    [
        # N more epochs after the current one.
        (Limits(2, UNLIMITED), 1, 16, 3, None, Limits(5, UNLIMITED)),
        # A reached step limit is lifted when epochs are asked for.
        (Limits(1000, 20), 2, 20, 1, None, Limits(4, UNLIMITED)),
        # N more steps; the epoch limit that would stop first is lifted.
        (Limits(2, UNLIMITED), 1, 16, None, 5, Limits(UNLIMITED, 21)),
        (Limits(UNLIMITED, 20), 2, 20, None, 5, Limits(UNLIMITED, 25)),
        # Both: whichever comes first.
        (Limits(2, 16), 1, 16, 2, 4, Limits(4, 20)),
        # Nothing asked: unchanged.
        (Limits(3, 7), 0, 2, None, None, Limits(3, 7)),
    ],
)
def test_extended(
    limits: Limits, epoch: int, step: int, epochs: int, steps: int, expected: Limits
) -> None:
    assert extended(limits, epoch=epoch, step=step, epochs=epochs, steps=steps) == expected


def test_an_extension_before_the_end_never_shortens_the_planned_run() -> None:
    planned = Limits(60, UNLIMITED)
    assert extended(planned, epoch=0, step=50, epochs=1, steps=None, at_end=False) == Limits(
        61, UNLIMITED
    )
    more_steps = extended(
        Limits(UNLIMITED, 500), epoch=0, step=50, epochs=None, steps=10, at_end=False
    )
    assert more_steps.max_steps == 510


def test_limits_round_trip_on_a_lightning_trainer() -> None:
    trainer = lightning_trainer(max_epochs=3, max_steps=40)
    assert read_limits(trainer) == Limits(3, 40)
    write_limits(trainer, Limits(5, UNLIMITED))
    assert (trainer.max_epochs, trainer.max_steps) == (5, -1)
    assert read_limits(trainer) == Limits(5, UNLIMITED)
