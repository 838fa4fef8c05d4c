"""Every conformance script trains the same with and without OnTheFly (see harness.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conformance.harness import check

SCRIPTS = sorted(
    path.stem for path in (Path(__file__).parent / "scripts").glob("*.py") if path.stem[0] != "_"
)


@pytest.mark.parametrize("name", SCRIPTS)
def test_script_trains_the_same_and_the_client_sees_it(
    name: str, onthefly_home: Path, capfd: Any
) -> None:
    check(name, onthefly_home, capfd)
