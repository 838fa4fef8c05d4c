"""Stop conditions: extending them (pure), reading and writing them on a real trainer."""

from __future__ import annotations

import pytest

from onthefly.callbacks.limits import (
    UNLIMITED,
    Extension,
    Limits,
    apply_deferred,
    defer,
    deferred,
    extended,
    is_final_step,
)
from onthefly.drivers import driver
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
    assert more_steps == Limits(UNLIMITED, 510)


@pytest.mark.parametrize(
    ("limits", "epochs", "steps"),
    [
        (Limits(60, UNLIMITED), None, 20),  # steps asked of a run planned in epochs
        (Limits(UNLIMITED, 500), 2, None),  # epochs asked of a run planned in steps
        (Limits(60, 500), 1, None),  # both limits: which one ends the run is not known yet
        (Limits(60, UNLIMITED), 1, 20),
    ],
)
def test_an_extension_the_limits_cannot_place_yet_waits_for_the_planned_end(
    limits: Limits, epochs: int | None, steps: int | None
) -> None:
    assert extended(limits, epoch=3, step=50, epochs=epochs, steps=steps, at_end=False) is None


class Host:
    """The native trainer's limit attributes, and a loader length for the last batch."""

    def __init__(self, max_epochs: int | None, max_steps: int) -> None:
        self.max_epochs, self.max_steps = max_epochs, max_steps
        self.current_epoch = self.global_step = 0
        self.train_loader = [None] * 10


def test_a_deferred_extension_is_applied_where_the_planned_run_ends() -> None:
    trainer = Host(max_epochs=3, max_steps=-1)
    run = driver(trainer)
    assert defer(run, epochs=None, steps=20) == Extension(steps=20)
    assert defer(driver(trainer), epochs=None, steps=5) == Extension(steps=25)  # they add up
    trainer.current_epoch, trainer.global_step = 2, 29
    assert not apply_deferred(run, batch_idx=8)  # not the end yet
    assert not is_final_step(run, batch_idx=9)  # the run goes on past its old end
    trainer.global_step = 30
    assert apply_deferred(run, batch_idx=9)
    assert run.limits() == Limits(UNLIMITED, 55) and deferred(run) is None


def test_an_epoch_limit_without_a_loader_length_is_reached_at_the_epoch_end() -> None:
    trainer = Host(max_epochs=2, max_steps=-1)
    trainer.train_loader = iter([])  # type: ignore[assignment]  # no length
    run = driver(trainer)
    defer(run, epochs=1, steps=None)
    trainer.current_epoch = 1
    assert not apply_deferred(run, batch_idx=99)
    assert apply_deferred(run, at_epoch_end=True)
    assert run.limits() == Limits(3, UNLIMITED)


def test_limits_round_trip_on_a_lightning_trainer() -> None:
    trainer = lightning_trainer(max_epochs=3, max_steps=40)
    assert driver(trainer).limits() == Limits(3, 40)
    driver(trainer).set_limits(Limits(5, UNLIMITED))
    assert (trainer.max_epochs, trainer.max_steps) == (5, -1)
    assert driver(trainer).limits() == Limits(5, UNLIMITED)
