"""The ``onthefly`` command against a real session server, in-process and as a subprocess."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from subprocess import Popen
from typing import Any

import pytest

from onthefly.cli import SUBCOMMANDS, main
from onthefly.server.session_server import SessionServer
from tests import interruptible
from tests.live_session import Training, live_session, session_file


@pytest.fixture
def training() -> Iterator[Training]:
    with live_session() as t:
        yield t


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@contextmanager
def _cli(
    *argv: str, python_flags: tuple[str, ...] = (), stderr: Any = None
) -> Iterator[Popen[str]]:
    """``onthefly ARGV`` as a subprocess, killed and its pipes closed on the way out."""
    # Through tests.interruptible: a test may Ctrl+C it, also when the suite ignores SIGINT.
    with subprocess.Popen(
        interruptible.command("-m", "onthefly", *argv, python_flags=python_flags),
        cwd=interruptible.ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr is None else stderr,
        text=True,
    ) as process:
        try:
            yield process
        finally:
            process.kill()


def _wait_for_step(training: Training, capsys: pytest.CaptureFixture[str], step: int) -> None:
    """The server's pump publishes every ~15 ms: wait until status shows ``step``."""
    deadline = time.monotonic() + 5
    while json.loads(_run(capsys, "status", "--json")[1])["step"] != step:
        assert time.monotonic() < deadline
        time.sleep(0.01)


# ---------------------------------------------------------------------- runs and status


def test_runs_lists_live_sessions_without_secrets(
    training: Training, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, "runs")
    assert code == 0
    assert "mnist/baseline" in out and str(training.server.port) in out
    assert training.server.token not in out
    code, out, _ = _run(capsys, "runs", "--json")
    (session,) = json.loads(out)
    assert session["port"] == training.server.port and session["run"] == "baseline"
    assert "token" not in session and "url" not in session


def test_runs_with_no_session_is_an_empty_answer(capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "runs", "--json")[:2] == (0, "[]\n")
    code, out, _ = _run(capsys, "runs")
    assert code == 0 and "no live sessions" in out


def test_status_text_and_json(training: Training, capsys: pytest.CaptureFixture[str]) -> None:
    training.train(4)
    _wait_for_step(training, capsys, 4)
    code, out, _ = _run(capsys, "status", "baseline")
    assert code == 0
    assert "baseline: running at step 4, epoch 0" in out
    assert "loss=0.25 acc=n/a" in out
    code, out, _ = _run(capsys, "status", "mnist/baseline", "--json")
    data = json.loads(out)
    assert (data["state"], data["step"], data["epoch"]) == ("running", 4, 0)
    assert data["latest"] == {"loss": 0.25, "acc": None}


# ---------------------------------------------------------------------- control commands


def test_pause_resume_stop_print_the_step_they_took_effect(
    training: Training, capsys: pytest.CaptureFixture[str]
) -> None:
    training.train(7)
    _wait_for_step(training, capsys, 7)
    assert _run(capsys, "pause") == (0, "pause: paused at step 7, epoch 0\n", "")
    code, out, _ = _run(capsys, "resume", str(training.server.port), "--steps", "5", "--json")
    assert code == 0 and json.loads(out) == {"state": "running", "step": 7, "epoch": 0}
    assert _run(capsys, "stop")[:2] == (0, "stop: finished at step 7, epoch 0\n")


def test_test_with_label(training: Training, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "test", "--label", "warm")
    assert code == 0 and out.splitlines()[0].startswith("test: warm at step 0")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert rows[0] == ["METRIC", "VALUE"] and ["loss", "0.25"] in rows[1:]
    code, out, _ = _run(capsys, "test", "--json")
    reply = json.loads(out)
    assert (reply["label"], reply["step"], reply["loss"]) == ("test_2", 0, 0.25)


def test_command_error_exits_1_with_the_servers_message(
    training: Training, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, "resume")
    assert (code, out) == (1, "")
    assert err == "onthefly: the run is running; expected paused [invalid_state]\n"


def test_bad_resume_argument_is_a_usage_error(
    training: Training, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "resume", "--epochs", "0")
    assert code == 2 and "epochs" in err and "Traceback" not in err
    assert not training.got_command.is_set()


