"""The hub's server: one stable local address for the dashboard of every run on the machine.

Built from the session server's parts: the same :class:`~onthefly.server.transport.Transport`
(threads, bounded per-client queues), the same handshake checks of
:mod:`onthefly.server.gate` — loopback only, ``Host`` must name this server, websockets need
the hub's own token and come from the hub's page, a VS Code webview or no browser — and the
same dashboard bundle. What differs is routing: ``/ws/<key>`` reaches the broker of session
``key`` in the :class:`~onthefly.hub.catalog.Catalog`, and ``GET /sessions?token=`` lists
the catalog. The page never sees a run's own token.

The hub's page may be shown inside a notebook (``onthefly.show()``): its CSP lets loopback
pages and VS Code webviews frame it, and nothing else.
"""

from __future__ import annotations

import atexit
import contextlib
import http
import os
import re
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

from websockets.http11 import Request, Response
from websockets.sync.server import ServerConnection

from onthefly import environment
from onthefly.errors import ConfigurationError
from onthefly.hub.address import HubFile, hub_token, running_hub, write_hub
from onthefly.hub.catalog import Catalog
from onthefly.hub.files import folder_of
from onthefly.server.broker import Broker
from onthefly.server.discovery import sessions_dir
from onthefly.server.gate import (
    is_sessions_request,
    is_upgrade,
    json_response,
    refuse_host,
    refuse_token,
    refuse_upgrade,
    static_response,
    text_response,
)
from onthefly.server.transport import Transport, bind

DEFAULT_PORT = 47620
"""The hub's port unless told otherwise (the sessions start at 47621)."""

PORT_ENV = "ONTHEFLY_HUB_PORT"
"""Environment variable naming the hub's port (``0``: any free one)."""

HOST = "127.0.0.1"
REFRESH_S = 1.0
"""Seconds between two looks at the discovery folder."""

_DASHBOARD_DIR = Path(__file__).resolve().parent.parent / "dashboard"
_SOCKET_PATH = re.compile(r"/ws/([A-Za-z0-9_-]{1,64})")
_FRAME_ANCESTORS = "frame-ancestors 'self' http://127.0.0.1:* http://localhost:* vscode-webview:"


