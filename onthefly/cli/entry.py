"""The ``onthefly`` command: list, inspect, watch and steer live training sessions.

Each subcommand is one small function registered in :data:`SUBCOMMANDS`; adding one means
writing the function and one table row. Exit codes: 0 ok, 1 the command failed (the session
answered with an error or went away), 2 usage error or no reachable session, 130 Ctrl+C,
141 the reader of stdout went away (``onthefly watch | head``).
Errors go to stderr as one line, never a traceback. Never imports torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onthefly import __version__
from onthefly.cli import control, files, forks, samples
from onthefly.cli.runner import (
    BROKEN_PIPE,
    FAILED,
    INTERRUPTED,
    USAGE,
    rendered,
    replying,
)
from onthefly.errors import (
    AmbiguousSession,
    AuthenticationError,
    ConfigurationError,
    OnTheFlyError,
    SessionNotFound,
)

_UNREACHABLE = (SessionNotFound, AmbiguousSession, AuthenticationError, ConfigurationError)


@dataclass(frozen=True)
class Subcommand:
    """One row of the CLI: its name, help line, handler and extra arguments."""

    name: str
    help: str
    handler: Callable[[argparse.Namespace], int]
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    takes_run: bool = True


SUBCOMMANDS: tuple[Subcommand, ...] = (
    Subcommand("runs", "list live sessions", control.runs, takes_run=False),
    Subcommand("status", "state, step, epoch and latest metrics of a run", control.status),
    Subcommand(
        "watch", "print the run's events until it finishes (Ctrl+C to leave)", control.watch
    ),
    Subcommand("pause", "pause at the next batch boundary", replying(lambda c, a: c.pause())),
    Subcommand(
        "resume",
        "resume a paused run",
        replying(lambda c, a: c.resume(epochs=a.epochs, steps=a.steps)),
        control.resume_arguments,
    ),
    Subcommand("stop", "stop the run at the next batch boundary", replying(lambda c, a: c.stop())),
    Subcommand(
        "test",
        "evaluate the test loader now",
        replying(lambda c, a: c.test(a.label)),
        control.test_arguments,
    ),
    Subcommand(
        "health",
        "run a health check: determinism, gradients, instability, activations, throughput or "
        "distribution",
        control.health,
        control.health_arguments,
    ),
    Subcommand(
        "set",
        "change lr, weight_decay, momentum, betas or eps at the next boundary",
        control.set,
        control.set_arguments,
    ),
    Subcommand(
        "export",
        "write the whole session to a .otf file (an existing one only with --overwrite)",
        replying(lambda c, a: c.export(a.path, a.overwrite)),
        control.export_arguments,
    ),
    Subcommand(
        "import",
        "load a .otf file's weights and optimizer state into the paused run",
        replying(lambda c, a: c.load_session(a.path)),
        files.path_argument,
    ),
    Subcommand(
        "checkpoints", "list the run's checkpoint ring", replying(lambda c, a: c.checkpoints())
    ),
    Subcommand(
        "snapshot", "add a snapshot to the checkpoint ring now", replying(lambda c, a: c.snapshot())
    ),
    Subcommand(
        "restore",
        "load a checkpoint's weights and optimizer state into the paused run",
        replying(lambda c, a: c.restore(a.checkpoint)),
        control.restore_arguments,
    ),
    Subcommand(
        "inspect",
        "show a .otf file's manifest and contents",
        files.inspect,
        files.inspect_arguments,
        False,
    ),
    Subcommand(
        "view",
        "serve a .otf file's history to the dashboard, read-only (Ctrl+C to stop)",
        files.view,
        files.view_arguments,
        False,
    ),
    Subcommand(
        "dashboard",
        "serve one dashboard for every run on this machine (Ctrl+C to stop)",
        files.dashboard,
        files.dashboard_arguments,
        False,
    ),
    Subcommand(
        "scan",
        "evaluate every sample of a split with the current model",
        rendered(samples.scan),
        samples.scan_arguments,
    ),
    Subcommand(
        "hist",
        "histogram of the per-sample losses of a split",
        rendered(samples.hist),
        samples.hist_arguments,
    ),
    Subcommand(
        "samples",
        "the highest-loss samples of a split (printed, or exported with --out)",
        rendered(samples.samples),
        samples.samples_arguments,
    ),
    Subcommand(
        "select",
        "make a named selection of samples (top, quantile, loss range, region, cluster)",
        rendered(samples.select),
        samples.select_arguments,
    ),
    Subcommand(
        "fork",
        "train a copy of the paused model on a slice of the training set",
        rendered(forks.fork),
        forks.fork_arguments,
    ),
    Subcommand("forks", "list the session's forks", rendered(forks.forks)),
    Subcommand(
        "compare",
        "evaluate the model and forks on each slice, the rest and the validation set",
        rendered(forks.compare),
        forks.compare_arguments,
        takes_run=False,
    ),
    Subcommand(
        "merge",
        "merge forks into the paused model (soup, greedy, fisher, distill, adapter)",
        rendered(forks.merge),
        forks.merge_arguments,
    ),
    Subcommand(
        "discard-merge",
        "undo the latest merge while the run is still paused",
        rendered(forks.discard),
    ),
    Subcommand("lineage", "the session's models: forks and merges", rendered(forks.lineage)),
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
