"""The fork subcommands of the ``onthefly`` CLI: ``fork``, ``forks``, ``compare``, ``merge``,
``discard-merge`` and ``lineage``.

Each is an argument builder plus a call ``(client, args) -> (reply data, text renderer)``;
:mod:`onthefly.cli.entry` lists them in its table. Never imports torch.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from onthefly.cli.runner import Rendered
from onthefly.cli.samples import criterion_arguments, criterion_of
from onthefly.client import resolve
from onthefly.errors import CommandError, ConfigurationError, OnTheFlyError

if TYPE_CHECKING:
    from onthefly.client import Client

METHODS = ("soup", "greedy", "fisher", "distill", "adapter")


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _numbers(text: str, kind: Callable[[str], Any], what: str) -> list[Any]:
    try:
        return [kind(part) for part in _names(text)]
    except ValueError:
        raise ConfigurationError(f"{what} {text!r}: expected comma-separated numbers") from None


@contextmanager
def _about(what: str) -> Iterator[None]:
    """A refused command's error names what it was about: ``fork 'hard': ...``."""
    try:
        yield
    except CommandError as exc:
        raise CommandError(exc.code, f"{what}: {exc.message}") from None


# ---------------------------------------------------------------------- fork


def fork_arguments(parser: argparse.ArgumentParser) -> None:
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--selection", metavar="NAME", help="a named selection of the train split")
    chosen.add_argument("--indices", metavar="I,J,...", help="explicit dataset indices")
    criterion_arguments(parser, chosen)
    parser.add_argument("--source", choices=("training", "scan"), help="data of a criterion")
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--steps", type=int, metavar="N", help="train N optimizer steps")
    budget.add_argument("--epochs", type=int, metavar="N", help="train N passes over the slice")
    parser.add_argument("--name", help="the fork's name (default fork-N)")
    parser.add_argument("--lr", type=float, help="learning rate (default: the run's)")
    parser.add_argument("--batch-size", type=int, metavar="N", help="(default: the run's)")
    parser.add_argument("--optimizer", choices=("fresh", "clone"), default="fresh")
    parser.add_argument("--adapter-rank", type=int, metavar="R", help="train rank-R adapters only")
    parser.add_argument(
        "--replay",
        type=float,
        default=0.0,
        metavar="R",
        help="share of batches from the rest of the training set (e.g. 0.5 for a narrow slice)",
    )


def fork(client: Client, args: argparse.Namespace) -> Rendered:
    with _about(f"fork {args.name!r}" if args.name else "fork"):
        data = _fork(client, args)
    if data.get("status") == "failed":
        raise OnTheFlyError(f"the fork {data['name']!r} failed: {data.get('message')}")
    return data, lambda: render_fork(data)


def _fork(client: Client, args: argparse.Namespace) -> dict[str, Any]:
    return client.fork(
        steps=args.steps,
        epochs=args.epochs,
        name=args.name,
        lr=args.lr,
        batch_size=args.batch_size,
        optimizer=args.optimizer,
        adapter_rank=args.adapter_rank,
        replay=args.replay,
        source=args.source,
        **_slice(args),
    )


def _slice(args: argparse.Namespace) -> dict[str, Any]:
    if args.selection is not None:
        return {"selection": args.selection}
    if args.indices is not None:
        return {"indices": _numbers(args.indices, int, "--indices")}
    return criterion_of(args)


def render_fork(data: dict[str, Any]) -> str:
    """``fork 'hard' done: 200 steps in 3.1 s on 500 samples; slice loss 1.73 -> 0.41``."""
    size = (data.get("selection") or {}).get("size")
    head = (
        f"fork {data['name']!r} {data['status']}: {data['steps']} steps in "
        f"{data['duration']:.2f} s on {size} samples from step {data['parent_step']}"
    )
    loss = f"; slice loss {_number(data['parent_slice_loss'])} -> {_number(data['slice_loss'])}"
    text = head + (loss if data.get("slice_loss") is not None else "") + f" (run {data['run']})"
    return "\n".join([text, *(f"warning: {w}" for w in data.get("warnings") or ())])


# ---------------------------------------------------------------------- forks


def forks(client: Client, args: argparse.Namespace) -> Rendered:
    data = client.forks()
    return data, lambda: render_forks(data["forks"])


