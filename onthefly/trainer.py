"""``onthefly.Trainer``: the native loop with the OnTheFly callback attached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from onthefly.callbacks.onthefly import OnTheFly
from onthefly.errors import ConfigurationError
from onthefly.native import trainer as native
from onthefly.native.config import session_enabled


class Trainer(native.Trainer):
    """Train a plain PyTorch model live: the native loop, with :class:`OnTheFly` attached.

    The loop is :class:`onthefly.native.trainer.Trainer` (Lightning's hooks in Lightning's
    order, nothing added to the training itself; see there for the loop's own arguments);
    the session callback goes first among the callbacks, as ``attach_lightning`` adds it to a
    ``lightning.Trainer``.

    Args:
        project: the project the run belongs to (groups runs in the dashboard).
        run_name: the run's name; the session picks one when ``None``.
        max_epochs, max_steps, val_every_n_epochs, callbacks, precision, device,
            grad_clip_norm, metrics, progress_bar: the loop's (see
            :class:`onthefly.native.trainer.Trainer`).
        do_test_after: evaluate ``test_loader`` when training ends (done by the session).
        session: attach the OnTheFly session (live dashboard). ``None`` (default) means on,
            unless the environment sets ``ONTHEFLY_SESSION=0``; ``False`` runs the bare loop.
        batch_keys: the loop's (see :class:`onthefly.native.trainer.Trainer`).
        **session_options: further keyword arguments for the session callback
            (``onthefly.OnTheFly``).

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
        max_epochs: int | None = None,
        max_steps: int | None = None,
        do_test_after: bool = False,
        val_every_n_epochs: int | None = None,
        callbacks: Sequence[object] | object = (),
        precision: str | int = "32",
        device: str | torch.device | None = None,
        grad_clip_norm: float | None = None,
        metrics: Mapping[str, Any] | None = None,
        progress_bar: bool = True,
        session: bool | None = None,
        batch_keys: tuple[str, str] | None = None,
        **session_options: Any,
    ) -> None:
        if not isinstance(project, str) or not project.strip():
            raise ConfigurationError(f"project={project!r}; expected a non-empty name")
        super().__init__(
            max_epochs=max_epochs,
            max_steps=max_steps,
            val_every_n_epochs=val_every_n_epochs,
            callbacks=callbacks,
            precision=precision,
            device=device,
            grad_clip_norm=grad_clip_norm,
            metrics=metrics,
            progress_bar=progress_bar,
            batch_keys=batch_keys,
        )
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