# ---------------------------------------------------------------------- failures


def test_no_session_exits_2_saying_how_to_start_one(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["status"], ["pause"], ["watch", "--json"]):
        code, out, err = _run(capsys, *argv)
        assert (code, out) == (2, "")
        assert err.startswith("onthefly: no live OnTheFly session in ")
        assert "start a training script" in err


def test_ambiguous_run_exits_2_listing_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    with live_session("mnist", "baseline"), live_session("cifar", "baseline"):
        code, _, err = _run(capsys, "status", "baseline")
        assert code == 2
        assert "mnist/baseline" in err and "cifar/baseline" in err
        assert err.endswith("name one of them: mnist/baseline, cifar/baseline\n")
        assert _run(capsys, "status", "cifar/baseline")[0] == 0


def test_runs_sharing_a_name_are_named_by_their_ports(capsys: pytest.CaptureFixture[str]) -> None:
    with live_session("demo", "cnn") as first, live_session("demo", "cnn") as second:
        code, _, err = _run(capsys, "status", "demo/cnn")
        ports = (first.server.port, second.server.port)
        assert code == 2 and err.endswith(f"name one of them: {ports[0]}, {ports[1]}\n"), err
        assert _run(capsys, "status", str(ports[1]))[0] == 0


def test_a_view_and_the_training_run_it_came_from_are_told_apart(
    training: Training, capsys: pytest.CaptureFixture[str]
) -> None:
    # A read-only server of the same project/run, as `onthefly view` of its export starts.
    with SessionServer(
        "mnist", "baseline", port=0, quiet=True, viewing="/tmp/exports/run.otf", read_only="no"
    ) as view:
        code, out, _ = _run(capsys, "runs")
        rows = [line.split() for line in out.splitlines()]
        assert rows[0] == ["PORT", "PID", "RUN", "STARTED", "KIND"]
        kinds = {row[0]: (row[2], " ".join(row[5:])) for row in rows[1:]}
        assert kinds == {
            str(training.server.port): ("mnist/baseline", "training"),
            str(view.port): ("view:mnist/baseline", "view of run.otf (read-only)"),
        }
        # The plain name is the training run; the view has its own name.
        status = json.loads(_run(capsys, "status", "mnist/baseline", "--json")[1])
        assert status["run"] == training.run and status["state"] == "running"
        code, out, _ = _run(capsys, "status", "view:mnist/baseline", "--json")
        assert code == 0 and json.loads(out)["run"] == view.main_run
        listed = json.loads(_run(capsys, "runs", "--json")[1])
        assert sorted(s["viewing"] or "" for s in listed) == ["", "/tmp/exports/run.otf"]


def test_refused_token_exits_2(training: Training, capsys: pytest.CaptureFixture[str]) -> None:
    path = session_file(training)
    path.write_text(json.dumps({**json.loads(path.read_text()), "token": "forged"}))
    code, _, err = _run(capsys, "status")
    assert code == 2 and "refused the token" in err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["jump"], ["resume", "--steps", "many"]):
        with pytest.raises(SystemExit) as raised:
            main(argv)
        assert raised.value.code == 2


def test_every_subcommand_takes_json() -> None:
    for sub in SUBCOMMANDS:
        with pytest.raises(SystemExit) as raised:
            main([sub.name, "--json", "--help"])
        assert raised.value.code == 0


# ---------------------------------------------------------------------- real subprocesses


def test_module_help_works() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "onthefly", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    for sub in SUBCOMMANDS:
        assert sub.name in done.stdout


def test_watch_streams_json_lines_until_the_run_finishes_without_importing_torch(
    training: Training, tmp_path: Path
) -> None:
    training.train(2)
    # The import trace goes to a file: a full stderr pipe would block the CLI.
    trace = (tmp_path / "importtime.txt").open("w+")
    with _cli("watch", "--json", python_flags=("-X", "importtime"), stderr=trace) as process:
        assert process.stdout is not None
        first = json.loads(process.stdout.readline())
        assert first["type"] == "snapshot"
        training.train(30)
        training.finish()
        out, _ = process.communicate(timeout=60)
    trace.seek(0)
    err = trace.read()
    trace.close()
    assert process.returncode == 0, err[-2000:]
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["seq"] for e in events] == list(range(first["seq"] + 1, first["seq"] + 31 + 1))
    assert [e["step"] for e in events if e["type"] == "metrics"] == list(range(3, 33))
    assert events[-1]["type"] == "status" and events[-1]["state"] == "finished"
    imported = {line.rsplit("|", 1)[-1].strip() for line in err.splitlines() if "|" in line}
    assert "websockets.sync.client" in imported  # the importtime trace is really there
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}


