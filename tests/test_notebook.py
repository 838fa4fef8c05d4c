"""``onthefly.show()``: the hub in a notebook frame, started in the kernel when none runs."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

import onthefly
from onthefly import notebook
from onthefly.hub import Hub
from onthefly.hub.address import running_hub


@pytest.fixture(autouse=True)
def _own_hub_closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(notebook, "_own_hub", None)
    monkeypatch.setenv("ONTHEFLY_HUB_PORT", "0")
    # IPython is not a dependency: these tests see the plain-Python path unless they add it.
    monkeypatch.setitem(sys.modules, "IPython", None)
    yield
    if notebook._own_hub is not None:
        notebook._own_hub.close()


def test_without_a_hub_one_starts_in_this_process_and_is_shown_in_a_frame() -> None:
    assert running_hub() is None
    shown = onthefly.show(height=600)
    assert isinstance(shown, notebook.Dashboard)
    hub = running_hub()
    assert hub is not None and shown.url == hub.url
    page = shown._repr_html_()
    assert f'<iframe src="{hub.url}" width="100%" height="600"' in page
    assert repr(shown) == f"OnTheFly dashboard: {hub.url}"
    again = onthefly.show()
    assert again is not None and again.url == shown.url  # the same hub, not a second one


def test_a_running_hub_is_used_and_a_run_can_be_chosen() -> None:
    with Hub(port=0, quiet=True) as hub:
        shown = onthefly.show("demo/cnn")
        assert shown is not None and shown.url == f"{hub.url}&run=demo%2Fcnn"
        assert "&amp;run=demo%2Fcnn" in shown._repr_html_()  # escaped in the attribute
        assert notebook._own_hub is None


def test_inside_ipython_the_frame_is_displayed(monkeypatch: pytest.MonkeyPatch) -> None:
    displayed: list[Any] = []
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: object()  # type: ignore[attr-defined]
    display_module = types.ModuleType("IPython.display")
    display_module.display = displayed.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_module)
    with Hub(port=0, quiet=True):
        assert onthefly.show() is None
    (frame,) = displayed
    assert isinstance(frame, notebook.Dashboard)
