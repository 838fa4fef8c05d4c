"""The session's forks: names, records, weights files and state."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import torch
from torch import nn

from onthefly.errors import ConfigurationError
from onthefly.forks.registry import ForkRecord, ForkRegistry


def _record(name: str, **fields: object) -> ForkRecord:
    values: dict[str, object] = {
        "name": name,
        "run": name,
        "parent": "main",
        "parent_step": 40,
        "indices": [5, 1, 9],
        "selection": {"name": "tail", "criterion": {"kind": "quantile", "q": 0.9}, "size": 3},
        "budget": {"steps": 10},
        "hparams": {"lr": None, "batch_size": 8, "optimizer": "fresh", "adapter_rank": None},
        **fields,
    }
    return ForkRecord(**values)  # type: ignore[arg-type]


def test_names_are_new_valid_and_numbered(tmp_path: Path) -> None:
    registry = ForkRegistry(lambda: tmp_path)
    assert registry.next_name() == "fork-1"
    registry.add(_record("fork-1"))
    registry.add(_record("fork-7"))
    registry.add(_record("hard"))
    assert registry.next_name() == "fork-8"
    assert registry.check_new("tail") == "tail"
    with pytest.raises(ConfigurationError, match="'hard' is taken"):
        registry.check_new("hard")
    with pytest.raises(ConfigurationError, match="'merge-1' is taken"):
        registry.check_new("merge-1", taken={"merge-1"})
    with pytest.raises(ConfigurationError, match=r"selection name '\.\./x' is invalid"):
        registry.check_new("../x")
    with pytest.raises(ConfigurationError, match="no fork named 'x'; expected one of: fork-1"):
        registry.get("x")


def test_weights_round_trip_and_only_finished_forks_have_them(tmp_path: Path) -> None:
    registry = ForkRegistry(lambda: tmp_path)
    done, cancelled = _record("done", status="done"), _record("stopped", status="cancelled")
    registry.add(done)
    registry.add(cancelled)
    model = nn.Linear(3, 2)
    registry.save_weights(done, model)
    assert (tmp_path / "forks" / "done.pt").is_file() and done.has_weights
    loaded = registry.load_weights(registry.with_weights("done"), nn.Linear(3, 2))
    assert torch.equal(loaded.weight, model.weight)
    with pytest.raises(ConfigurationError, match="'stopped' is cancelled and has no weights"):
        registry.with_weights("stopped")
    with pytest.raises(ConfigurationError, match="do not fit the model"):
        registry.load_weights(done, nn.Linear(4, 2))
    (tmp_path / "forks" / "done.pt").unlink()
    with pytest.raises(ConfigurationError, match="weights of fork 'done' are missing"):
        registry.load_weights(done, nn.Linear(3, 2))


def test_the_state_survives_a_weights_only_round_trip(tmp_path: Path) -> None:
    registry = ForkRegistry(lambda: tmp_path)
    registry.add(_record("a", status="done", steps=10, slice_loss=0.5, has_weights=True))
    registry.add(_record("b", status="failed", message="RuntimeError: boom"))
    buffer = io.BytesIO()
    torch.save(registry.state_dict(), buffer)
    buffer.seek(0)
    restored = ForkRegistry(lambda: tmp_path)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    assert restored.summaries() == registry.summaries()
    assert restored.get("a").indices == [5, 1, 9]
    assert "indices" not in restored.get("a").summary()