def render_forks(records: Sequence[dict[str, Any]]) -> str:
    """One line per fork: name, status, step forked, steps, slice size and losses."""
    if not records:
        return "no forks yet"
    columns = ("name", "status", "from step", "steps", "samples", "parent loss", "fork loss")
    lines = ["  ".join(f"{c:>11}" for c in columns)]
    for r in records:
        values = (
            r["name"],
            r["status"],
            r["parent_step"],
            r["steps"],
            (r.get("selection") or {}).get("size"),
            r["parent_slice_loss"],
            r["slice_loss"],
        )
        lines.append("  ".join(f"{_number(v):>11}" for v in values))
    return "\n".join(lines)


# ---------------------------------------------------------------------- compare


class _RunThenForks(argparse.Action):
    """``[RUN] FORK ...``: the first name is RUN when it names a live session."""

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        namespace.run, namespace.forks = split_run(list(values or ()))


def compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "names",
        nargs="*",
        action=_RunThenForks,
        metavar="[RUN] FORK",
        help="the forks to compare (default: all); a first name that names a live session is RUN",
    )
    parser.add_argument("--rest-max", type=int, default=10_000, metavar="N", help="(default 10000)")
    parser.add_argument(
        "--no-baselines",
        dest="baselines",
        action="store_false",
        help="skip the rows of the model trained on for each fork's budget",
    )
    parser.set_defaults(run=None, forks=[])


def split_run(names: Sequence[str]) -> tuple[str | None, list[str]]:
    """``(RUN, forks)``: the first name is RUN when it names a live session."""
    if names:
        from onthefly.server.discovery import list_sessions

        if any(resolve.matches(session, names[0]) for session in list_sessions()):
            return names[0], list(names[1:])
    return None, list(names)


def compare(client: Client, args: argparse.Namespace) -> Rendered:
    with _about("compare of " + (", ".join(repr(f) for f in args.forks) or "every fork")):
        data = client.compare(*args.forks, rest_max=args.rest_max, baselines=args.baselines)
    if data.get("cancelled"):
        return data, lambda: "compare: cancelled"

    def text() -> str:
        table = render_table(data["targets"], data["rows"], "model")
        return "\n".join([table, *(f"note: {n}" for n in data.get("notes") or ())])

    return data, text


def render_table(
    targets: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]], first: str
) -> str:
    """Rows of models (or before/after), and per target its loss and accuracy."""
    heads = [f"{t['name']} ({t['kind']}, {t['samples']})" for t in targets]
    width = max([19, *(len(h) for h in heads)])
    label = max([12, *(len(str(r[first])) for r in rows)])
    lines = [" " * label + "".join(f" | {h:<{width}}" for h in heads)]
    lines.append(" " * label + f" | {'loss':>9} {'acc':>9}".ljust(width + 3) * len(targets))
    for row in rows:
        cells = [
            f" | {_number(loss):>9} {_number(acc):>9}".ljust(width + 3)
            for loss, acc in zip(row["loss"], row["accuracy"], strict=True)
        ]
        lines.append(f"{row[first]!s:<{label}}" + "".join(cells))
    return "\n".join(line.rstrip() for line in lines)


# ---------------------------------------------------------------------- merge


def merge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--method", choices=METHODS, required=True, help="how to merge")
    parser.add_argument(
        "--from", dest="sources", required=True, metavar="A,B", help="the forks to merge"
    )
    parser.add_argument("--name", help="the merge's name (default merge-N)")
    parser.add_argument("--weights", metavar="W,...", help="soup: parent first; adapter: per fork")
    parser.add_argument("--optimizer", choices=("keep", "reset"), default="keep")
    parser.add_argument("--steps", type=int, default=100, metavar="N", help="distill steps")
    parser.add_argument("--lr", type=float, help="distill learning rate (default: the run's)")
    parser.add_argument("--temperature", type=float, help="distill temperature (default: grid)")
    parser.add_argument("--strength", type=float, help="distill loss weight (default: grid)")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        metavar="T",
        help="apply only if validation (error rate, else loss) worsens by at most T (relative)",
    )
    parser.add_argument("--force", action="store_true", help="apply even if validation is worse")


