"""What the training process publishes, validated and numbered into stream events.

The session server's pump hands the broker :data:`RawEvent` tuples: an event body built by
the training process (already checked when it was built), or the JSON fields of an event a
hub relays. :class:`EventStager` adds the envelope, validates the whole event against its
model and serialises it once. An event that fails gets no ``seq`` (the stream stays
gapless) and is reported once per distinct problem, as a ``WARNING`` log event of the main
run and on the ``onthefly.server`` logger.
"""

from __future__ import annotations

import logging
import time
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from onthefly.protocol import EventBody, LogBody, LogRecord, RunStarted
from onthefly.server.commands import condense
from onthefly.server.outbox import StreamEvent
from onthefly.server.runs import StreamModel

logger = logging.getLogger("onthefly.server")

RawEvent = tuple[str, str, float, EventBody | dict[str, Any]]
"""What reaches the broker: ``(run, kind, time, body)``. The body is the event model's own
fields: built and validated by the training process, or relayed as JSON by the hub."""

EVENT_MODELS: dict[str, type[StreamModel]] = {
    model.model_fields["type"].default: model for model in typing.get_args(StreamModel)
}
"""Stream event kinds and their models."""

Staged = list[tuple[StreamModel, StreamEvent]]


class EventStager:
    """Validates and serialises raw events for one session (called by one thread at a time).

    Args:
        session: the session id put in every event.
        main_run: the run that reports dropped events.

    Example:
        >>> stager = EventStager("s1", "main")
        >>> info = {"run": "main", "project": "p", "name": "main", "state": "running",
        ...         "step": 0, "epoch": 0, "started_at": 1.0}
        >>> staged = stager.stage([("main", "run_started", 1.0, {"info": info})], 41)
        >>> [line.seq for _, line in staged]
        [42]
    """

    def __init__(self, session: str, main_run: str) -> None:
        self.session = session
        self.main_run = main_run
        self.known_runs: set[str] = set()
        """Runs announced by a ``run_started`` staged so far (or preloaded)."""
        self._rejections: dict[str, int] = {}

    def stage(self, events: Iterable[RawEvent], last_seq: int) -> Staged:
        """The valid ``events`` as models and serialised lines, numbered on from ``last_seq``."""
        staged: Staged = []
        for run, kind, at, payload in events:
            self._stage(run, kind, at, payload, staged, last_seq)
        return staged

    def _stage(
        self,
        run: str,
        kind: str,
        at: float,
        payload: EventBody | dict[str, Any],
        staged: Staged,
        last_seq: int,
    ) -> None:
        if isinstance(payload, EventBody):
            payload = payload.__dict__  # its fields, only read; nested models taken as they are
        model = EVENT_MODELS.get(kind)
        if model is None:
            expected = ", ".join(EVENT_MODELS)
            self._reject(
                f"unknown event kind {kind!r}; expected one of {expected}", staged, last_seq
            )
            return
        if kind != "run_started" and run not in self.known_runs:
            self._reject(f"{kind!r} event for unknown run {run!r}", staged, last_seq)
            return
        seq = staged[-1][1].seq + 1 if staged else last_seq + 1
        fields = {**payload, "session": self.session, "run": run, "time": at, "seq": seq}
        try:
            event = model.model_validate(fields)
        except ValidationError as exc:
            self._reject(f"invalid {kind!r} event ({condense(exc)})", staged, last_seq)
            return
        if isinstance(event, RunStarted):
            self.known_runs.add(run)
        # The model's own serializer writes the same bytes as SERVER_MESSAGE's union, in a
        # third of the time (no variant lookup): it runs for every event, on the pump thread.
        json = event.__pydantic_serializer__.to_json(event)
        staged.append((event, StreamEvent(seq, kind, json)))

    def _reject(self, problem: str, staged: Staged, last_seq: int) -> None:
        count = self._rejections.get(problem, 0) + 1
        self._rejections[problem] = count
        if count > 1:
            return  # said once: a callback repeating the mistake every step must not flood
        message = f"dropped an event from the training process: {problem}"
        logger.warning(message)
        now = time.time()
        record = LogRecord(time=now, level="WARNING", logger=logger.name, message=message)
        self._stage(self.main_run, "log", now, LogBody(record=record), staged, last_seq)
