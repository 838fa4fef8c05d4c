"""The subcommands of session files and the hub: ``inspect``, ``view`` and ``dashboard``."""

from __future__ import annotations

import argparse

from onthefly.cli.runner import OK, emit


def path_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", metavar="PATH", help="the session file (.otf)")


def view_arguments(parser: argparse.ArgumentParser) -> None:
    path_argument(parser)
    parser.add_argument("--port", type=int, help="first port to try (default: ONTHEFLY_PORT)")


def inspect_arguments(parser: argparse.ArgumentParser) -> None:
    path_argument(parser)
    parser.add_argument("--verify", action="store_true", help="check every member's checksum")


def inspect(args: argparse.Namespace) -> int:
    from onthefly.sessions import summary

    data = summary.summarize(args.path, verify=args.verify)
    emit(args, data, lambda: summary.render(data))
    return OK


def view(args: argparse.Namespace) -> int:
    from onthefly.sessions import view

    view.serve_until_interrupted(args.path, port=args.port)
    return OK


def dashboard_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--port", type=int, help="the hub's port (default: ONTHEFLY_HUB_PORT, else 47620)"
    )
    parser.add_argument("--logdir", metavar="DIR", help="also serve the .otf files of DIR")


def dashboard(args: argparse.Namespace) -> int:
    from onthefly.hub import serve_until_interrupted

    serve_until_interrupted(port=args.port, logdir=args.logdir)
    return OK
