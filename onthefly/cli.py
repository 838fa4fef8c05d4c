"""The ``onthefly`` command: list, inspect, watch and steer live training sessions.

Each subcommand is one small function registered in :data:`SUBCOMMANDS`; adding one means
writing the function and one table row. Exit codes: 0 ok, 1 the command failed (the session
answered with an error or went away), 2 usage error or no reachable session, 130 Ctrl+C,
141 the reader of stdout went away (``onthefly watch | head``).
Errors go to stderr as one line, never a traceback. Never imports torch.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onthefly import __version__, _cli_forks, _cli_samples, _format
from onthefly._waiting import Waiting
from onthefly.errors import (
    AmbiguousSession,
    AuthenticationError,
    ConfigurationError,
    OnTheFlyError,
    SessionNotFound,
)

if TYPE_CHECKING:
    from onthefly.client import Client

OK, FAILED, USAGE, INTERRUPTED, BROKEN_PIPE = 0, 1, 2, 130, 141
_UNREACHABLE = (SessionNotFound, AmbiguousSession, AuthenticationError, ConfigurationError)


def _print_json(document: Any) -> None:
    print(json.dumps(document, allow_nan=False))


def _emit(args: argparse.Namespace, data: dict[str, Any], text: Callable[[], str]) -> None:
    """The reply as one JSON document with ``--json``, else as readable text."""
    if args.json:
        _print_json(data)
    else:
        print(text())


def _client(args: argparse.Namespace) -> Client:
    # Imported here so that `onthefly runs` and `--help` never load websockets.
    from onthefly.client import connect

    return connect(args.run)


# ---------------------------------------------------------------------- subcommands


def _runs(args: argparse.Namespace) -> int:
    from onthefly.server.discovery import list_sessions, sessions_dir

    found = list_sessions()
    if args.json:
        secret = ("token", "url")  # the URL carries the token too
        _print_json([{k: v for k, v in vars(s).items() if k not in secret} for s in found])
    else:
        print(_format.sessions(found, str(sessions_dir())))
    return OK


def _status(args: argparse.Namespace) -> int:
    with _client(args) as client:
        data = client.status()
    _emit(args, data, lambda: _format.status(data))
    return OK


def _watch(args: argparse.Namespace) -> int:
    with _client(args) as client:
        for message in client.watch():
            print(message.model_dump_json() if args.json else _format.stream_line(message))
            sys.stdout.flush()  # a line per event, also when piped
    return OK


SLOW = {
    "compare": "evaluating the models in the training process",
    "merge": "merging in the training process",
    "scan": "evaluating every sample in the training process",
    "fork": "training the fork in the training process",
    "test": "testing in the training process",
    "health": "checking in the training process",
    "export": "writing the session file",
}
"""Subcommands that take seconds, and what the terminal shows while they wait."""


def _waiting(args: argparse.Namespace) -> contextlib.AbstractContextManager[object]:
    what = SLOW.get(args.command)
    return contextlib.nullcontext() if what is None else Waiting(f"{args.command}: {what}")


def _control(call: Callable[[Client, argparse.Namespace], dict[str, Any]]) -> Callable[..., int]:
    """A subcommand that sends one control command and prints its reply."""

    def run(args: argparse.Namespace) -> int:
        with _client(args) as client, _waiting(args):
            data = call(client, args)
        _emit(args, data, lambda: _format.reply(args.command, data))
        return OK

    return run


def _resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epochs", type=int, metavar="N", help="train N more epochs")
    parser.add_argument("--steps", type=int, metavar="N", help="train N more optimizer steps")


def _test_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--label", metavar="L", help="name of this evaluation (default test_N)")


HEALTH_CHECKS = (
    "determinism",
    "gradients",
    "instability",
    "activations",
    "throughput",
    "distribution",
)
HPARAMS = ("lr", "weight_decay", "momentum", "betas", "eps")


def _health_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("check", choices=HEALTH_CHECKS, help="which check to run")


def _health(args: argparse.Namespace) -> int:
    with _client(args) as client, _waiting(args):
        data = client.health(args.check)
    _emit(args, data, lambda: _format.health(data))
    return OK


def _set_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "values",
        nargs="+",
        metavar="NAME=VALUE",
        help="lr=1e-4, weight_decay=0.01, momentum=0.9 or betas=0.9,0.999",
    )
    parser.add_argument("--group", type=int, metavar="N", help="only param group N")
    parser.add_argument("--optimizer", type=int, default=0, metavar="N", help="optimizer N")


def parse_assignments(items: Sequence[str]) -> dict[str, Any]:
    """``["lr=1e-4", "betas=0.9,0.99"]`` as ``{"lr": 0.0001, "betas": (0.9, 0.99)}``.

    Raises:
        ConfigurationError: an item is not ``NAME=VALUE`` with a known name and a number.
    """
    values: dict[str, Any] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or name not in HPARAMS:
            raise ConfigurationError(
                f"{item!r} is not NAME=VALUE with NAME one of {', '.join(HPARAMS)}"
            )
        try:
            numbers = tuple(float(part) for part in text.split(","))
        except ValueError:
            raise ConfigurationError(f"{item!r}: {text!r} is not a number") from None
        if (len(numbers) == 2) != (name == "betas"):
            expected = "two numbers such as 0.9,0.999" if name == "betas" else "one number"
            raise ConfigurationError(f"{item!r}: expected {expected}")
        values[name] = numbers if name == "betas" else numbers[0]
    return values


def _set(args: argparse.Namespace) -> int:
    values = parse_assignments(args.values)
    with _client(args) as client:
        data = client.set_hparams(**values, group=args.group, optimizer=args.optimizer)
    _emit(args, data, lambda: _format.hparam_changes(data))
    return OK


def _path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="the session file (.otf)")


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    _path_argument(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing file")


def _restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", metavar="ID", help="a checkpoint id from `checkpoints`")


def _view_arguments(parser: argparse.ArgumentParser) -> None:
    _path_argument(parser)
    parser.add_argument("--port", type=int, help="first port to try (default: ONTHEFLY_PORT)")


def _inspect_arguments(parser: argparse.ArgumentParser) -> None:
    _path_argument(parser)
    parser.add_argument("--verify", action="store_true", help="check every member's checksum")


def _inspect(args: argparse.Namespace) -> int:
    from onthefly.sessions import summary

    data = summary.summarize(args.path, verify=args.verify)
    _emit(args, data, lambda: summary.render(data))
    return OK


def _view(args: argparse.Namespace) -> int:
    from onthefly.sessions import view

    view.serve_until_interrupted(args.path, port=args.port)
    return OK


def _dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, help="the hub's port (default: ONTHEFLY_HUB_PORT, else 47620)"
    )
    parser.add_argument("--logdir", metavar="DIR", help="also serve the .otf files of DIR")


def _dashboard(args: argparse.Namespace) -> int:
    from onthefly.hub import serve_until_interrupted

    serve_until_interrupted(port=args.port, logdir=args.logdir)
    return OK


def _rendered(
    call: Callable[[Client, argparse.Namespace], _cli_samples.Rendered],
) -> Callable[..., int]:
    """A subcommand whose call returns its reply and how to print it as text."""

    def run(args: argparse.Namespace) -> int:
        with _client(args) as client, _waiting(args):
            data, text = call(client, args)
        _emit(args, data, text)
        return OK

    return run


@dataclass(frozen=True)
class Subcommand:
    """One row of the CLI: its name, help line, handler and extra arguments."""

    name: str
    help: str
    handler: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    takes_run: bool = True


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("runs", "list live sessions", _runs, takes_run=False),
    Subcommand("status", "state, step, epoch and latest metrics of a run", _status),
    Subcommand("watch", "print the run's events until it finishes (Ctrl+C to leave)", _watch),
    Subcommand("pause", "pause at the next batch boundary", _control(lambda c, a: c.pause())),
    Subcommand(
        "resume",
        "resume a paused run",
        _control(lambda c, a: c.resume(epochs=a.epochs, steps=a.steps)),
        _resume_arguments,
    ),
    Subcommand("stop", "stop the run at the next batch boundary", _control(lambda c, a: c.stop())),
    Subcommand(
        "test",
        "evaluate the test loader now",
        _control(lambda c, a: c.test(a.label)),
        _test_arguments,
    ),
    Subcommand(
        "health",
        "run a health check: determinism, gradients, instability, activations, throughput or "
        "distribution",
        _health,
        _health_arguments,
    ),
    Subcommand(
        "set",
        "change lr, weight_decay, momentum, betas or eps at the next boundary",
        _set,
        _set_arguments,
    ),
    Subcommand(
        "export",
        "write the whole session to a .otf file (an existing one only with --overwrite)",
        _control(lambda c, a: c.export(a.path, a.overwrite)),
        _export_arguments,
    ),
    Subcommand(
        "import",
        "load a .otf file's weights and optimizer state into the paused run",
        _control(lambda c, a: c.load_session(a.path)),
        _path_argument,
    ),
    Subcommand(
        "checkpoints", "list the run's checkpoint ring", _control(lambda c, a: c.checkpoints())
    ),
    Subcommand(
        "snapshot", "add a snapshot to the checkpoint ring now", _control(lambda c, a: c.snapshot())
    ),
    Subcommand(
        "restore",
        "load a checkpoint's weights and optimizer state into the paused run",
        _control(lambda c, a: c.restore(a.checkpoint)),
        _restore_arguments,
    ),
    Subcommand(
        "inspect", "show a .otf file's manifest and contents", _inspect, _inspect_arguments, False
    ),
    Subcommand(
        "view",
        "serve a .otf file's history to the dashboard, read-only (Ctrl+C to stop)",
        _view,
        _view_arguments,
        False,
    ),
    Subcommand(
        "dashboard",
        "serve one dashboard for every run on this machine (Ctrl+C to stop)",
        _dashboard,
        _dashboard_arguments,
        False,
    ),
    Subcommand(
        "scan",
        "evaluate every sample of a split with the current model",
        _rendered(_cli_samples.scan),
        _cli_samples.scan_arguments,
    ),
    Subcommand(
        "hist",
        "histogram of the per-sample losses of a split",
        _rendered(_cli_samples.hist),
        _cli_samples.hist_arguments,
    ),
    Subcommand(
        "samples",
        "the highest-loss samples of a split (printed, or exported with --out)",
        _rendered(_cli_samples.samples),
        _cli_samples.samples_arguments,
    ),
    Subcommand(
        "select",
        "make a named selection of samples (top, quantile, loss range, region, cluster)",
        _rendered(_cli_samples.select),
        _cli_samples.select_arguments,
    ),
    Subcommand(
        "fork",
        "train a copy of the paused model on a slice of the training set",
        _rendered(_cli_forks.fork),
        _cli_forks.fork_arguments,
    ),
    Subcommand("forks", "list the session's forks", _rendered(_cli_forks.forks)),
    Subcommand(
        "compare",
        "evaluate the model and forks on each slice, the rest and the validation set",
        _rendered(_cli_forks.compare),
        _cli_forks.compare_arguments,
        takes_run=False,
    ),
    Subcommand(
        "merge",
        "merge forks into the paused model (soup, greedy, fisher, distill, adapter)",
        _rendered(_cli_forks.merge),
        _cli_forks.merge_arguments,
    ),
    Subcommand(
        "discard-merge",
        "undo the latest merge while the run is still paused",
        _rendered(_cli_forks.discard),
    ),
    Subcommand("lineage", "the session's models: forks and merges", _rendered(_cli_forks.lineage)),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand in :data:`SUBCOMMANDS`."""
    parser = argparse.ArgumentParser(
        prog="onthefly",
        description="Watch and steer live OnTheFly training sessions on this machine.",
        epilog="RUN is a run name, PROJECT/RUN or a port; omit it when one session is live.",
    )
    parser.add_argument("--version", action="version", version=f"onthefly {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for sub in SUBCOMMANDS:
        child = commands.add_parser(sub.name, help=sub.help, description=sub.help)
        if sub.takes_run:
            child.add_argument("run", nargs="?", metavar="RUN", help="which session")
        child.add_argument("--json", action="store_true", help="machine-readable output")
        if sub.arguments is not None:
            sub.arguments(child)
        child.set_defaults(handler=sub.handler)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code (the ``onthefly`` console script).

    Example:
        >>> main(["pause", "mnist/baseline"])  # doctest: +SKIP
        pause: paused at step 118, epoch 1
        0
    """
    args = build_parser().parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except KeyboardInterrupt:
        print("onthefly: interrupted", file=sys.stderr)
        return INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`onthefly watch | head`): nothing more to say, and Python's
        # own flush of stdout at exit must not fail on the closed pipe either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    except _UNREACHABLE as exc:
        print(f"onthefly: {exc}", file=sys.stderr)
        return USAGE
    except (OnTheFlyError, TimeoutError) as exc:
        print(f"onthefly: {exc}", file=sys.stderr)
        return FAILED
