"""Hypothesis strategies for client frames, derived from the protocol's own JSON Schema.

Every command model of :mod:`onthefly.protocol` gives its fields' schemas (types, bounds,
lengths, patterns, enums). From them this module draws, per command type:

* valid commands (values inside every bound);
* commands with one field out of range, of the wrong type, missing, or an unknown field;
* envelopes that are not commands at all: random JSON, non-JSON text and bytes, ids that
  cannot be read, unknown types.

A :class:`Frame` carries the wire text and what the protocol says of it (parsed locally
with the same adapter the server uses): whether it is a valid command, and which id its
answer must repeat. Paths in valid commands always point into a sandbox folder, so a
valid ``export`` never writes outside it.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from onthefly.protocol import CLIENT_COMMAND, MAX_FRAME_BYTES, Command

MODELS: dict[str, type[BaseModel]] = {
    model.model_fields["type"].default: model
    for model in typing.get_args(typing.get_args(Command)[0])
}
"""Every command type and its model."""

NEUTRAL = frozenset(
    {"subscribe", "unsubscribe", "history", "status", "ping", "pause", "resume", "test"}
    | {"health", "export", "checkpoints", "snapshot", "scan", "cancel", "histogram"}
    | {"quantiles", "select", "selections", "selection_rows", "export_selection"}
    | {"data_map", "explorer", "forks", "lineage", "compare"}
)
"""Commands that must leave the run's computation unchanged, so they are also sent valid.
Every other command (``set``, ``stop``, ``restore``, ``import``, and any command added
later) may legitimately change what the run computes: it is sent with invalid arguments
only."""

ENDING_FIELDS = {("resume", "steps"), ("resume", "epochs")}
"""Fields of a neutral command that would give the run a new end (resume for N more steps):
the run would finish mid-fuzz, so valid frames leave them out (invalid ones still try them)."""

PATH_FIELDS = {("export", "path"), ("import", "path"), ("export_selection", "directory")}
"""Fields naming a place on disk: valid values are replaced by sandbox paths."""

_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from("/.\\\x00~"),
    max_size=20,
)
_SURROGATE = st.sampled_from(["\ud800", "x\udfff", "\udbff\udc00"])  # the last one is a pair
_JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats() | _TEXT
JSON_VALUES = st.recursive(
    _JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=12,
)
"""Any JSON value (floats include NaN and infinities, which Python's json writes)."""


@dataclass(frozen=True)
class Frame:
    """One frame to send and what its answer must be.

    Attributes:
        wire: the text (or bytes) sent.
        kind: the command type it names, if any (``None`` for garbage).
        valid: whether the protocol accepts it as a command.
        answer_id: the id its single answer must carry (``None``: unreadable id).
    """

    wire: str | bytes
    kind: str | None
    valid: bool
    answer_id: str | None

    @property
    def size(self) -> int:
        return len(self.wire.encode() if isinstance(self.wire, str) else self.wire)


def frame(data: Any, *, binary: bool = False) -> Frame:
    """A frame for a JSON value, classified by the protocol's adapter."""
    text = json.dumps(data)  # ASCII: lone surrogates travel as \\ud800 escapes
    data = json.loads(text)  # what the server reads (an escaped surrogate pair is one char)
    kind = data.get("type") if isinstance(data, dict) else None
    valid = False
    if isinstance(data, dict):
        try:
            CLIENT_COMMAND.validate_python(data)
            valid = True
        except ValidationError:
            pass
    wire: str | bytes = text.encode() if binary else text
    small = len(text) <= MAX_FRAME_BYTES
    return Frame(wire, kind if isinstance(kind, str) else None, valid and small, _id(data))


def _id(data: Any) -> str | None:
    """The id an answer can repeat: a printable-as-UTF-8 string of 1 to 64 characters."""
    if not isinstance(data, dict):
        return None
    raw = data.get("id")
    if not isinstance(raw, str) or not 0 < len(raw) <= 64:
        return None
    try:
        raw.encode()
    except UnicodeEncodeError:
        return None
    return raw


# --------------------------------------------------------------------------- field values


def _bounds(schema: dict[str, Any]) -> tuple[Any, Any, bool, bool]:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    return (
        (lo if xlo is None else xlo),
        (hi if xhi is None else xhi),
        xlo is not None,
        (xhi is not None),
    )


def valid_value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values inside every constraint of ``schema``."""
    if "anyOf" in schema:
        return st.one_of([valid_value(option) for option in schema["anyOf"]])
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind == "integer":
        lo, hi, xlo, xhi = _bounds(schema)
        return st.integers(
            None if lo is None else lo + xlo, None if hi is None else min(hi - xhi, 10**12)
        )
    if kind == "number":
        lo, hi, xlo, xhi = _bounds(schema)
        return st.floats(
            lo, hi, allow_nan=False, allow_infinity=False, exclude_min=xlo, exclude_max=xhi
        )
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        low, high = schema.get("minLength", 0), min(schema.get("maxLength", 40), 40)
        return st.text(st.characters(codec="utf-8"), min_size=low, max_size=high).filter(
            lambda s: len(s) >= low
        )
    if kind == "array":
        if "prefixItems" in schema:
            return st.tuples(*(valid_value(item) for item in schema["prefixItems"])).map(list)
        low = schema.get("minItems", 0)
        high = min(schema.get("maxItems", 8), 8)
        return st.lists(valid_value(schema.get("items", {})), min_size=low, max_size=high)
    return JSON_VALUES


def invalid_value(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that break ``schema``: out of range, too long, off-pattern or of another type."""
    options: list[st.SearchStrategy[Any]] = [
        st.sampled_from([{}, [], "x", 1.5, True, None, -1, 2**64, "\x00", "../../etc/passwd"]),
        _SURROGATE,
        JSON_VALUES,
    ]
    for branch in schema.get("anyOf", [schema]):
        lo, hi, xlo, xhi = _bounds(branch)
        if lo is not None:
            options.append(st.sampled_from([lo if xlo else lo - 1, lo - 10**9, -(2**63) - 1]))
        if hi is not None:
            options.append(st.sampled_from([hi if xhi else hi + 1, hi * 1000 + 1, 2**63]))
        if branch.get("type") == "number":
            options.append(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
        if "maxLength" in branch:
            options.append(st.just("a" * (branch["maxLength"] + 1)))
        if branch.get("minLength"):
            options.append(st.just(""))
        if "pattern" in branch:
            options.append(st.sampled_from(["../x", "a/b", ".hidden", "", "a" * 65, " x"]))
        if "maxItems" in branch:
            options.append(st.just([0.5] * (branch["maxItems"] + 1)))
    return st.one_of(options)


# --------------------------------------------------------------------------- commands


def _schema(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = MODELS[kind].model_json_schema()
    return schema


_SCHEMAS = {kind: _schema(kind) for kind in MODELS}
_IDS = st.integers(0, 10**9).map(lambda n: f"f{n}")


@st.composite
def valid_command(draw: st.DrawFn, kind: str, sandbox: str, run: str) -> dict[str, Any]:
    """A command of ``kind`` whose every field is in range (paths inside ``sandbox``)."""
    schema = _SCHEMAS[kind]
    fields: dict[str, Any] = {"type": kind, "id": draw(_IDS)}
    for name, prop in schema["properties"].items():
        if name in ("type", "id") or (kind, name) in ENDING_FIELDS:
            continue
        if (kind, name) in PATH_FIELDS:
            fields[name] = f"{sandbox}/{draw(st.from_regex(r'[a-z]{1,8}', fullmatch=True))}"
            if kind == "export_selection":
                fields[name] = sandbox
        elif name == "run":
            fields[name] = draw(st.sampled_from([None, run]))
        elif name in schema.get("required", []) or draw(st.booleans()):
            fields[name] = draw(valid_value(prop))
    if kind == "export_selection" and fields.get("file") is not None:
        fields["file"] = draw(st.from_regex(r"[a-z]{1,8}", fullmatch=True))
    return fields


@st.composite
def broken_command(draw: st.DrawFn, kind: str) -> dict[str, Any]:
    """A command of ``kind`` with one field out of range, of a wrong type, missing or unknown."""
    schema = _SCHEMAS[kind]
    fields: dict[str, Any] = {"type": kind, "id": draw(_IDS)}
    for name in schema.get("required", []):
        if name not in fields:
            fields[name] = draw(valid_value(schema["properties"][name]))
    how = draw(st.sampled_from(["field", "field", "field", "extra", "missing", "id"]))
    names = [n for n in schema["properties"] if n != "type"]
    if how == "field":
        name = draw(st.sampled_from(names))
        fields[name] = draw(invalid_value(schema["properties"][name]))
    elif how == "extra":
        fields[draw(_TEXT.filter(lambda n: n not in schema["properties"]))] = draw(JSON_VALUES)
    elif how == "missing":
        fields.pop(draw(st.sampled_from(["id", *schema.get("required", [])])), None)
    else:
        fields["id"] = draw(invalid_value(schema["properties"]["id"]))
    return fields


def commands(sandbox: str, run: str) -> st.SearchStrategy[Frame]:
    """Valid and broken commands of every type; valid ones only where they leave the
    training's computation unchanged."""
    valid = [valid_command(kind, sandbox, run) for kind in sorted(NEUTRAL)]
    broken = [broken_command(kind) for kind in sorted(MODELS)]
    return (
        st.one_of(st.one_of(valid), st.one_of(broken))
        .map(frame)
        .filter(lambda f: not f.valid or f.kind in NEUTRAL)
    )


def garbage() -> st.SearchStrategy[Frame]:
    """Frames that are not commands: any JSON, unknown types, text and bytes that are not JSON."""
    envelope = st.fixed_dictionaries(
        {"type": _TEXT | JSON_VALUES, "id": _IDS | JSON_VALUES | _SURROGATE},
        optional={"run": JSON_VALUES, "since": JSON_VALUES},
    )
    not_json = st.one_of(
        st.text(max_size=60).filter(_not_json).map(lambda t: Frame(t, None, False, None)),
        st.binary(max_size=60).filter(_not_json).map(lambda b: Frame(b, None, False, None)),
    )
    return st.one_of(
        JSON_VALUES.map(frame),
        envelope.map(frame),
        envelope.map(lambda data: frame(data, binary=True)),
        not_json,
    )


def _not_json(raw: str | bytes) -> bool:
    try:
        json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return True
    return False


def any_frame(sandbox: str, run: str) -> st.SearchStrategy[Frame]:
    """Mostly commands (valid and broken), some garbage."""
    return st.one_of(commands(sandbox, run), commands(sandbox, run), garbage())
