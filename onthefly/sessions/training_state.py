"""The trainer's state as it goes into a session file, and back, under both drivers.

Under Lightning the state is Lightning's own checkpoint dict (``dump_checkpoint``: loops,
optimizers, schedulers, precision plugin, callbacks, hyperparameters), split into the
weights and the rest. Under ``onthefly.Trainer`` it is the optimizer, scheduler and grad
scaler state dicts, the step and epoch counters and every callback's ``state_dict``.

Two ways back: a *resume* (a fresh process continues the run: everything, counters and
callbacks included, see :mod:`onthefly.sessions.resume`) and :func:`load_learned` (at a pause
in a live run: model, optimizers, schedulers and scaler only; the clock keeps running).
"""

from __future__ import annotations

from typing import Any

from onthefly.callbacks._driver import is_lightning
from onthefly.errors import SessionFileError
from onthefly.sessions.payload import check_model


def capture(trainer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(model state_dict, everything else)`` of ``trainer`` at a batch boundary."""
    if is_lightning(trainer):
        checkpoint = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
        # The data position travels on its own (state/data.pt); Lightning's record of our
        # wrapped loaders would not match the plain ones of the resuming process.
        loop_state = checkpoint.get("loops", {}).get("fit_loop", {}).get("state_dict", {})
        loop_state.pop("combined_loader", None)
        return checkpoint.pop("state_dict"), checkpoint
    scheduler = trainer.scheduler
    step_state = trainer._state
    return trainer.model.state_dict(), {
        "optimizer": trainer.optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if hasattr(scheduler, "state_dict") else None,
        "scaler": step_state.scaler.state_dict() if step_state is not None else None,
        "global_step": int(trainer.global_step),
        "current_epoch": int(trainer.current_epoch),
        "callbacks": trainer.callback_states(),
    }


def config(trainer: Any) -> dict[str, Any]:
    """The trainer settings shown in the manifest (for people, not used to restore)."""
    values = {
        "max_epochs": trainer.max_epochs,
        "max_steps": trainer.max_steps,
        "precision": str(getattr(trainer, "precision", "")),
        "accumulate_grad_batches": getattr(trainer, "accumulate_grad_batches", 1),
        "val_every_n_epochs": getattr(trainer, "val_every_n_epochs", None),
        "device": str(getattr(trainer, "device", getattr(trainer, "strategy", ""))),
    }
    return {k: v for k, v in values.items() if isinstance(v, (int, str)) or v is None}


def load_learned(
    trainer: Any, model_state: dict[str, Any], rest: dict[str, Any], source: str
) -> None:
    """Put model, optimizers, schedulers and grad scaler back; counters are left alone.

    Raises:
        SessionFileError: the model does not match, or the file was written by the other
            driver.
    """
    module = trainer.lightning_module
    check_model(module.state_dict(), model_state, source)
    if is_lightning(trainer):
        if "optimizer_states" not in rest:
            raise SessionFileError(f"{source} was written by onthefly.Trainer, not Lightning")
        trainer.strategy.load_model_state_dict({"state_dict": model_state}, strict=True)
        trainer.strategy.load_optimizer_state_dict(rest)
        for scheduler_config, state in zip(
            trainer.lr_scheduler_configs, rest["lr_schedulers"], strict=False
        ):
            scheduler_config.scheduler.load_state_dict(state)
        plugin = trainer.precision_plugin
        if type(plugin).__qualname__ in rest:
            plugin.load_state_dict(rest[type(plugin).__qualname__])
        return
    if "optimizer" not in rest:
        raise SessionFileError(f"{source} was written by Lightning, not onthefly.Trainer")
    module.load_state_dict(model_state)
    trainer.optimizer.load_state_dict(rest["optimizer"])
    if rest.get("scheduler") is not None and trainer.scheduler is not None:
        trainer.scheduler.load_state_dict(rest["scheduler"])
    if rest.get("scaler") and trainer._state is not None:
        trainer._state.scaler.load_state_dict(rest["scaler"])
