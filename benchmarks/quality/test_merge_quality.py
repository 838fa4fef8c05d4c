"""Forks and merges on a minority sub-population, against the baselines of equal compute.

scikit-learn's digits, split three ways (stratified, seeded): 30 % test (never shown to the
run), 15 % validation (the run's ``val_loader``), the rest training, where the digits 3 and
8 are cut to 15 samples each. ``onthefly.Trainer`` trains an MLP 64-64-10 (Adam 1e-3, batch
32) and pauses at step 150; through the public client the benchmark then forks 40 steps on

* the loss tail (``quantile=0.9`` of the latest training losses), also as a rank-8 adapter
  fork;
* the narrow slice of the two cut digits, alone and with ``replay=0.5``;

merges each fork back with every method at the defaults (weights chosen on validation, the
merge applied only if validation does not get worse), and records the test accuracy of the
model the run then holds, and of the merge forced through. The baselines for the same 40
steps: the run itself resumed (``continue``; also 80 steps), and the parent with the tail
oversampled to half the draws (the loader ``compare`` uses for its ``oversample`` row,
trained here by hand so that its test accuracy can be read; ``compare``'s own rows give the
validation accuracy of both baselines). Five seeds; a ``(forced)`` row averages the seeds
where the check refused that merge.

Targets: the default merge flow is never worse than the parent on validation (loss); the
best default merge of the tail fork at least matches oversampling on test accuracy.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from benchmarks.quality.live import accuracy, run_paused
from onthefly.client import Client
from onthefly.forks.mixing import oversample_loader

SEEDS = (0, 1, 2, 3, 4)
PAUSE_AT, FORK_STEPS = 150, 40
MINORITY, KEEP = (3, 8), 15
METHODS = ("greedy", "soup", "fisher", "distill")


@dataclass(frozen=True)
class Minority:
    train: TensorDataset
    val: TensorDataset
    test_x: torch.Tensor
    test_y: torch.Tensor
    narrow: list[int]
    """Training indices of the cut digits."""


def make_task(seed: int) -> Minority:
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    rest_x, test_x, rest_y, test_y = train_test_split(
        x, y, test_size=0.3, random_state=seed, stratify=y
    )
    train_x, val_x, train_y, val_y = train_test_split(
        rest_x, rest_y, test_size=0.15 / 0.7, random_state=seed, stratify=rest_y
    )
    rng = np.random.default_rng(seed)
    keep = np.ones(len(train_y), dtype=bool)
    for digit in MINORITY:
        where = np.flatnonzero(train_y == digit)
        keep[rng.choice(where, len(where) - KEEP, replace=False)] = False
    train_x, train_y = train_x[keep], train_y[keep]
    narrow = np.flatnonzero(np.isin(train_y, MINORITY)).tolist()

    def tensors(a: np.ndarray, b: np.ndarray) -> TensorDataset:
        return TensorDataset(torch.from_numpy(a), torch.from_numpy(b).long())

    return Minority(
        tensors(train_x, train_y),
        tensors(val_x, val_y),
        torch.from_numpy(test_x),
        torch.from_numpy(test_y).long(),
        narrow,
    )


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def _by_hand(trainer: Any, task: Minority, loader: DataLoader) -> float:
    """A copy of the paused model and a clone of its optimizer, trained FORK_STEPS steps on
    ``loader``: the test accuracy."""
    with torch.random.fork_rng():
        model = copy.deepcopy(trainer.model)
        optimizer = torch.optim.Adam(model.parameters())
        optimizer.load_state_dict(copy.deepcopy(trainer.optimizer.state_dict()))
        steps = 0
        while steps < FORK_STEPS:
            for x, y in loader:
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                steps += 1
                if steps == FORK_STEPS:
                    break
    return accuracy(model, task.test_x, task.test_y)


class _Seed:
    """The figures of one seed: test accuracy and validation loss by row."""

    def __init__(self, task: Minority, train: DataLoader) -> None:
        self.task, self.train = task, train
        self.test: dict[str, float] = {}
        self.val: dict[str, float] = {}
        """Validation accuracy (as the run measured it) by row."""
        self.applied: dict[str, bool] = {}

    def at_pause(self, client: Client, trainer: Any) -> None:
        task, model = self.task, trainer.model
        self.test["parent"] = accuracy(model, task.test_x, task.test_y)
        tail = client.select("train", name="tail", source="training", quantile=0.9)
        self.test["oversample tail (by hand)"] = _by_hand(
            trainer, task, oversample_loader(self.train, _ids(client, tail["name"]))
        )
        forks = {
            "tail": {"selection": "tail"},
            "tail adapter": {"selection": "tail", "adapter_rank": 8, "lr": 1e-2},
            "narrow": {"indices": task.narrow},
            "narrow + replay 0.5": {"indices": task.narrow, "replay": 0.5},
        }
        for n, (row, fields) in enumerate(forks.items()):
            client.fork(steps=FORK_STEPS, name=f"f{n}", **fields)
            alone = client.merge("soup", [f"f{n}"], weights=[0.0, 1.0], force=True)
            self.test[f"{row}: fork alone"] = accuracy(model, task.test_x, task.test_y)
            self.val[f"{row}: fork alone"] = 1 - alone["gate"]["merged"]["error"]
            self.val["parent"] = 1 - alone["gate"]["parent"]["error"]
            client.discard_merge()
            methods = ("adapter",) if "adapter" in row else METHODS
            for method in methods:
                self._merge(client, model, f"{row}: {method}", method, f"f{n}")
        # The run's own baselines of the tail fork, as compare reports them (validation).
        table = client.compare("f0")
        val = [t["name"] for t in table["targets"]].index("val")
        for found in table["rows"]:
            if found["kind"] in ("continue", "oversample"):
                self.val[f"compare: {found['model']}"] = found["accuracy"][val]

    def _merge(self, client: Client, model: nn.Module, row: str, method: str, fork: str) -> None:
        task = self.task
        done = client.merge(method, [fork])
        self.applied[row] = done["applied"]
        self.test[row] = accuracy(model, task.test_x, task.test_y)
        gate = done["gate"]
        self.val[row] = 1 - gate["merged" if done["applied"] else "parent"]["error"]
        if done["applied"]:
            client.discard_merge()
        else:  # what the check kept out
            client.merge(method, [fork], force=True)
            self.test[f"{row} (forced)"] = accuracy(model, task.test_x, task.test_y)
            client.discard_merge()

    def after(self, steps: int) -> Any:
        def script(client: Client, trainer: Any) -> None:
            self.test[f"continue {steps} steps"] = accuracy(
                trainer.model, self.task.test_x, self.task.test_y
            )

        return script


def _ids(client: Client, name: str) -> list[int]:
    return [int(r["index"]) for r in client.selection_rows(name, limit=10_000)["rows"]]


def _one_seed(home: Any, seed: int) -> _Seed:
    task = make_task(seed)
    train = DataLoader(
        task.train, batch_size=32, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
    figures = _Seed(task, train)
    model = make_model(seed)
    run_paused(
        home,
        {
            PAUSE_AT: figures.at_pause,
            PAUSE_AT + FORK_STEPS: figures.after(FORK_STEPS),
            PAUSE_AT + 2 * FORK_STEPS: figures.after(2 * FORK_STEPS),
        },
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
        train=train,
        val=DataLoader(task.val, batch_size=256),
        run_name=f"minority-{seed}",
    )
    return figures


def test_merges_against_equal_compute_baselines(benchmark: Any, onthefly_home: Any) -> None:
    pytest.importorskip("sklearn")
    torch.set_num_threads(1)
    seeds: list[_Seed] = []
    benchmark.pedantic(
        lambda: seeds.extend(_one_seed(onthefly_home, s) for s in SEEDS), rounds=1, iterations=1
    )
    rows = list(dict.fromkeys(r for s in seeds for r in [*s.test, *s.val]))
    table = []
    for row in rows:
        values = [s.test[row] for s in seeds if row in s.test]
        applied = [s.applied[row] for s in seeds if row in s.applied]
        gains = [s.val[row] - s.val["parent"] for s in seeds if row in s.val]
        table.append(
            [
                row,
                statistics.mean(values) if values else None,
                statistics.stdev(values) if len(values) > 1 else None,
                statistics.mean(gains) if gains else None,
                f"{sum(applied)}/{len(applied)}" if applied else "",
            ]
        )
    benchmark.extra_info["table"] = {
        "columns": ["model", "test acc", "± sd", "val acc - parent's", "applied"],
        "rows": table,
    }
    # Never worse than the parent on validation, by default.
    for s in seeds:
        for row, applied in s.applied.items():
            assert s.val[row] >= s.val["parent"], (row, applied)
    mean = {row[0]: row[1] for row in table}
    best = max(mean[f"tail: {m}"] for m in METHODS)
    oversample = mean["oversample tail (by hand)"]
    benchmark.extra_info["best default tail merge - oversample"] = best - oversample
    assert best >= oversample - 0.005
