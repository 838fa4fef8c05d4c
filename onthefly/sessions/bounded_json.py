"""JSON whose parsed size and depth are bounded before it is parsed.

``json.loads`` turns a text into Python objects several times its size, and how many times
depends on the shape: a list of numbers takes about 4 times its text, ``[[],[],...]`` 21
times, a list of small objects validated into models 24 times; a deep enough nesting raises
``RecursionError``. So :func:`loads` first measures the text with a few passes at C speed
(:func:`measure`: strings blanked by one regular expression, then counts of structural
characters, then the nesting peeled level by level) and refuses a text whose estimated
parsed size (:attr:`Shape.parsed_bytes`) or depth is over its limits, before parsing it.

The estimate is an upper bound for CPython 3.11 on 64 bits, the parser's transient
allocations included, checked against measurements of the worst shapes in
``tests/sessions/test_bounded_json.py``: 64 bytes a value (an integer validated into a float
is two objects), 48 more an object member, 1,024 an object (room for the pydantic model it
may be validated into), 64 an array, 32 and 8 per byte of content a string, and two per byte
of the rest (long integers). A run's history (steps and values) is estimated at under twice
what it takes. While :func:`measure` runs, the text and a copy are in memory.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_INNERMOST = re.compile(rb"\[\]|\{\}")
_NOT_BRACKET = bytes(c for c in range(256) if c not in b"[]{}")

VALUE_BYTES = 64
MEMBER_BYTES = 48
OBJECT_BYTES = 1024
ARRAY_BYTES = 64
STRING_BYTES = 32


class JsonLimitError(ValueError):
    """A JSON text over a depth or size limit (the message says which, and the limit)."""


@dataclass(frozen=True)
class Shape:
    """What a JSON text holds, counted without parsing it.

    Attributes:
        size: bytes of the text.
        values: values, object keys included (an upper bound: commas inside strings are not
            told apart).
        members: object members.
        objects, arrays: containers of each kind.
        strings: strings, keys included.
        string_bytes: bytes inside those strings.
        depth: the deepest nesting of containers (``limit + 1`` when deeper than the limit
            it was measured against).
    """

    size: int
    values: int
    members: int
    objects: int
    arrays: int
    strings: int
    string_bytes: int
    depth: int

    @property
    def parsed_bytes(self) -> int:
        """An upper bound of the memory its parsed (and validated) objects take."""
        return (
            VALUE_BYTES * self.values
            + MEMBER_BYTES * self.members
            + OBJECT_BYTES * self.objects
            + ARRAY_BYTES * self.arrays
            + STRING_BYTES * self.strings
            + 8 * self.string_bytes
            + 2 * (self.size - self.string_bytes)
        )


def measure(text: bytes, max_depth: int) -> Shape:
    """Count what ``text`` holds, nesting up to ``max_depth + 1`` levels.

    Example:
        >>> measure(b'{"a": [1, 2, "x"]}', max_depth=10).depth
        2
    """
    blanked, strings = _STRING.subn(b'""', text)
    string_bytes = len(text) - len(blanked)  # what the strings held, quotes aside
    objects = blanked.count(b"{")
    arrays = blanked.count(b"[")
    members = blanked.count(b":")
    values = blanked.count(b",") + members + objects + arrays + 1
    return Shape(
        size=len(text),
        values=values,
        members=members,
        objects=objects,
        arrays=arrays,
        strings=strings,
        string_bytes=string_bytes,
        depth=_depth(blanked.translate(None, _NOT_BRACKET), max_depth),
    )


def _depth(brackets: bytes, max_depth: int) -> int:
    # Each pass removes the innermost pairs only: matches never overlap, and pairs that a
    # removal makes adjacent are left for the next pass.
    depth = 0
    while brackets and depth <= max_depth:
        peeled = _INNERMOST.sub(b"", brackets)
        if len(peeled) == len(brackets):  # unbalanced: the parser will say where
            return depth
        brackets = peeled
        depth += 1
    return depth


def loads(text: bytes, *, max_depth: int, max_memory: int) -> Any:
    """Parse ``text`` once :func:`measure` says it fits.

    Args:
        text: the JSON document (UTF-8).
        max_depth: the deepest nesting allowed.
        max_memory: the most bytes its parsed objects may take (estimated).

    Raises:
        JsonLimitError: deeper than ``max_depth`` or larger than ``max_memory`` once parsed.
        ValueError: not valid JSON.

    Example:
        >>> loads(b'[1, [2]]', max_depth=2, max_memory=1 << 20)
        [1, [2]]
    """
    shape = measure(text, max_depth)
    if shape.depth > max_depth:
        raise JsonLimitError(
            f"it nests deeper than {max_depth} levels; expected at most {max_depth}"
        )
    if shape.parsed_bytes > max_memory:
        raise JsonLimitError(
            f"it would take about {shape.parsed_bytes >> 20} MiB once parsed ({shape.values} "
            f"values, {shape.objects} objects); expected at most {max_memory >> 20} MiB"
        )
    return json.loads(text)
