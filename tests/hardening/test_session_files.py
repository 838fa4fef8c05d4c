"""Crafted session files against every reader, and the memory the worst allowed file takes.

Each crafted file (a real export with one member rewritten, or a file built from scratch)
goes through ``onthefly inspect`` (a real process), ``onthefly view`` (its server), ``import``
into a live run and ``resume_from`` under both drivers. Checked: every reader answers with a
``SessionFileError`` (``file_error`` over the wire) that names the member; none raises
anything else (``RecursionError``, ``FileExistsError``, ``ValueError``) or shows a private
path. Then the worst file the limits allow, in each of the costliest shapes, is read as
``onthefly view`` reads it, in a process of its own whose peak memory is measured: it stays
under ``max_json_bytes + max_json_memory`` (4 times the largest member). The default suite
measures with limits scaled down to 32 MiB; ``make stress`` with the defaults and records the
figures.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

import onthefly
from onthefly.errors import SessionFileError
from onthefly.sessions import view
from onthefly.sessions.archive import Limits
from onthefly.sessions.manifest import HISTORY, TRAINER
from tests.hardening.figures import record
from tests.hardening.process import ROOT
from tests.hardening.session_files import SHAPES, deep, limits_argument, wide, worst_history
from tests.hardening.thread_run import live_run
from tests.hardening.wire import Wire
from tests.sessions.test_archive import manifest_bytes, zip_with
from tests.sessions.training import Losses, lightning_run, native_run

READERS = {
    "deep manifest": {"inspect", "view", "resume", "import"},
    "file and folder": {"inspect", "view", "resume", "import"},
    "deep history": {"view", "resume"},
    "one value per step": {"view", "resume"},
    "wide history": {"view", "resume"},
    "trainer state of another run": {"resume", "import"},
}
"""Which readers meet each crafted file's fault (``inspect`` reads only the manifest and the
member names, ``view`` no state, ``import`` no history)."""


def rewritten(source: Path, target: Path, replaced: dict[str, bytes]) -> Path:
    """A copy of ``source`` with the members ``replaced`` (name -> content) replaced or added."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            if info.filename not in replaced:
                new.writestr(info, old.read(info))
        for name, data in replaced.items():
            new.writestr(name, data, zipfile.ZIP_DEFLATED)
    return target


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("exports")
    files = {"native": folder / "native.otf", "lightning": folder / "lightning.otf"}
    native_run(3, losses=Losses(export_at=3, path=files["native"]))
    lightning_run(3, losses=Losses(export_at=3, path=files["lightning"]))
    return files


def crafted(source: Path, folder: Path) -> dict[str, tuple[Path, str]]:
    """Crafted files from the export ``source``: name -> (file, what its error must name)."""
    folder.mkdir(exist_ok=True)
    with zipfile.ZipFile(source) as archive:
        manifest = archive.read("manifest.json")
    deep_manifest = manifest.replace(b'"trainer":{', b'"trainer":{"x":' + deep(100_000) + b",", 1)
    cases = {
        "deep manifest": (
            rewritten(source, folder / "a.otf", {"manifest.json": deep_manifest}),
            "manifest.json",
        ),
        "deep history": (
            rewritten(source, folder / "b.otf", {HISTORY: deep(100_000)}),
            HISTORY,
        ),
        "file and folder": (
            rewritten(source, folder / "c.otf", {"files/x": b"1", "files/x/y": b"2"}),
            "'files/x' both as a file and as a folder",
        ),
        "one value per step": (
            rewritten(
                source,
                folder / "d.otf",
                {HISTORY: _history_with(steps=[1, 2], values=[0.5])},
            ),
            "history/history.json is not a valid Snapshot",
        ),
        "trainer state of another run": (
            rewritten(source, folder / "f.otf", {TRAINER: _saved({"optimizer": {}})}),
            TRAINER,
        ),
        "wide history": (  # 24 MB of text that would take over 768 MiB once parsed
            rewritten(source, folder / "e.otf", {HISTORY: wide(6_000_000)}),
            f"{HISTORY} was refused",
        ),
    }
    return {name: (path, expected) for name, (path, expected) in cases.items()}


