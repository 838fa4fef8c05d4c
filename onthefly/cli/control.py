"""The run-control subcommands: ``runs``, ``status``, ``watch``, ``health``, ``set`` and the
arguments of ``resume``, ``test``, ``export`` and ``restore`` (whose calls are one line in the
table of :mod:`onthefly.cli.entry`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from onthefly.cli import formatting
from onthefly.cli.files import path_argument
from onthefly.cli.runner import OK, client_of, emit, print_json, waiting
from onthefly.errors import ConfigurationError


def runs(args: argparse.Namespace) -> int:
    from onthefly.server.discovery import list_sessions, sessions_dir

    found = list_sessions()
    if args.json:
        secret = ("token", "url")  # the URL carries the token too
        print_json([{k: v for k, v in vars(s).items() if k not in secret} for s in found])
    else:
        print(formatting.sessions(found, str(sessions_dir())))
    return OK


def status(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        data = client.status()
    emit(args, data, lambda: formatting.status(data))
    return OK


def watch(args: argparse.Namespace) -> int:
    with client_of(args) as client:
        for message in client.watch():
            print(message.model_dump_json() if args.json else formatting.stream_line(message))
            sys.stdout.flush()  # a line per event, also when piped
    return OK


def resume_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epochs", type=int, metavar="N", help="train N more epochs")
    parser.add_argument("--steps", type=int, metavar="N", help="train N more optimizer steps")


def test_arguments(parser: argparse.ArgumentParser) -> None:
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


def health_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("check", choices=HEALTH_CHECKS, help="which check to run")


def health(args: argparse.Namespace) -> int:
    with client_of(args) as client, waiting(args):
        data = client.health(args.check)
    emit(args, data, lambda: formatting.health(data))
    return OK


def set_arguments(parser: argparse.ArgumentParser) -> None:
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


def set(args: argparse.Namespace) -> int:
    values = parse_assignments(args.values)
    with client_of(args) as client:
        data = client.set_hparams(**values, group=args.group, optimizer=args.optimizer)
    emit(args, data, lambda: formatting.hparam_changes(data))
    return OK


def export_arguments(parser: argparse.ArgumentParser) -> None:
    path_argument(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing file")


def restore_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("checkpoint", metavar="ID", help="a checkpoint id from `checkpoints`")