def merge(client: Client, args: argparse.Namespace) -> Rendered:
    sources = _names(args.sources)
    with _about(f"{args.method} merge of {', '.join(repr(s) for s in sources)}"):
        data = client.merge(
            args.method,
            sources,
            name=args.name,
            weights=None if args.weights is None else _numbers(args.weights, float, "--weights"),
            optimizer=args.optimizer,
            steps=args.steps,
            lr=args.lr,
            temperature=args.temperature,
            strength=args.strength,
            tolerance=args.tolerance,
            force=args.force,
        )
    if data.get("cancelled"):
        return data, lambda: f"merge {data.get('name')!r}: cancelled"
    return data, lambda: render_merge(data)


def render_merge(data: dict[str, Any]) -> str:
    """The merge's head line, what it chose, whether it was applied, its before/after table."""
    kept = f"; kept {', '.join(data['kept'])}" if data.get("kept") else ""
    if data.get("applied", True):
        state = "kept" if data["optimizer"] == "keep" else "reset"
        tail = f"; optimizer state {state} (run {data['run']})"
    else:
        tail = ": NOT APPLIED"
    head = (
        f"merge {data['name']!r}: {data['method']} of the model at step {data['step']} and "
        f"{', '.join(data['forks'])}{kept}{tail}"
    )
    lines = [head]
    if data.get("choice"):
        chosen = ", ".join(f"{k} {_shown(v)}" for k, v in data["choice"].items())
        lines.append(f"chosen on validation: {chosen} (best of {len(data.get('grid') or [])})")
    if data.get("reason"):
        lines.append(data["reason"])
    rows = [{"when": "before", **data["before"]}, {"when": "after", **data["after"]}]
    return "\n".join([*lines, render_table(data["targets"], rows, "when")])


def _shown(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    return _number(value)


def discard(client: Client, args: argparse.Namespace) -> Rendered:
    data = client.discard_merge()
    return (
        data,
        lambda: (
            f"discarded merge {data['name']!r}: back to {data['active']} at step {data['step']}"
        ),
    )


# ---------------------------------------------------------------------- lineage


def lineage(client: Client, args: argparse.Namespace) -> Rendered:
    data = client.lineage()
    return data, lambda: render_lineage(data)


def render_lineage(data: dict[str, Any]) -> str:
    """The DAG as a tree by parent; a merge also names the forks it merged."""
    nodes = {n["run"]: n for n in data["nodes"]}
    sources: dict[str, list[str]] = {}
    for edge in data["edges"]:
        if edge["kind"] == "merge" and nodes[edge["target"]]["parent"] != edge["source"]:
            sources.setdefault(edge["target"], []).append(nodes[edge["source"]]["name"])
    children: dict[str | None, list[dict[str, Any]]] = {}
    for node in data["nodes"]:
        children.setdefault(node["parent"], []).append(node)
    lines: list[str] = []

    def visit(node: dict[str, Any], prefix: str, last: bool, root: bool) -> None:
        branch = "" if root else ("└─ " if last else "├─ ")
        active = " *" if node["run"] == data["active"] else ""
        lines.append(f"{prefix}{branch}{node['name']} ({_describe(node, sources)}){active}")
        kids = children.get(node["run"], [])
        inner = prefix + ("" if root else ("   " if last else "│  "))
        for i, child in enumerate(kids):
            visit(child, inner, i == len(kids) - 1, False)

    for root in children.get(None, []):
        visit(root, "", True, True)
    return "\n".join(lines) + "\n* active: the model the run trains"


def _describe(node: dict[str, Any], sources: dict[str, list[str]]) -> str:
    if node["kind"] == "main":
        return f"main, {node['status']}"
    at = f"at step {node['parent_step']}"
    if node["kind"] == "merge":
        merged = " + ".join(sources.get(node["run"], []))
        return f"{node['method']} merge {at} with {merged}, {node['status']}"
    loss = ""
    if node.get("slice_loss") is not None:
        loss = f", slice loss {_number(node['parent_slice_loss'])} -> {_number(node['slice_loss'])}"
    size = (node.get("selection") or {}).get("size")
    return f"fork {at}, {node['status']}: {node['steps']} steps on {size} samples{loss}"
