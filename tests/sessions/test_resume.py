"""Continuing from an export gives the uninterrupted run's losses, bit for bit (CPU)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from onthefly.errors import SessionFileError
from onthefly.sessions.archive import SessionArchive
from tests.sessions.training import Losses, Noisy, lightning_run, native_run

ROOT = Path(__file__).resolve().parents[2]
STEPS = 15  # 6 batches per epoch: the export at step 8 is in the middle of epoch 1
EXPORT_AT = 8


@pytest.mark.parametrize("generator", [False, True], ids=["global", "own-generator"])
@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("run", [native_run, lightning_run], ids=["native", "lightning"])
def test_resumed_losses_equal_the_uninterrupted_run(
    run, workers: int, generator: bool, tmp_path: Path
) -> None:
    path = tmp_path / "mid.otf"
    full = run(STEPS, workers, generator=generator).losses
    first = run(
        EXPORT_AT, workers, Losses(export_at=EXPORT_AT, path=path), generator=generator
    ).losses
    with SessionArchive(path) as archive:
        assert (archive.manifest.step, archive.manifest.epoch) == (EXPORT_AT, 1)
        assert archive.manifest.batch_in_epoch == 2
    rest = run(STEPS, workers, resume_from=path, generator=generator).losses

    assert len(first) == EXPORT_AT and len(rest) == STEPS - EXPORT_AT
    assert torch.equal(torch.tensor(first + rest, dtype=torch.float64), torch.tensor(full))


@pytest.mark.parametrize("workers", [0, 2])
def test_lightning_gives_the_same_numbers_with_and_without_onthefly(workers: int) -> None:
    bare = lightning_run(STEPS, workers, generator=True, attach=False).losses
    assert lightning_run(STEPS, workers, generator=True).losses == bare


def test_a_new_process_resumes_exactly(tmp_path: Path) -> None:
    path = tmp_path / "mid.otf"
    full = native_run(STEPS, 2).losses
    first = native_run(EXPORT_AT, 2, Losses(export_at=EXPORT_AT, path=path)).losses
    done = subprocess.run(
        [sys.executable, "-m", "tests.sessions.resume_script", str(path), str(STEPS), "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    rest = json.loads(done.stdout.splitlines()[-1])
    assert [repr(x) for x in first + rest] == [repr(x) for x in full]


def test_a_native_export_does_not_resume_under_lightning(tmp_path: Path) -> None:
    path = tmp_path / "native.otf"
    native_run(3, losses=Losses(export_at=3, path=path))
    with pytest.raises(SessionFileError, match="exported from a native run"):
        lightning_run(6, resume_from=path)


def test_a_model_that_does_not_match_is_refused_with_its_keys(tmp_path: Path) -> None:
    import onthefly

    path = tmp_path / "run.otf"
    native_run(3, losses=Losses(export_at=3, path=path))
    other = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))
    trainer = onthefly.Trainer(project="resume", max_steps=5, progress_bar=False, quiet=True)
    with pytest.raises(SessionFileError) as caught:
        trainer.fit(
            model=other,
            optimizer=torch.optim.SGD(other.parameters(), lr=0.1),
            loss_fn=nn.CrossEntropyLoss(),
            train_loader=[(torch.zeros(2, 6), torch.zeros(2, dtype=torch.long))],
            resume_from=path,
        )
    message = str(caught.value)
    assert "missing keys: 2.bias, 2.weight" in message
    assert "unexpected keys: 3.bias, 3.weight" in message
    assert "mis-shaped keys: 0.bias (file (16,), model (8,))" in message


@pytest.mark.parametrize("workers", [0, 2])
def test_lightning_resumes_its_first_epoch_with_the_loader_s_own_generator(
    workers: int, tmp_path: Path
) -> None:
    # Lightning creates the first epoch's iterator itself: its start state is the one taken
    # when the loader was requested, before that iterator drew from the generator.
    path = tmp_path / "first-epoch.otf"
    full = lightning_run(STEPS, workers, generator=True).losses
    first = lightning_run(3, workers, Losses(export_at=3, path=path), generator=True).losses
    rest = lightning_run(STEPS, workers, resume_from=path, generator=True).losses
    assert first + rest == full


@pytest.mark.parametrize("run", [native_run, lightning_run], ids=["native", "lightning"])
def test_the_per_sample_store_resumes_as_the_uninterrupted_run_s(run, tmp_path: Path) -> None:
    # Shuffled, two workers, exported in the middle of an epoch.
    path = tmp_path / "mid.otf"
    full = run(STEPS, 2)
    run(EXPORT_AT, 2, Losses(export_at=EXPORT_AT, path=path))
    resumed = run(STEPS, 2, resume_from=path)

    expected, got = full.store["training"], resumed.store["training"]
    assert set(got) == set(expected)
    for name, value in expected.items():
        assert torch.equal(torch.as_tensor(got[name]), torch.as_tensor(value)), name
    # Every sample was credited to its own index: its stored label is its dataset label.
    labels = got["label"][: len(Noisy())].numpy()
    assert (labels == Noisy().y.numpy()).all()
    assert int(got["count"].sum()) == STEPS * 8  # every sample of every step, once
