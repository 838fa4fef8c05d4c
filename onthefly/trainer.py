"""``onthefly.Trainer``: the native loop with the OnTheFly callback attached."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from typing_extensions import TypedDict, Unpack

from onthefly.callbacks.onthefly import OnTheFly
from onthefly.errors import ConfigurationError
from onthefly.native import trainer as native
from onthefly.native.config import session_enabled
from onthefly.native.options import LOOP_OPTIONS, LoopOptions


class SessionOptions(TypedDict, total=False):
    """The session callback's keyword arguments that ``onthefly.Trainer`` passes on: those of
    :class:`onthefly.OnTheFly` besides ``project``, ``run_name`` and ``do_test_after`` (each
    described there)."""

    port: int | None
    keep_alive: bool | None
    log_level: int | str
    test_loader: Any
    datamodule: Any
    quiet: bool
    home: str | os.PathLike[str] | None
    flush_every_steps: int
    flush_every_s: float
    runtime_interval_s: float
    grad_norm_every_s: float
    resume_from: str | os.PathLike[str] | None
    checkpoints: int
    checkpoint_bytes: int
    loss_fn: Any
    embedding_fn: Callable[[Any, Any], Any] | None
    track_samples: bool
    describe_sample: Callable[..., Any] | None
    stall_seconds: float | None


class TrainerOptions(LoopOptions, SessionOptions, total=False):
    """Every keyword argument of ``onthefly.Trainer`` after ``do_test_after`` and
    ``session``: the loop's and the session's."""


class Trainer(native.Trainer):
    """Train a plain PyTorch model live: the native loop, with :class:`OnTheFly` attached.

    The loop is :class:`onthefly.native.trainer.Trainer` (Lightning's hooks in Lightning's
    order, nothing added to the training itself; see there for the loop's own arguments);
    the session callback goes first among the callbacks, as ``attach_lightning`` adds it to a
    ``lightning.Trainer``.

    Args:
        project: the project the run belongs to (groups runs in the dashboard).
        run_name: the run's name; the session picks one when ``None``.
        do_test_after: evaluate ``test_loader`` when training ends (done by the session).
        session: attach the OnTheFly session (live dashboard). ``None`` (default) means on,
            unless the environment sets ``ONTHEFLY_SESSION=0``; ``False`` runs the bare loop.
        **options: the loop's keyword arguments (``max_epochs``, ``max_steps``,
            ``val_every_n_epochs``, ``callbacks``, ``precision``, ``device``,
            ``grad_clip_norm``, ``metrics``, ``progress_bar``, ``batch_keys``: see
            :class:`~onthefly.native.options.LoopOptions`), and further keyword arguments for
            the session callback (``onthefly.OnTheFly``; :class:`SessionOptions`).

    Raises:
        ConfigurationError: for an invalid argument (the message says what was expected).

    Example:
        >>> trainer = onthefly.Trainer(project="mnist", max_epochs=3, val_every_n_epochs=1)
        >>> trainer.fit(model=model, optimizer=opt, loss_fn=nn.CrossEntropyLoss(),
        ...             train_loader=train, val_loader=val)
    """

    def __init__(
        self,
        project: str,
        run_name: str | None = None,
        *,
        do_test_after: bool = False,
        session: bool | None = None,
        **options: Unpack[TrainerOptions],
    ) -> None:
        if not isinstance(project, str) or not project.strip():
            raise ConfigurationError(f"project={project!r}; expected a non-empty name")
        loop: dict[str, Any] = {k: v for k, v in options.items() if k in LOOP_OPTIONS}
        session_options: dict[str, Any] = {
            k: v for k, v in options.items() if k not in LOOP_OPTIONS
        }
        super().__init__(**loop)
        self.project = project
        self.run_name = run_name
        self.do_test_after = do_test_after
        if not session_enabled(session):
            if session_options:
                raise ConfigurationError(
                    f"session options {sorted(session_options)} were given with the session "
                    "off; drop them or enable the session"
                )
            return
        umbrella = OnTheFly(
            project=project, run_name=run_name, do_test_after=do_test_after, **session_options
        )
        self.callbacks.insert(0, umbrella)  # first: its parts see every hook before the rest
