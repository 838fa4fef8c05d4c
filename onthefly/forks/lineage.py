"""The lineage of a session's models: a DAG of runs, with fork and merge edges.

Nodes are the models the session made: the ``main`` run, each ``fork`` (a copy trained on a
slice, streaming into a run of its own) and each ``merge`` (the parent merged with forks,
which the trainer then keeps training: its metrics continue in the main run from the merge's
step). One node is *active*: the model the trainer trains now. A merge makes the merge node
active and its parent ``superseded``; discarding the merge marks it ``discarded`` and makes
its parent active again.

Edges: ``fork`` from the parent to the fork at the parent's step, ``merge`` from the parent
and from each fork merged into the merge node, with the method.

The main node is stored under the role ``main`` rather than a fixed run id: a session
resumed from a file has a new main run id, which :meth:`Lineage.bind_main` puts in.
"""

from __future__ import annotations

import copy
from typing import Any

MAIN = "main"
"""The main node's id until :meth:`Lineage.bind_main` names it."""


class Lineage:
    """The session's lineage DAG, JSON-ready.

    Example:
        >>> lineage = Lineage()
        >>> lineage.bind_main("baseline")
        >>> lineage.add_fork("hard", "hard", parent_step=40, selection={"size": 8},
        ...                  budget={"steps": 100}, hparams={})
        >>> [edge["kind"] for edge in lineage.to_json()["edges"]]
        ['fork']
    """

    def __init__(self) -> None:
        self._main = MAIN
        self._nodes: dict[str, dict[str, Any]] = {MAIN: _node(MAIN, MAIN, "main", "active", MAIN)}
        self._edges: list[dict[str, Any]] = []
        self._active = MAIN

    @property
    def active(self) -> str:
        """The id of the node the trainer trains now."""
        return self._active

    @property
    def main(self) -> str:
        """The main node's id (the main run id once bound)."""
        return self._main

    def bind_main(self, run: str, name: str | None = None) -> None:
        """Name the main node after the session's main run ``run`` (idempotent)."""
        old = self._main
        if run == old:
            return
        node = self._nodes.pop(old)
        node.update(run=run, metrics_run=run, name=name or run)
        self._nodes = {run: node, **self._nodes}
        for other in self._nodes.values():
            if other["parent"] == old:
                other["parent"] = run
            if other["metrics_run"] == old:
                other["metrics_run"] = run
        for edge in self._edges:
            for end in ("source", "target"):
                if edge[end] == old:
                    edge[end] = run
        if self._active == old:
            self._active = run
        self._main = run

    def names(self) -> set[str]:
        """Every node's name."""
        return {node["name"] for node in self._nodes.values()}

    def node(self, run: str) -> dict[str, Any]:
        """The node ``run`` (a live reference: callers update its fields)."""
        return self._nodes[run]

    def add_fork(
        self,
        run: str,
        name: str,
        *,
        parent_step: int,
        selection: dict[str, Any],
        budget: dict[str, int],
        hparams: dict[str, Any],
    ) -> dict[str, Any]:
        """A running fork of the active node, made at its step ``parent_step``."""
        parent = self._active
        node = _node(run, name, "fork", "running", run, parent, parent_step, parent_step)
        node.update(selection=selection, budget=budget, hparams=hparams)
        self._nodes[run] = node
        self._edges.append(_edge(parent, run, "fork", parent_step))
        return node

    def add_merge(self, run: str, name: str, *, step: int, method: str, sources: list[str]) -> None:
        """The merge of the active node and ``sources`` (fork node ids), now active."""
        parent = self._active
        node = _node(run, name, "merge", "active", self._main, parent, step, step)
        node["method"] = method
        self._nodes[run] = node
        for source in [parent, *sources]:
            self._edges.append(_edge(source, run, "merge", step, method))
        self._nodes[parent]["status"] = "superseded"
        self._active = run

    def discard(self, run: str) -> str:
        """Mark the merge ``run`` discarded and make its parent active again; returns the
        parent's id."""
        node = self._nodes[run]
        node["status"] = "discarded"
        parent: str = node["parent"]
        self._nodes[parent]["status"] = "active"
        self._active = parent
        return parent

    def to_json(self) -> dict[str, Any]:
        """``{active, nodes, edges}``: the ``lineage`` reply and event payload (copies)."""
        return {
            "active": self._active,
            "nodes": copy.deepcopy(list(self._nodes.values())),
            "edges": copy.deepcopy(self._edges),
        }

    def state_dict(self) -> dict[str, Any]:
        """Plain containers only (``torch.load(weights_only=True)``-safe)."""
        return {"main": self._main, **self.to_json()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self._nodes = {node["run"]: dict(node) for node in state["nodes"]}
        self._edges = [dict(edge) for edge in state["edges"]]
        self._active = str(state["active"])
        self._main = str(state["main"])


def _node(
    run: str,
    name: str,
    kind: str,
    status: str,
    metrics_run: str,
    parent: str | None = None,
    parent_step: int | None = None,
    from_step: int = 0,
) -> dict[str, Any]:
    return {
        "run": run,
        "name": name,
        "kind": kind,
        "status": status,
        "parent": parent,
        "parent_step": parent_step,
        "metrics_run": metrics_run,
        "from_step": from_step,
        "method": None,
        "selection": None,
        "budget": None,
        "hparams": {},
        "steps": None,
        "slice_loss": None,
        "parent_slice_loss": None,
        "message": None,
    }


def _edge(source: str, target: str, kind: str, step: int, method: str | None = None) -> dict:
    return {"source": source, "target": target, "kind": kind, "step": step, "method": method}
