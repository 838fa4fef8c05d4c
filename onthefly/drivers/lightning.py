"""The driver of ``lightning.pytorch.Trainer``.

Lightning keeps much of what OnTheFly needs on its loops and connectors, some of it
private. Every private attribute used is named in a comment beside its use, each checked
against Lightning 2.6.6 (the version the tests run); a Lightning release that moves one
breaks here and nowhere else.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import nn
from torch.nn import Module
from torch.optim import Optimizer
from torch.utils.data import DataLoader

from onthefly.drivers import lightning_copies, lightning_test
from onthefly.drivers.base import Budget, Callbacks, Driver, Limits, LoaderListener, Split, as_limit
from onthefly.drivers.values import Scalar, scalars
from onthefly.errors import SessionFileError

_INPUT_NAMES = {"train": "train_loader", "val": "val_loader", "test": "test_loader"}
_LIGHTNING_NAMES = {"train": "train_dataloader", "val": "val_dataloaders", "test": None}
_HOOKS = {"train": "train_dataloader", "val": "val_dataloader", "test": "test_dataloader"}
_LOADER_SUFFIX = re.compile(r"/dataloader_idx_\d+$")


class LightningDriver(Driver):
    """A ``lightning.pytorch.Trainer`` (``lightning``, not ``pytorch_lightning``)."""

    name = "lightning"
    fetches_ahead = True  # the fit loop's data fetcher prefetches one batch
    distributed_copies = False  # a nested Trainer would join the run's DDP group
    values_in_outputs = False  # self.log() values live in the results until the next step

    # --- where the run stops --------------------------------------------------------------

    def limits(self) -> Limits:
        fit_loop = self.trainer.fit_loop
        return Limits(as_limit(fit_loop.max_epochs), as_limit(fit_loop.epoch_loop.max_steps))

    def set_limits(self, limits: Limits) -> None:
        # Lightning keeps the limits on its loops, where they are read at every check.
        self.trainer.fit_loop.max_epochs = limits.max_epochs
        self.trainer.fit_loop.epoch_loop.max_steps = limits.max_steps

    def is_last_batch(self, batch_idx: int) -> bool:
        # Lightning knows it even for loaders without a length (it fetches one batch ahead).
        return bool(self.trainer.fit_loop.epoch_loop.batch_progress.is_last_batch)

    def trained_batches(self, counted: int) -> int:
        # Lightning counts them itself (processed: the step ran), whichever callback asks.
        return int(self.trainer.fit_loop.epoch_loop.batch_progress.current.processed)

    def step_counter(self) -> tuple[Any, str]:
        # ``global_step`` is four properties deep (a few microseconds a read); its counter is
        # a plain attribute of the optimization loop's progress tracker, which lives as long
        # as the fit loop (private: ``epoch_loop.automatic_optimization.optim_progress`` and
        # ``epoch_loop.manual_optimization.optim_step_progress``).
        loop = self.trainer.fit_loop.epoch_loop
        module = self.trainer.lightning_module
        if module is None or module.automatic_optimization:
            return loop.automatic_optimization.optim_progress.optimizer.step.total, "completed"
        return loop.manual_optimization.optim_step_progress.total, "completed"

    def epoch_counter(self) -> tuple[Any, str]:
        # What ``current_epoch`` returns (private: ``fit_loop.epoch_progress``).
        return self.trainer.fit_loop.epoch_progress.current, "completed"

    def terminating(self) -> bool:
        # Lightning turns SIGTERM into ``received_sigterm`` and ends the run after the step.
        return bool(self.trainer.received_sigterm)

    # --- what the user logs ---------------------------------------------------------------

    def metric_snapshot(self) -> dict[str, int]:
        return {}  # Lightning's results collection says what was logged

    def step_values(self, outputs: Any) -> dict[str, Scalar]:
        # ``trainer.callback_metrics`` converts progress-bar metrics to Python numbers (one
        # ``.item()`` each) at every read: the step values are read as the device tensors
        # Lightning caches on its results collection (private: ``_forward_cache``).
        # At every step: the training loop's collection, read as plain attributes (private:
        # ``fit_loop.epoch_loop._results``) rather than through the trainer's active-loop
        # lookup; a step that logs nothing leaves it empty.
        try:  # attribute reads, no getattr() calls: this runs at every step
            results = self.trainer.fit_loop.epoch_loop._results
        except AttributeError:
            results = None
        if not hasattr(results, "valid_items"):
            results = self._results()
        if not results:
            return {}
        return scalars(
            (metric.meta.name, metric._forward_cache)
            for _, metric in results.valid_items()
            if metric.meta.on_step
        )

    def step_log(self) -> Any:
        # The training loop's results collection (private: ``fit_loop.epoch_loop._results``),
        # one object for the whole fit, empty until the module logs.
        return getattr(self.trainer.fit_loop.epoch_loop, "_results", None)

    def epoch_values(self, before: dict[str, int], skip: set[str]) -> dict[str, Scalar]:
        results = self._results()
        if results is None:
            return {}
        names = {
            metric.meta.forked_name(False)
            for _, metric in results.valid_items()
            if metric.meta.on_epoch
        }
        metrics = self.trainer.callback_metrics
        return scalars((k, v) for k, v in metrics.items() if k in names)

    def eval_values(self, before: dict[str, int]) -> dict[str, Scalar]:
        results = self._results()
        if results is None:
            return {}
        # Every loader's values: valid_items() keeps only the loader in progress, and none is
        # by now. With several loaders Lightning names them ``val_loss/dataloader_idx_0``, ...
        names = {metric.meta.name for metric in results.values()}
        return scalars(
            (name, value)
            for name, value in self.trainer.callback_metrics.items()
            if name in names or _LOADER_SUFFIX.sub("", name) in names
        )

    def grad_norm(self) -> Scalar | None:
        return None  # Lightning logs none of its own

    def computes_grad_norm(self) -> bool:
        return False  # its clipping keeps no norm: callbacks take theirs before it clips

    def scales_gradients(self) -> bool:
        return getattr(self.trainer.precision_plugin, "scaler", None) is not None

    def accumulation(self) -> int:
        # Lightning divides each micro-batch loss by it (also in a short last window).
        return int(self.trainer.accumulate_grad_batches or 1)

    def _results(self) -> Any:
        # The results collection of the active loop (private: ``trainer._results``).
        results = getattr(self.trainer, "_results", None)
        return results if hasattr(results, "valid_items") else None

    # --- the run's parts ------------------------------------------------------------------

    def loss_fn(self, inputs: Any) -> Any:
        return getattr(inputs, "loss_fn", None)

    def reports_loss_calls(self) -> bool:
        return False  # the module's training_step calls the loss as it likes

    def schedulers(self) -> list[Any]:
        return [config.scheduler for config in self.trainer.lr_scheduler_configs]

    def batch_keys(self) -> tuple[str, str] | None:
        return None  # the module's training_step unpacks its batches

    def resume_from(self) -> Any:
        return None  # attach_lightning / OnTheFly take resume_from= themselves

    def loaders(self, split: Split, inputs: Any) -> list[Any]:
        # What the user gave attach_lightning / OnTheFly first, then the trainer's own, then
        # the datamodule's or the module's *_dataloader() hook.
        given = flat_loaders(getattr(inputs, _INPUT_NAMES[split], None))
        if given:
            return given
        attribute = _LIGHTNING_NAMES[split]
        if attribute is not None:
            try:
                found = flat_loaders(getattr(self.trainer, attribute, None))
            except (AttributeError, RuntimeError):  # not set up yet
                found = []
            if found:
                return found
        hook = _HOOKS[split]
        trainer = self.trainer
        for owner in (
            getattr(inputs, "datamodule", None),
            trainer.datamodule,
            trainer.lightning_module,
        ):
            if owner is not None and is_overridden(hook, owner):
                return flat_loaders(getattr(owner, hook)())
        return []

    def train_loaders(self) -> list[Any]:
        # The fit loop's CombinedLoader (private: ``fit_loop._combined_loader``).
        combined = self.trainer.fit_loop._combined_loader
        return [] if combined is None else list(combined.flattened)

    def replace_train_loaders(self, loaders: Sequence[Any]) -> None:
        self.trainer.fit_loop._combined_loader.flattened = list(loaders)

    def live_train_iterators(self) -> list[Any] | None:
        # The CombinedLoader's live iterator (private: ``_iterator``) holds one per loader.
        combined = self.trainer.fit_loop._combined_loader
        live = getattr(getattr(combined, "_iterator", None), "iterators", None)
        return live if isinstance(live, list) else []

    def restart_train_iterator(self) -> None:
        # The fit loop's data fetcher (private: ``fit_loop._data_fetcher``) rebuilds it.
        iter(self.trainer.fit_loop._data_fetcher)

    def run_loaders(self) -> list[Any]:
        trainer = self.trainer
        found: list[Any] = []
        for loop in (
            trainer.fit_loop,
            getattr(trainer.fit_loop.epoch_loop, "val_loop", None),
            getattr(trainer, "test_loop", None),
        ):
            combined = getattr(loop, "_combined_loader", None)
            found.extend([] if combined is None else combined.flattened)
        # A test loader given to fit's trainer as such (not one a datamodule would build);
        # private: ``test_loop._data_source``.
        instance = getattr(getattr(trainer.test_loop, "_data_source", None), "instance", None)
        found.extend(x for x in flattened(instance) if isinstance(x, DataLoader))
        return found

    def on_train_loaders_requested(self, listener: LoaderListener) -> Callable[[], None] | None:
        # The fit loop's data source (private: ``fit_loop._data_source``) is asked for the
        # loaders once per fit (and again when they are reloaded); its ``dataloader`` method
        # is wrapped on the instance and unwrapped when listening stops.
        source = getattr(getattr(self.trainer, "fit_loop", None), "_data_source", None)
        if source is None or not callable(getattr(source, "dataloader", None)):
            return None
        request = source.dataloader
        own = vars(source)
        had, previous = "dataloader" in own, own.get("dataloader")
        listening = [True]

        def dataloader() -> Any:
            loaders = request()
            if listening[0]:
                listener(flattened(loaders))
            return loaders

        source.dataloader = dataloader

        def stop() -> None:
            listening[0] = False
            if own.get("dataloader") is dataloader:  # else a later listener wraps this one
                if had:
                    own["dataloader"] = previous
                else:
                    del own["dataloader"]

        return stop

    # --- the training state ---------------------------------------------------------------

    def capture_state(self) -> tuple[dict[str, Any], dict[str, Any]]:
        # Lightning's own checkpoint dict (private: ``_checkpoint_connector``).
        checkpoint = self.trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
        # The data position travels on its own; Lightning's record of the wrapped loaders
        # would not match the plain ones of the resuming process.
        loop_state = checkpoint.get("loops", {}).get("fit_loop", {}).get("state_dict", {})
        loop_state.pop("combined_loader", None)
        return checkpoint.pop("state_dict"), checkpoint

    def load_learned(self, model_state: dict[str, Any], rest: dict[str, Any], source: str) -> None:
        if "optimizer_states" not in rest:
            raise SessionFileError(f"{source} was written by onthefly.Trainer, not Lightning")
        trainer = self.trainer
        trainer.strategy.load_model_state_dict({"state_dict": model_state}, strict=True)
        trainer.strategy.load_optimizer_state_dict(rest)
        for scheduler_config, state in zip(
            trainer.lr_scheduler_configs, rest["lr_schedulers"], strict=False
        ):
            scheduler_config.scheduler.load_state_dict(state)
        plugin = trainer.precision_plugin
        if type(plugin).__qualname__ in rest:
            plugin.load_state_dict(rest[type(plugin).__qualname__])

    def restore(self, model_state: dict[str, Any], rest: dict[str, Any], source: str) -> None:
        # Handed to the checkpoint connector (private: ``_loaded_checkpoint``) at setup, it
        # restores model, callbacks, precision, loops, optimizers and schedulers exactly as
        # ``trainer.fit(ckpt_path=...)`` would, then releases it.
        self.trainer._checkpoint_connector._loaded_checkpoint = {**rest, "state_dict": model_state}

    def placement(self) -> dict[str, Any]:
        return {"val_every_n_epochs": None, "device": str(self.trainer.strategy)}

    # --- work besides training ------------------------------------------------------------

    def run_test(self, label: str, source: Any) -> dict[str, Any]:
        return lightning_test.run_test_loop(self.trainer, source)

    def loss_closure(self, module: nn.Module, batch_idx: int) -> Callable[[Any], torch.Tensor]:
        return lightning_copies.loss_closure(self.trainer, module, batch_idx)

    def train_copy(
        self, model: Module, optimizer: Optimizer, loader: Any, budget: Budget, callbacks: Callbacks
    ) -> None:
        lightning_copies.train_copy(self.trainer, model, optimizer, loader, budget, callbacks)


def flat_loaders(loaders: Any) -> list[Any]:
    """Lightning's collections of loaders (dict, list, tuple; any nesting) as a list; a list
    of batches is one loader."""
    if loaders is None:
        return []
    if isinstance(loaders, Mapping):
        return [item for value in loaders.values() for item in flat_loaders(value)]
    listed = isinstance(loaders, Sequence) and not isinstance(loaders, (str, bytes))
    if listed and loaders and all(hasattr(item, "__iter__") for item in loaders):
        return [item for value in loaders for item in flat_loaders(value)]
    return [loaders]


def flattened(loaders: Any) -> list[Any]:
    """Every loader in ``loaders`` as the fit loop requests them (any nesting, or a
    ``CombinedLoader``)."""
    if isinstance(loaders, Mapping):
        return [item for value in loaders.values() for item in flattened(value)]
    if isinstance(loaders, (list, tuple)):
        return [item for value in loaders for item in flattened(value)]
    inner = getattr(loaders, "flattened", None)  # a CombinedLoader
    return list(inner) if isinstance(inner, list) else [loaders]