def _saved(obj: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _history_with(steps: list[int], values: list[float]) -> bytes:
    run = {"run": "r", "project": "p", "name": "n", "state": "finished", "step": 0, "epoch": 0}
    run |= {"started_at": 0.0, "series": {"loss": {"steps": steps, "values": values}}}
    snapshot = {"type": "snapshot", "v": 1, "session": "s", "seq": 0, "time": 0.0}
    return json.dumps({**snapshot, "runs": [run], "logs": []}).encode()


def inspect_cli(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "onthefly", "inspect", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _resume(driver: str, path: Path) -> None:
    if driver == "lightning":
        lightning_run(6, resume_from=path)
        return
    model = torch.nn.Sequential(
        torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 2)
    )
    trainer = onthefly.Trainer(project="p", max_steps=6, progress_bar=False, quiet=True)
    trainer.fit(
        model=model,
        optimizer=torch.optim.Adam(model.parameters(), lr=0.01),
        loss_fn=torch.nn.CrossEntropyLoss(),
        train_loader=[(torch.zeros(2, 6), torch.zeros(2, dtype=torch.long))],
        resume_from=path,
    )


def refusal(reader: str, path: Path, driver: str) -> str | None:
    """The ``SessionFileError`` message ``reader`` answers ``path`` with (``None``: none)."""
    if reader == "inspect":
        done = inspect_cli(path)
        assert "Traceback" not in done.stderr, done.stderr
        return done.stderr if done.returncode != 0 else None
    try:
        if reader == "view":
            view.serve(path, port=0, quiet=True).close()
        else:
            _resume(driver, path)
    except SessionFileError as exc:
        return str(exc)
    return None


def check(name: str, reader: str, message: str | None, expected: str) -> None:
    assert message is not None, (name, reader, "accepted")
    assert expected in message, (name, reader, message)
    assert "Recursion" not in message, (name, reader, message)
    assert re.search(r"onthefly-\w{8}", message) is None, (name, reader, message)  # a temp folder


@pytest.mark.parametrize("driver", ["native", "lightning"])
def test_crafted_files_are_refused_by_every_reader_naming_the_member(
    driver: str, exports: dict[str, Path], tmp_path: Path
) -> None:
    for name, (path, expected) in crafted(exports[driver], tmp_path).items():
        for reader in sorted(READERS[name] - {"import"}):
            check(name, reader, refusal(reader, path, driver), expected)


def test_crafted_files_are_refused_by_import_into_a_live_run(
    onthefly_home: Path, tmp_path: Path
) -> None:
    with live_run(onthefly_home, tmp_path) as session:
        wire = Wire(session)
        assert wire.call("pause")["type"] == "reply"
        own = tmp_path / "own.otf"
        assert wire.call("export", path=str(own), timeout=60)["type"] == "reply"
        for name, (path, expected) in crafted(own, tmp_path / "crafted").items():
            answer = wire.call("import", path=str(path), timeout=60)
            if "import" in READERS[name]:
                assert answer["type"] == "error", (name, answer)
                assert answer["error"]["code"] == "file_error", (name, answer)
                check(name, "import", answer["error"]["message"], expected)
            else:  # its fault is where import does not read: the state loads
                assert answer["type"] == "reply", (name, answer)
        assert wire.call("resume")["type"] == "reply"
        wire.close()


def _read(mode: str, path: Path, limits: Limits) -> dict[str, object]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.hardening.read_session",
            mode,
            str(path),
            limits_argument(limits),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def worst_allowed(folder: Path, limits: Limits) -> dict[str, object]:
    """Read the worst allowed files as ``onthefly view`` does; the peaks, in MiB."""
    figures: dict[str, object] = {}
    peaks = []
    for shape in SHAPES:
        path = worst_history(folder / f"{shape.replace(' ', '-')}.otf", limits, shape)
        got = _read("view", path, limits)
        assert got["error"] is None, got
        added = int(got["peak"]) - int(got["before"])  # type: ignore[call-overload]
        peaks.append(added)
        figures[f"peak_mib[{shape}]"] = round(added / 2**20, 1)
        path.unlink()
    bound = limits.max_json_bytes + limits.max_json_memory
    figures |= {
        "max_json_mib": limits.max_json_bytes >> 20,
        "bound_mib": bound >> 20,
        "worst_peak_mib": round(max(peaks) / 2**20, 1),
        "worst_peak_per_member_limit": round(max(peaks) / limits.max_json_bytes, 2),
    }
    assert max(peaks) <= bound, figures
    return figures


def test_the_worst_allowed_file_stays_within_the_memory_bound(tmp_path: Path) -> None:
    scaled = Limits(max_json_bytes=32 << 20, max_json_memory=96 << 20)
    print("session file memory (scaled):", worst_allowed(tmp_path, scaled))


@pytest.mark.stress
def test_the_worst_allowed_file_under_the_default_limits(tmp_path: Path) -> None:
    figures = worst_allowed(tmp_path, Limits())
    record("session_file_memory", {**figures, **_inspect_bomb(tmp_path)})


def _inspect_bomb(folder: Path) -> dict[str, object]:
    """``onthefly inspect`` of a manifest that inflates to 128 MiB (within the zip ratio)."""
    bomb = manifest_bytes()[:-1] + b',"x":' + wide(32_000_000) + b"}"
    path = zip_with(folder / "bomb.otf", {"manifest.json": bomb}, zipfile.ZIP_DEFLATED)
    got = _read("inspect", path, Limits())
    assert "manifest.json is" in str(got["error"]), got
    added = int(got["peak"]) - int(got["before"])  # type: ignore[call-overload]
    return {"inspect_128_mib_manifest_peak_mib": round(added / 2**20, 1)}


def test_a_manifest_bomb_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    bomb = manifest_bytes()[:-1] + b',"x":' + wide(1_000_000) + b"}"
    path = zip_with(tmp_path / "bomb.otf", {"manifest.json": bomb}, zipfile.ZIP_DEFLATED)
    got = _read("inspect", path, dataclasses.replace(Limits(), max_manifest_bytes=1 << 20))
    assert f"manifest.json is {len(bomb)} bytes; expected at most" in str(got["error"]), got
    assert int(got["peak"]) - int(got["before"]) < 8 << 20  # type: ignore[call-overload]
