"""``onthefly dashboard``: one dashboard for every run on this machine, at a stable address.

Like ``tensorboard --logdir``: the hub lists every live run as it appears (it reads the
discovery files, as the same user), keeps what it saw of runs that ended, follows a run that
restarts, and serves the exported sessions of a folder. Browser tabs hold the hub's token
only; the hub talks to each run with that run's token.

Modules, one job each::

    server   Hub: the routes over the session server's transport and handshake checks
    catalog  the live, ended and exported sessions, refreshed about once a second
    mirror   one live session followed: its history and stream in a local broker
    files    exported sessions (.otf) of a folder, loaded read-only on first use
    address  hub.json: where the hub runs, and its token (kept across restarts)
"""

from onthefly.hub.server import DEFAULT_PORT, Hub, serve_until_interrupted

__all__ = ["DEFAULT_PORT", "Hub", "serve_until_interrupted"]