class Hub:
    """``onthefly dashboard``: every live run of this machine, the ones that ended, and the
    exported sessions of a folder, at one address.

    Args:
        port: the port (``0``: any free one); ``None`` reads ``ONTHEFLY_HUB_PORT``, else
            47620. A taken port is an error, not a move to another one: the address must stay
            the same.
        home: the OnTheFly home whose live sessions to list (default ``$ONTHEFLY_HOME`` or
            ``~/.onthefly``); the hub's address file goes there too.
        logdir: a folder of exported sessions (``.otf``, searched recursively), or ``None``.
        quiet: do not print the address.

    Raises:
        ConfigurationError: another hub of the same home runs, or the port is taken.

    Example:
        >>> with Hub(port=0, logdir="runs/") as hub:  # doctest: +SKIP
        ...     print(hub.url)
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        home: str | os.PathLike[str] | None = None,
        logdir: str | os.PathLike[str] | None = None,
        quiet: bool = False,
    ) -> None:
        port = hub_port(port)
        if not 0 <= port <= 65535:
            raise ConfigurationError(f"port {port} is out of range; expected 0-65535")
        other = running_hub(home)
        if other is not None:
            raise ConfigurationError(
                f"a hub already serves this machine's runs at {other.url} (pid {other.pid}); "
                "open that address, or stop it first"
            )
        self._requested_port = port
        self._home = home
        self._quiet = quiet
        self.folder = folder_of(logdir)
        self.token = hub_token(home)
        self.catalog = Catalog(home, self.folder)
        self._transport = _HubTransport(self.catalog, token=self.token)
        self._stop = threading.Event()
        self._refresher: threading.Thread | None = None
        self._closed = False
        self.port = 0

    @property
    def url(self) -> str:
        """The hub's address, token included: ``http://127.0.0.1:PORT/?token=...``."""
        return f"http://{HOST}:{self.port}/?token={self.token}"

    def start(self) -> Hub:
        """Listen, follow the sessions, write the address file and print the address.

        Raises:
            ConfigurationError: the port is taken or the home folder is not writable.
        """
        try:
            sock = bind(HOST, self._requested_port, attempts=1)
        except ConfigurationError:
            raise ConfigurationError(
                f"port {self._requested_port} on {HOST} is in use; expected a free port for the "
                "hub (choose one with --port)"
            ) from None
        self._transport.start(sock)
        self.port = self._transport.port
        self.catalog.refresh()
        self._refresher = threading.Thread(target=self._refresh, name="onthefly-hub", daemon=True)
        self._refresher.start()
        atexit.register(self.close)
        try:
            address = HubFile(os.getpid(), self.port, self.token, self.url, time.time())
            write_hub(address, self._home)
        except ConfigurationError:
            self.close()
            raise
        if not self._quiet:
            where = str(sessions_dir(self._home))
            if self.folder is not None:
                where += f" and the exported sessions in {self.folder}"
            print(f"[onthefly] dashboard: {self.url}", flush=True)
            print(f"[onthefly] serving every run of {where}; Ctrl+C to stop", flush=True)
        return self

    def close(self) -> None:
        """Stop serving; safe to call twice, and called at interpreter exit."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        self._stop.set()
        if self._refresher is not None:
            self._refresher.join()
        self.catalog.close()
        self._transport.close()
        if self.port:
            # Stopped, but the token stays for the next hub: the same address again.
            with contextlib.suppress(ConfigurationError):
                write_hub(HubFile(0, self.port, self.token, self.url, time.time()), self._home)

    def __enter__(self) -> Hub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _refresh(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self.catalog.refresh()


class _HubTransport(Transport):
    """The transport with the hub's routes: a broker per session, the catalog's listing."""

    def __init__(self, catalog: Catalog, *, token: str) -> None:
        super().__init__(None, token=token, dashboard_dir=_DASHBOARD_DIR)
        self._catalog = catalog
        self._hub_token = token

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        refused = refuse_host(request, self.port)
        if refused is not None:
            return refused
        if is_upgrade(request):
            refused = refuse_upgrade(request, token=self._hub_token, port=self.port)
            if refused is not None:
                return refused
            key = _session_key(request.path)
            if key is None or self._catalog.broker(key) is None:
                return text_response(
                    http.HTTPStatus.NOT_FOUND,
                    "No such run here; expected /ws/<key> of an entry of GET /sessions.\n",
                )
            return None
        if is_sessions_request(request):
            refused = refuse_token(request, self._hub_token)
            return refused or json_response({"hub": True, "sessions": self._catalog.listing()})
        return _frameable(static_response(_DASHBOARD_DIR, request))

    def _broker_for(self, connection: ServerConnection) -> Broker | None:
        key = _session_key(connection.request.path) if connection.request else None
        return None if key is None else self._catalog.broker(key)


def _session_key(path: str) -> str | None:
    match = _SOCKET_PATH.fullmatch(urlsplit(path).path)
    return match.group(1) if match else None


def _frameable(response: Response) -> Response:
    """The page's CSP, but loopback pages (a notebook) and VS Code webviews may frame it."""
    policy = response.headers.get("Content-Security-Policy")
    if policy is None:
        return response
    del response.headers["Content-Security-Policy"]
    framed = re.sub(r"frame-ancestors [^;]*", _FRAME_ANCESTORS, policy)
    response.headers["Content-Security-Policy"] = framed
    return response


def hub_port(port: int | None) -> int:
    """``port``, else ``ONTHEFLY_HUB_PORT``, else :data:`DEFAULT_PORT`.

    Raises:
        ConfigurationError: ``ONTHEFLY_HUB_PORT`` is not a number, or the port is outside
            0-65535.
    """
    return environment.port(port, PORT_ENV, DEFAULT_PORT)


def serve_until_interrupted(
    port: int | None = None, logdir: str | os.PathLike[str] | None = None
) -> None:
    """:class:`Hub`, then block until Ctrl+C (``onthefly dashboard``)."""
    hub = Hub(port=port, logdir=logdir).start()
    try:
        threading.Event().wait()
    finally:
        hub.close()