def test_watch_text_is_one_line_per_event(training: Training) -> None:
    with _cli("watch") as process:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("snapshot    seq ")
        training.train(1)
        training.finish()
        out, _ = process.communicate(timeout=60)
    assert out.splitlines() == [
        "metrics     baseline: train step 1: loss=1 acc=n/a",
        "status      baseline: finished at step 1, epoch 0 (max_steps reached)",
    ]


def test_ctrl_c_during_watch_exits_130_without_traceback(training: Training) -> None:
    with _cli("watch") as process:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("snapshot")
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert err == "onthefly: interrupted\n"


def test_watch_into_a_closed_pipe_ends_quietly(training: Training) -> None:
    # `onthefly watch | head -1`: the reader leaves after one line.
    with _cli("watch") as process:
        assert process.stdout is not None and process.stderr is not None
        assert process.stdout.readline().startswith("snapshot")
        process.stdout.close()
        for _ in range(50):  # enough lines to fill the pipe's buffer if it were still read
            training.train(20)
            if process.poll() is not None:
                break
            time.sleep(0.05)
        assert process.wait(timeout=60) == 141
        err = process.stderr.read()
    assert err == "", err


def test_session_gone_mid_command_exits_1(training: Training) -> None:
    training.hold = True
    with _cli("pause") as process:
        assert training.got_command.wait(30)
        training.server.close()
        out, err = process.communicate(timeout=60)
    assert (process.returncode, out) == (1, "")
    assert "did not take effect" in err and "Traceback" not in err


# ---------------------------------------------------------------------- health and set


def test_health_and_set_on_a_real_held_run(
    onthefly_home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.callbacks.live import wait_for_session
    from tests.callbacks.subprocess_run import training as real_training

    args = ("--max-steps", "4", "--do-test-after")
    with real_training(onthefly_home, tmp_path, *args, keep_alive="1") as run:
        wait_for_session(onthefly_home)
        deadline = time.monotonic() + 60
        while json.loads(_run(capsys, "status", "--json")[1])["state"] != "paused":
            assert time.monotonic() < deadline, run.stderr()
            time.sleep(0.05)
        code, out, _ = _run(capsys, "health", "gradients", "--json")
        data = json.loads(out)
        assert code == 0 and (data["check"], data["step"]) == ("gradients", 4)
        assert [f["severity"] for f in data["findings"]] == ["info"]
        code, out, _ = _run(capsys, "health", "sub", "determinism")
        assert code == 0 and out.startswith("health determinism at step 4 (")
        assert "  info     two replays of the step are bit-identical" in out
        code, out, _ = _run(capsys, "set", "lr=0.01", "--group", "1")
        assert (code, out) == (0, "set: lr of group 1: 0.05 -> 0.01 at step 4\n")
        code, _, err = _run(capsys, "set", "betas=0.9,0.99")
        assert code == 1 and "SGD has no 'betas'" in err and "[unsupported]" in err
        assert _run(capsys, "stop")[0] == 0
        assert run.wait() == 0, run.stderr()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("set", "lr"), "'lr' is not NAME=VALUE"),
        (("set", "dropout=0.1"), "NAME one of lr, weight_decay, momentum, betas"),
        (("set", "lr=fast"), "'lr=fast': 'fast' is not a number"),
        (("set", "betas=0.9"), "expected two numbers such as 0.9,0.999"),
        (("set", "lr=-1"), "lr: Input should be greater than 0"),
    ],
)
def test_bad_set_arguments_are_usage_errors(
    training: Training, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], message: str
) -> None:
    code, _, err = _run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err
    assert not training.got_command.is_set()


def test_health_needs_a_known_check(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["health", "vibes"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'vibes'" in capsys.readouterr().err
