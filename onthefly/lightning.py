"""``attach_lightning``: add OnTheFly to an existing ``lightning.Trainer``."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningDataModule, LightningModule, Trainer

from onthefly.callbacks.onthefly import OnTheFly, RunInputs
from onthefly.errors import ConfigurationError


def attach_lightning(
    trainer: Trainer,
    model: LightningModule | None = None,
    *,
    project: str,
    run_name: str | None = None,
    train_loader: Any = None,
    val_loader: Any = None,
    test_loader: Any = None,
    loss_fn: Any = None,
    datamodule: LightningDataModule | None = None,
    do_test_after: bool = False,
    **options: Any,
) -> OnTheFly:
    """Make a ``lightning.Trainer``'s runs live: appends an :class:`OnTheFly` callback.

    Nothing else changes: call ``trainer.fit(...)`` as before. Losses are the same, bit for
    bit, with and without OnTheFly.

    Args:
        trainer: a ``lightning.pytorch.Trainer`` (not a ``pytorch_lightning`` one).
        model: the module that will be fitted (optional; kept in ``callback.inputs``).
        project: the project name shown by dashboards and the CLI.
        run_name: the run's name; ``None`` names it after the start time.
        train_loader: the training data (optional; kept in ``callback.inputs``).
        val_loader: the validation data (optional; kept in ``callback.inputs``).
        test_loader: the test data for the ``test`` command and ``do_test_after``
            (default: the datamodule's or the module's ``test_dataloader``).
        loss_fn: the loss function (optional; kept in ``callback.inputs``).
        datamodule: a ``LightningDataModule`` whose test data to use.
        do_test_after: evaluate the test data when training reaches its stop condition.
        **options: further :class:`OnTheFly` arguments (``port``, ``keep_alive``,
            ``log_level``, ``quiet``, ``resume_from`` to continue a session file exactly,
            …).

    Returns:
        The attached callback.

    Raises:
        ConfigurationError: ``trainer`` is not a ``lightning.pytorch.Trainer``, it already has
            an OnTheFly callback, ``model`` or ``datamodule`` has the wrong type, or an option
            is invalid.

    Example:
        >>> trainer = lightning.Trainer(max_epochs=3)
        >>> attach_lightning(trainer, project="mnist", do_test_after=True)  # doctest: +SKIP
        >>> trainer.fit(model, train_loader, val_loader)  # doctest: +SKIP
    """
    if not isinstance(trainer, Trainer):
        raise ConfigurationError(
            f"trainer is a {type(trainer).__module__}.{type(trainer).__name__}; expected a "
            "lightning.pytorch.Trainer (import Lightning as `lightning.pytorch`, not "
            "`pytorch_lightning`)"
        )
    # Lightning's callback connector sets ``trainer.callbacks`` (a list) at construction.
    callbacks: list[Any] = trainer.callbacks  # type: ignore[attr-defined]
    if any(isinstance(cb, OnTheFly) for cb in callbacks):
        raise ConfigurationError(
            "this trainer already has an OnTheFly callback; expected one per trainer"
        )
    if model is not None and not isinstance(model, LightningModule):
        raise ConfigurationError(
            f"model is a {type(model).__name__}; expected a lightning.pytorch.LightningModule "
            "(use onthefly.Trainer for a plain nn.Module)"
        )
    if datamodule is not None and not isinstance(datamodule, LightningDataModule):
        raise ConfigurationError(
            f"datamodule is a {type(datamodule).__name__}; expected a LightningDataModule"
        )
    callback = OnTheFly(
        project=project,
        run_name=run_name,
        do_test_after=do_test_after,
        test_loader=test_loader,
        datamodule=datamodule,
        **options,
    )
    callback.inputs = RunInputs(model, train_loader, val_loader, test_loader, loss_fn, datamodule)
    callbacks.append(callback)
    return callback
