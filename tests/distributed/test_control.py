"""RankSync's control rounds, with a scripted stand-in for the control group."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from onthefly.commands.registry import Boundary, CommandRegistry
from onthefly.distributed.control import HOLD, RUN, STOP, RankSync
from onthefly.distributed.mirror import MirrorCommand, encode
from onthefly.protocol import CLIENT_COMMAND


def _pending(**fields: Any) -> MirrorCommand:
    """A command as rank 0 takes it from its inbox (the copy class has the same surface)."""
    return MirrorCommand(encode(CLIENT_COMMAND.validate_python({"id": "c", **fields})), rank=0)


class Group:
    """Rank ``rank`` of two; other ranks read ``scripted`` answers in order."""

    def __init__(self, rank: int, scripted: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.rank, self.world_size, self.is_zero = rank, 2, rank == 0
        self.scripted = list(scripted)
        self.log: list[tuple[str, Any]] = []

    def broadcast_ints(self, values: list[int] | None, count: int, what: str) -> list[int]:
        self.log.append((what, values))
        return list(values) if self.is_zero else self.scripted.pop(0)  # type: ignore[arg-type]

    def broadcast_objects(self, objects: list[Any], what: str) -> list[Any]:
        self.log.append((what, list(objects)))
        if not self.is_zero:
            objects[:] = self.scripted.pop(0)
        return objects

    def gather(self, value: Any, what: str) -> list[Any] | None:
        self.log.append((what, value))
        return [value, {"cursor": "rank 1's cursor"}] if self.is_zero else None


class Gate:
    def __init__(self) -> None:
        self.paused = False
        self.applied: list[int] = []

    def decision(self, trainer: Any) -> int:
        return HOLD if self.paused else RUN

    def apply(self, trainer: Any, decision: int) -> None:
        self.applied.append(decision)


class Session:
    def __init__(self, batches: list[list[Any]]) -> None:
        self.batches = batches
        self.commands = CommandRegistry()
        self.ranks: RankSync

    def take_commands(self, wait: bool = False) -> list[Any]:
        return self.batches.pop(0) if self.batches else []


def _setup(rank: int, batches: list[list[Any]], scripted: list[Any] = ()) -> tuple[Any, ...]:  # type: ignore[assignment]
    session = Session(batches)
    sync = RankSync(session)  # type: ignore[arg-type]
    sync.group = Group(rank, scripted)  # type: ignore[assignment]
    gate, ran = Gate(), []

    def handler(paused: bool | None) -> Any:
        def run(boundary: Boundary, cmd: Any) -> None:
            ran.append(cmd)
            if paused is not None:
                gate.paused = paused

        return run

    session.commands.register("pause", handler(True))
    session.commands.register("resume", handler(False))
    session.commands.register("histogram", handler(None))
    trainer = SimpleNamespace(global_step=12, current_epoch=1, train_loader=None)
    return sync, gate, ran, Boundary(trainer, None)


def test_rank_0_sends_commands_holds_and_resumes() -> None:
    pause, query, resume = (
        _pending(type="pause"),
        _pending(type="histogram"),
        _pending(type="resume"),
    )
    sync, gate, ran, boundary = _setup(0, [[pause, query], [resume]])
    cursors: list[Any] = []
    sync.exchange.consume("cursor", lambda rank, value: cursors.append((rank, value)))
    assert sync.due(final=False)  # every batch while measuring
    sync.round(boundary, gate, batches=4)

    assert ran == [pause, query, resume]  # in the order they came
    assert gate.applied == [HOLD, RUN]
    group = sync.group
    assert [what for what, _ in group.log] == [
        "control round",
        "broadcast of commands",
        "exchange of per-rank data",  # before a command: complete data at the pause
        "control decision",
        "control round",  # holding: another round for the next command
        "broadcast of commands",
        "control decision",
    ]
    header = group.log[0][1]
    assert header == [-1, 1, 1, 2]  # after the commands; 1 collective; every batch; forced
    assert group.log[1][1] == [encode(pause.command)]  # only the collective one  # type: ignore[union-attr]
    assert cursors[0][0] == 0 and cursors[0][1].step == 12 and cursors[0][1].batches == 4
    assert cursors[1] == (1, "rank 1's cursor")


def test_another_rank_follows_rank_0() -> None:
    stop = _pending(type="stop")
    scripted = [[-1, 1, 7, 0], [encode(stop.command)], [STOP]]
    sync, gate, _, boundary = _setup(1, [], scripted)
    stopped: list[Any] = []
    sync.session.commands.register("stop", lambda b, cmd: stopped.append(cmd))
    sync.round(boundary, gate, batches=1)
    assert [type(cmd) for cmd in stopped] == [MirrorCommand]
    assert stopped[0].command.type == "stop"
    assert gate.applied == [STOP]
    assert sync.interval == 7  # rank 0's spacing
    assert [sync.due(final=False) for _ in range(7)] == [False] * 6 + [True]
    assert sync.due(final=True)  # the last batch always has a round


def test_a_plain_round_is_one_small_collective() -> None:
    sync, gate, ran, boundary = _setup(0, [])
    sync.round(boundary, gate, batches=1)
    assert [what for what, _ in sync.group.log] == ["control round"]
    assert gate.applied == [RUN] and ran == []


def test_collective_commands_behind_one_of_rank_0s_own_wait_for_another_round() -> None:
    query, pause, resume = (
        _pending(type="histogram"),
        _pending(type="pause"),
        _pending(type="resume"),
    )
    sync, gate, ran, boundary = _setup(0, [[query, pause, resume]])
    sync.round(boundary, gate, batches=1)
    assert ran == [query, pause, resume]
    log = sync.group.log
    assert [what for what, _ in log] == [
        "control round",  # the query alone: no collective command
        "control decision",
        "control round",  # again at the same boundary: pause and resume, with every rank
        "broadcast of commands",
        "control decision",
    ]
    assert log[0][1][1] == 0 and log[1][1] == [-4]  # no copies; "another round follows"
    assert log[2][1][1] == 2
    assert gate.applied == [RUN]  # "another round" is no decision


def test_a_long_command_of_rank_0_keeps_the_others_company_and_calls_them(
    monkeypatch: Any,
) -> None:
    monkeypatch.setattr("onthefly.distributed.control.KEEPALIVE_S", 0.0)
    long, cancel = _pending(type="histogram"), _pending(type="cancel")
    sync, gate, ran, boundary = _setup(0, [[long, cancel]])
    called: list[Any] = []
    sync.on_call("copy", lambda b, argument, group: called.append((b, argument, group.rank)))
    seen: dict[str, Any] = {}

    def handler(b: Boundary, cmd: Any) -> None:
        seen["rest"] = sync.take_rest()
        seen["stop"] = sync.keepalive()
        sync.call("copy", {"optimizer": "reset"})

    sync.session.commands.register("cancel", lambda b, cmd: ran.append(cmd))
    monkeypatch.setitem(sync.session.commands._handlers, "histogram", handler)
    sync.round(boundary, gate, batches=1)
    assert seen == {"rest": [cancel], "stop": False}
    assert called == [(boundary, {"optimizer": "reset"}, 0)]
    assert ran == []  # the cancel was the long command's to answer
    assert [what for what, _ in sync.group.log][-4:] == [
        "control decision (rank 0 busy with a command)",
        "control decision (a call of every rank)",
        "call of every rank",
        "control decision",
    ]
    assert sync.keepalive() is False  # outside a command of rank 0's own: nothing sent


def test_another_rank_waits_out_rank_0s_command_and_runs_its_calls() -> None:
    scripted = [[-1, 0, 1, 0], [-2], [-2], [-3], ["copy", 7], [RUN]]
    sync, gate, _, boundary = _setup(1, [], scripted)
    called: list[Any] = []
    sync.on_call("copy", lambda b, argument, group: called.append(argument))
    sync.round(boundary, gate, batches=1)
    assert called == [7] and gate.applied == [RUN]
    assert sync.group.scripted == []


def test_a_call_outside_a_command_of_rank_0_is_refused() -> None:
    sync, *_ = _setup(0, [])
    sync.on_call("copy", lambda b, argument, group: None)
    with pytest.raises(RuntimeError, match="inside one of its own commands"):
        sync.call("copy")
    with pytest.raises(ValueError, match="already registered"):
        sync.on_call("copy", lambda b, argument, group: None)
