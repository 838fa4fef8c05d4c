"""``onthefly.show()``: the dashboard inline in a Jupyter notebook.

It shows the hub of this machine (``onthefly dashboard``) in an ``<iframe>``; when no hub
runs, it starts one inside the notebook's kernel (it lives as long as the kernel), so the
runs the notebook starts afterwards appear in it. The browser showing the notebook must run
on the same machine as the kernel (the hub listens on 127.0.0.1): local Jupyter, or VS Code's
notebooks; over SSH, forward the hub's port.

IPython is used when it is installed (the frame is displayed at once); without it, the
returned object shows itself wherever ``_repr_html_`` is understood.
"""

from __future__ import annotations

import html
import os
import threading
from typing import Any
from urllib.parse import urlencode

from onthefly.hub.address import running_hub

_lock = threading.Lock()
_own_hub: Any = None


class Dashboard:
    """The dashboard at ``url`` as a notebook output (an iframe).

    Attributes:
        url: the page's address, token included.
        height: the frame's height in CSS pixels.
    """

    def __init__(self, url: str, height: int) -> None:
        self.url = url
        self.height = height

    def _repr_html_(self) -> str:
        src = html.escape(self.url, quote=True)
        return (
            f'<iframe src="{src}" width="100%" height="{self.height}" '
            'style="border: 1px solid #8884; border-radius: 4px" '
            'title="OnTheFly dashboard"></iframe>'
            f'<div style="font-size: 12px"><a href="{src}" target="_blank" rel="noopener">'
            "Open the OnTheFly dashboard in a new tab</a></div>"
        )

    def __repr__(self) -> str:
        return f"OnTheFly dashboard: {self.url}"


def show(
    run: str | None = None,
    *,
    height: int = 800,
    home: str | os.PathLike[str] | None = None,
) -> Dashboard | None:
    """Show the dashboard of every run on this machine inline (in Jupyter).

    Args:
        run: a run to select first (its name or ``project/run``); ``None``: the newest.
        height: the frame's height in pixels.
        home: the OnTheFly home (default ``$ONTHEFLY_HOME`` or ``~/.onthefly``).

    Returns:
        ``None`` inside IPython (the frame is displayed); elsewhere the :class:`Dashboard`,
        which displays itself as the frame (or prints its address).

    Raises:
        ConfigurationError: no hub runs and none can start (the port is taken, the home is
            not writable).

    Example:
        >>> import onthefly
        >>> onthefly.show()  # doctest: +SKIP
    """
    url = _hub_url(home)
    if run is not None:
        url += "&" + urlencode({"run": run})
    frame = Dashboard(url, height)
    display = _ipython_display()
    if display is None:
        return frame
    display(frame)
    return None


def _hub_url(home: str | os.PathLike[str] | None) -> str:
    global _own_hub
    with _lock:
        if _own_hub is not None:
            return str(_own_hub.url)
        running = running_hub(home)
        if running is not None:
            return running.url
        from onthefly.errors import ConfigurationError
        from onthefly.hub import Hub

        try:
            _own_hub = Hub(home=home, quiet=True).start()
        except ConfigurationError:  # its port is taken: inside a kernel any port will do
            _own_hub = Hub(port=0, home=home, quiet=True).start()
        return str(_own_hub.url)


def _ipython_display() -> Any:
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    return display if get_ipython() is not None else None
