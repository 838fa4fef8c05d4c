"""How a subcommand runs: connect to the session, show that it waits, print the reply.

A reply prints as one JSON document with ``--json``, else as readable text.
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable
from typing import Any

from onthefly.cli import formatting
from onthefly.cli.waiting import Waiting
from onthefly.client import Client, connect

Rendered = tuple[dict[str, Any], Callable[[], str]]
"""What a subcommand's call returns: the reply's data and how to print it as text."""

OK, FAILED, USAGE, INTERRUPTED, BROKEN_PIPE = 0, 1, 2, 130, 141
"""The CLI's exit codes (see :mod:`onthefly.cli.entry`)."""


def print_json(document: Any) -> None:
    print(json.dumps(document, allow_nan=False))


def emit(args: argparse.Namespace, data: dict[str, Any], text: Callable[[], str]) -> None:
    """The reply as one JSON document with ``--json``, else as readable text."""
    if args.json:
        print_json(data)
    else:
        print(text())


def client_of(args: argparse.Namespace) -> Client:
    """A client of the session ``args.run`` names."""
    return connect(args.run)


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


def waiting(args: argparse.Namespace) -> contextlib.AbstractContextManager[object]:
    what = SLOW.get(args.command)
    return contextlib.nullcontext() if what is None else Waiting(f"{args.command}: {what}")


def replying(call: Callable[[Client, argparse.Namespace], dict[str, Any]]) -> Callable[..., int]:
    """A subcommand that sends one control command and prints its reply."""

    def run(args: argparse.Namespace) -> int:
        with client_of(args) as client, waiting(args):
            data = call(client, args)
        emit(args, data, lambda: formatting.reply(args.command, data))
        return OK

    return run


def rendered(
    call: Callable[[Client, argparse.Namespace], Rendered],
) -> Callable[..., int]:
    """A subcommand whose call returns its reply and how to print it as text."""

    def run(args: argparse.Namespace) -> int:
        with client_of(args) as client, waiting(args):
            data, text = call(client, args)
        emit(args, data, text)
        return OK

    return run
