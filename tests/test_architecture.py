"""The package is built as ``docs/architecture.md`` says: its rooms import one way, no cycles.

The imports are read from the source (``ast``), every one of them: at module level, inside
functions, and under ``TYPE_CHECKING`` (a deferred or typing-only import still ties two modules
together).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "onthefly"
DOC = ROOT / "docs" / "architecture.md"


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports, anywhere in
    it; ``from a import b`` names ``a.b`` when that is a module, else ``a``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(_owner(alias.name, known) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package the module is in
                anchor = module.split(".") if is_package else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                name = f"{base}.{alias.name}"
                found.add(name if name in known else _owner(base, known))
    return {name for name in found if name and name != module}


def _owner(name: str, known: set[str]) -> str:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    paths = modules()
    known = set(paths)
    return {
        module: imports_of(
            path.read_text(encoding="utf-8"), module, path.name == "__init__.py", known
        )
        for module, path in paths.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def documented_rooms() -> tuple[dict[str, list[str]], dict[str, set[str]]]:
    """From the table of ``docs/architecture.md``: room -> module prefixes, room -> the
    rooms it may import."""
    prefixes: dict[str, list[str]] = {}
    allowed: dict[str, set[str]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[1].startswith("`"):
            continue
        room, names, may = cells
        prefixes[room] = re.findall(r"`([\w.]+)`", names)
        allowed[room] = {r.strip() for r in may.split(",") if r.strip() not in ("", "—")}
    return prefixes, allowed


def room_of(module: str, prefixes: dict[str, list[str]]) -> str | None:
    """The room whose longest module prefix covers ``module``."""
    best: tuple[int, str] | None = None
    for room, names in prefixes.items():
        for name in names:
            if (module == name or module.startswith(name + ".")) and (
                best is None or len(name) > best[0]
            ):
                best = (len(name), room)
    return None if best is None else best[1]


def test_the_package_has_no_import_cycle() -> None:
    found = cycles(import_graph())
    assert not found, "modules that import each other (directly or through others):\n" + "\n".join(
        " <-> ".join(component) for component in found
    )


def test_every_module_is_in_a_documented_room() -> None:
    prefixes, _ = documented_rooms()
    homeless = sorted(m for m in modules() if room_of(m, prefixes) is None)
    assert not homeless, (
        f"modules in no room of docs/architecture.md: {homeless}; expected each under one of "
        "the prefixes of its table (add the module to the room it belongs to)"
    )


def test_the_documented_rooms_are_layered() -> None:
    prefixes, allowed = documented_rooms()
    assert prefixes, "docs/architecture.md has no table of rooms"
    unknown = {r for rooms in allowed.values() for r in rooms} - set(prefixes)
    assert not unknown, f"the table allows imports of rooms it does not define: {unknown}"
    graph = {room: set(rooms) for room, rooms in allowed.items()}
    assert not cycles(graph), "the table lets rooms import each other"


def test_every_import_runs_the_way_the_rooms_allow() -> None:
    prefixes, allowed = documented_rooms()
    against = []
    for module, targets in sorted(import_graph().items()):
        source = room_of(module, prefixes)
        for target in sorted(targets):
            room = room_of(target, prefixes)
            if source is None or room is None or room == source:
                continue
            if room not in allowed[source]:
                against.append(f"{module} ({source}) imports {target} ({room})")
    assert not against, "imports against docs/architecture.md:\n" + "\n".join(against)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}, "c": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_cycles_finds_every_loop(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert cycles(graph) == expected


def test_an_import_counts_inside_a_function_and_for_typing_only() -> None:
    source = """
from typing import TYPE_CHECKING
from . import sibling
if TYPE_CHECKING:
    from pkg.typed import Name
def later():
    import pkg.deferred
    from pkg import sub
"""
    known = {"pkg", "pkg.mod", "pkg.sibling", "pkg.typed", "pkg.deferred", "pkg.sub"}
    assert imports_of(source, "pkg.mod", False, known) == {
        "pkg.sibling",
        "pkg.typed",
        "pkg.deferred",
        "pkg.sub",
    }
