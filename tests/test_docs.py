"""The documentation says what the package does: every setting it reads, every extra it has."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_environment_variable_the_package_reads_is_in_the_configuration_table() -> None:
    read = {
        name
        for path in (ROOT / "onthefly").rglob("*.py")
        for name in re.findall(r"ONTHEFLY_[A-Z_]+", path.read_text(encoding="utf-8"))
    }
    documented = set(
        re.findall(
            r"^\| `(ONTHEFLY_[A-Z_]+)`", (ROOT / "docs" / "configuration.md").read_text(), re.M
        )
    )
    assert read, "the package reads no ONTHEFLY_* variable?"
    assert read <= documented, f"undocumented: {sorted(read - documented)}"


def test_the_readme_lists_exactly_the_extras_that_exist() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    section = pyproject.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^(\w+) = \[", section, re.M))
    listed = set(re.findall(r"^\| `\[(\w+)\]` \|", (ROOT / "README.md").read_text(), re.M))
    assert listed == extras
