"""The manifest of a session file: what it holds and who wrote it (no torch needed to read it).

``manifest.json`` is the first member of every ``.otf`` archive. It is validated with
pydantic before anything else in the file is touched, so a file from a newer OnTheFly, or a
zip that merely looks like a session, is refused with a clear message.
"""

from __future__ import annotations

import platform
import time
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from onthefly.errors import SessionFileError
from onthefly.version import __version__

FORMAT: Final = "onthefly-session"
"""The ``format`` tag every manifest carries."""

FORMAT_VERSION: Final = 1
"""Bumped on any change that an older reader could misread."""

MANIFEST_NAME: Final = "manifest.json"

# The other members (see onthefly.sessions.payload for what each holds).
MODEL: Final = "state/model.pt"
TRAINER: Final = "state/trainer.pt"
RNG: Final = "state/rng.pt"
DATA: Final = "state/data.pt"
HISTORY: Final = "history/history.json"
FILES: Final = "files/"

Driver = Literal["native", "lightning"]
Reason = Literal["export", "pause", "test", "fork", "merge", "request", "end"]


class Manifest(BaseModel):
    """What a session file holds, and the versions that wrote it.

    Attributes:
        format: always ``"onthefly-session"``.
        format_version: the layout version (:data:`FORMAT_VERSION` when written by this code).
        created_at: Unix time of the export.
        onthefly_version / torch_version / lightning_version / python_version: the writer's.
        project, run, run_name: the run's identity; ``parent`` its parent run (lineage).
        driver: ``"native"`` (``onthefly.Trainer``) or ``"lightning"``.
        step, epoch: the trainer's ``global_step`` and ``current_epoch`` when written.
        batch_in_epoch: batches of the current epoch trained on before the export.
        reason: why the file was written (``export``, or a checkpoint ring reason).
        world_size: ranks of the run (RNG states are stored per rank).
        trainer: the trainer's configuration (limits, precision, …) for display.
        members: every other member of the archive with its size in bytes.
    """

    model_config = ConfigDict(extra="forbid")

    format: Literal["onthefly-session"] = FORMAT
    format_version: int = Field(default=FORMAT_VERSION, ge=1)
    created_at: float = Field(default_factory=time.time)
    onthefly_version: str = __version__
    torch_version: str = ""
    lightning_version: str = ""
    python_version: str = Field(default_factory=platform.python_version)
    project: str
    run: str
    run_name: str
    parent: str | None = None
    driver: Driver
    step: int = Field(ge=0)
    epoch: int = Field(ge=0)
    batch_in_epoch: int = Field(default=0, ge=0)
    reason: Reason = "export"
    world_size: int = Field(default=1, ge=1)
    trainer: dict[str, Any] = Field(default_factory=dict)
    members: dict[str, int] = Field(default_factory=dict)


def validate_manifest(document: Any, source: str) -> Manifest:
    """Validate a parsed ``manifest.json``.

    Args:
        document: the parsed member.
        source: the file's name, for messages.

    Raises:
        SessionFileError: not a session manifest, invalid fields, or a newer format version.
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise SessionFileError(
            f"{source} is not an OnTheFly session file: its {MANIFEST_NAME} does not say "
            f"format={FORMAT!r}"
        )
    version = document.get("format_version")
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise SessionFileError(
            f"{source} was written with session format version {version} (OnTheFly "
            f"{document.get('onthefly_version', '?')}); this OnTheFly ({__version__}) reads up to "
            f"version {FORMAT_VERSION}: upgrade OnTheFly to open it"
        )
    try:
        return Manifest.model_validate(document)
    except ValidationError as exc:
        errors = exc.errors()
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in errors[:5]
        )
        more = f"; and {len(errors) - 5} more" if len(errors) > 5 else ""
        raise SessionFileError(f"{source}: invalid {MANIFEST_NAME} ({problems}{more})") from None
