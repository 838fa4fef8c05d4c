"""The ``onthefly`` command (the console script and ``python -m onthefly``).

Modules: ``entry`` (the table of subcommands, the parser and :func:`main`), ``runner`` (how a
subcommand connects, waits and prints), ``control``, ``files``, ``samples`` and ``forks``
(the subcommand groups), ``formatting`` (replies and events as text) and ``waiting`` (the
spinner of slow commands). Never imports torch.
"""

from __future__ import annotations

from onthefly.cli.entry import SUBCOMMANDS, Subcommand, build_parser, main

__all__ = ["SUBCOMMANDS", "Subcommand", "build_parser", "main"]
