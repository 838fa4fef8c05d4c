"""Security: what a live run refuses, where it writes, what it reads, what it never tells.

The threat model and what each defence covers are in SECURITY.md. Checked here against a
real native run (its session server, discovery file and command handlers):

* websocket handshakes without the token, with a wrong one, from a foreign ``Origin`` or
  naming a foreign ``Host`` (DNS rebinding) are refused, and so is the ``/sessions`` list;
* only the loopback interface can be bound, whatever is asked;
* every path or name the protocol accepts stays where it belongs (table below);
* a session file crafted to run code when unpickled runs nothing, through ``import`` and
  through ``resume_from`` (the reader itself: ``tests/sessions/test_archive.py``);
* the token never appears in log records or in any frame a client receives;
* discovery files are 0600 in a 0700 folder, also when the folder existed with wider rights.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import os
import socket
import stat
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch

import onthefly
from onthefly.errors import ConfigurationError, SessionFileError
from onthefly.server import SessionServer
from onthefly.server.discovery import sessions_dir
from onthefly.sessions.manifest import DATA, MODEL, RNG, TRAINER
from tests.hardening.thread_run import live_run
from tests.hardening.training import Net
from tests.hardening.wire import Wire
from tests.sessions.test_archive import _Marker, manifest_bytes, zip_with


def handshake(port: int, path: str, **headers: str) -> int:
    """The HTTP status a raw request gets (101: a websocket was accepted)."""
    fields = {"Host": f"127.0.0.1:{port}", **{k.replace("_", "-"): v for k, v in headers.items()}}
    if fields.pop("upgrade", "yes") == "yes":
        key = base64.b64encode(os.urandom(16)).decode()
        fields |= {"Upgrade": "websocket", "Connection": "Upgrade"}
        fields |= {"Sec-WebSocket-Key": key, "Sec-WebSocket-Version": "13"}
    request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((request + "\r\n").encode())
        status_line = sock.makefile("rb").readline().decode()
    return int(status_line.split()[1])


def test_handshakes_need_the_token_our_origin_and_our_host(
    onthefly_home: Path, tmp_path: Path
) -> None:
    with live_run(onthefly_home, tmp_path) as session:
        port, token = session.port, session.token
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            other = probe.getsockname()[1]
        wrong = token[:-1] + ("A" if token[-1] != "A" else "B")
        refused = {
            "no token": (handshake(port, "/"), 401),
            "wrong token": (handshake(port, f"/?token={wrong}"), 401),
            "token of another name": (handshake(port, f"/?TOKEN={token}"), 401),
            "wrong bearer": (handshake(port, "/", Authorization=f"Bearer {wrong}"), 401),
            "foreign origin": (
                handshake(port, f"/?token={token}", Origin="https://evil.example"),
                403,
            ),
            "loopback page of no session": (
                handshake(port, f"/?token={token}", Origin=f"http://127.0.0.1:{other}"),
                403,
            ),
            "opaque origin": (handshake(port, f"/?token={token}", Origin="null"), 403),
            "look-alike origin": (
                handshake(port, f"/?token={token}", Origin=f"http://127.0.0.1.evil.example:{port}"),
                403,
            ),
            "rebinding host": (
                handshake(port, f"/?token={token}", Host=f"evil.example:{port}"),
                403,
            ),
            "sessions without token": (handshake(port, "/sessions", upgrade="no"), 401),
            "sessions, rebinding host": (
                handshake(port, f"/sessions?token={token}", upgrade="no", Host=f"a.example:{port}"),
                403,
            ),
            "page, rebinding host": (handshake(port, "/", upgrade="no", Host="a.example"), 403),
        }
        accepted = {
            "token": handshake(port, f"/?token={token}"),
            "bearer": handshake(port, "/", Authorization=f"Bearer {token}"),
            "own page": handshake(port, f"/?token={token}", Origin=f"http://127.0.0.1:{port}"),
            "webview": handshake(port, f"/?token={token}", Origin="vscode-webview://abc"),
        }
    assert {name: got for name, (got, _) in refused.items()} == {
        name: expected for name, (_, expected) in refused.items()
    }
    assert set(accepted.values()) == {101}


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "localhost", "127.0.0.2", "::1", ""])
def test_only_the_loopback_address_can_be_bound(host: str) -> None:
    with pytest.raises(ConfigurationError, match=r"expected '127\.0\.0\.1'"):
        SessionServer("p", "r", host=host)


def test_a_live_run_listens_on_loopback_only(
    onthefly_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ONTHEFLY_HOST", "0.0.0.0")  # no such setting: it must change nothing
    with live_run(onthefly_home, tmp_path) as session:
        listening = [
            c.laddr
            for c in psutil.Process().net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.laddr.port == session.port
        ]
        assert [address.ip for address in listening] == ["127.0.0.1"]
        for address in _other_addresses():
            with pytest.raises(OSError), socket.create_connection((address, session.port), 2):
                pass


def _other_addresses() -> list[str]:
    """This machine's IPv4 addresses other than loopback."""
    return [
        a.address
        for addresses in psutil.net_if_addrs().values()
        for a in addresses
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]


# --------------------------------------------------------------------------- paths and names


def test_every_path_and_name_of_the_protocol_stays_where_it_belongs(
    onthefly_home: Path, tmp_path: Path
) -> None:
    sandbox, outside = tmp_path / "sandbox", tmp_path / "outside"
    (sandbox / "sub").mkdir(parents=True)
    (sandbox / "d.otf").mkdir()
    outside.mkdir()
    victim = outside / "victim"
    victim.write_text("precious")
    (sandbox / "link.otf").symlink_to(victim)
    (sandbox / "out.parquet").symlink_to(outside / "out.parquet")
    os.mkfifo(sandbox / "pipe.otf")
    os.mkfifo(sandbox / "pipe.csv")
    with live_run(onthefly_home, tmp_path) as session:
        wire = Wire(session)
        wire.call("subscribe", since=0)
        wire.wait(lambda: len(wire.events) > 40 or None)
        assert wire.call("pause")["type"] == "reply"
        assert wire.call("select", top=5, name="hard")["type"] == "reply"

        def code(kind: str, **fields: Any) -> str:
            answer = wire.call(kind, timeout=20, **fields)
            return "reply" if answer["type"] == "reply" else answer["error"]["code"]

        refused = {
            # export: any file the user can write, but only ever a .otf one
            "export, control character": code("export", path=f"{sandbox}/a\nb"),
            "export, missing folder": code("export", path=f"{sandbox}/none/x.otf"),
            "export, a folder": code("export", path=str(sandbox / "d.otf")),
            # import: only session files are read
            "import, a text file": code("import", path=str(victim)),
            "import, a pipe": code("import", path=str(sandbox / "pipe.otf")),
            "import, a folder": code("import", path=str(sandbox)),
            "import, a device": code("import", path="/dev/zero"),
            # export_selection: a bare file name inside an existing absolute folder
            "selection, parent": code(
                "export_selection", name="hard", directory=str(sandbox), file="../victim"
            ),
            "selection, absolute file": code(
                "export_selection", name="hard", directory=str(sandbox), file=str(victim)
            ),
            "selection, subfolder": code(
                "export_selection", name="hard", directory=str(sandbox), file="sub/x"
            ),
            "selection, dot-dot": code(
                "export_selection", name="hard", directory=str(sandbox), file=".."
            ),
            "selection, backslash": code(
                "export_selection", name="hard", directory=str(sandbox), file="..\\x"
            ),
            "selection, NUL": code(
                "export_selection", name="hard", directory=str(sandbox), file="x\x00y"
            ),
            "selection, link out": code(
                "export_selection", name="hard", directory=str(sandbox), file="out"
            ),
            "selection, relative folder": code(
                "export_selection", name="hard", directory="sandbox", file="x"
            ),
            # names: never paths
            "selection name": code("select", top=5, name="../hard"),
            "rows of a traversal name": code("selection_rows", name="../../hard"),
            "checkpoint": code("restore", checkpoint="../../../victim"),
            # fork names become file names (forks/<name>.pt in the session folder)
            "fork name": code("fork", indices=[0, 1], steps=1, name="../../victim"),
            "fork of a traversal selection": code("fork", selection="../hard", steps=1),
            "merge name": code("merge", method="soup", forks=["x"], name="../victim"),
            "merge of a traversal fork": code("merge", method="soup", forks=["../../victim"]),
            "compare a traversal fork": code("compare", forks=["../../victim"]),
            "run": code("status", run="../../etc/passwd"),
            # test labels name files in user code (ONTHEFLY_TEST_LABEL)
            "test label, parent": code("test", label="../../outside/label"),
            "test label, NUL": code("test", label="x\x00"),
        }
        # Nothing is replaced unless asked: not a link, not a pipe, not a file.
        refused |= {
            "export onto a link": code("export", path=str(sandbox / "link.otf")),
            "export onto a pipe": code("export", path=str(sandbox / "pipe")),
            "selection onto a pipe": code(
                "export_selection", name="hard", directory=str(sandbox), file="pipe", format="csv"
            ),
        }
        accepted = {
            "export through ..": wire.call("export", path=f"{sandbox}/sub/../../outside/victim"),
            "export over a link": wire.call(
                "export", path=str(sandbox / "link.otf"), overwrite=True
            ),
            "export over a pipe": wire.call("export", path=str(sandbox / "pipe"), overwrite=True),
            "selection over a pipe": wire.call(
                "export_selection",
                timeout=20,
                name="hard",
                directory=str(sandbox),
                file="pipe",
                format="csv",
                overwrite=True,
            ),
            "test label": wire.call("test", label="a plain label"),
            "metric": wire.call("history", metric="../../victim"),
        }
        assert wire.call("resume")["type"] == "reply"
    assert refused == {
        "export, control character": "file_error",
        "export, missing folder": "file_error",
        "export, a folder": "file_error",
        "import, a text file": "file_error",
        "import, a pipe": "file_error",
        "import, a folder": "file_error",
        "import, a device": "file_error",
        "selection, parent": "unsupported",
        "selection, absolute file": "unsupported",
        "selection, subfolder": "unsupported",
        "selection, dot-dot": "unsupported",
        "selection, backslash": "unsupported",
        "selection, NUL": "unsupported",
        "selection, link out": "unsupported",
        "selection, relative folder": "unsupported",
        "selection name": "bad_message",
        "rows of a traversal name": "bad_message",
        "checkpoint": "invalid_state",
        "fork name": "bad_message",
        "fork of a traversal selection": "bad_message",
        "merge name": "bad_message",
        "merge of a traversal fork": "bad_message",
        "compare a traversal fork": "bad_message",
        "run": "unknown_run",
        "test label, parent": "unsupported",
        "test label, NUL": "unsupported",
        "export onto a link": "file_error",
        "export onto a pipe": "file_error",
        "selection onto a pipe": "file_error",
    }
    assert {k: a["type"] for k, a in accepted.items()} == dict.fromkeys(accepted, "reply")
    assert victim.read_text() == "precious"  # never written, never followed
    assert not (outside / "out.parquet").exists()
    assert (sandbox / "link.otf").is_file() and not (sandbox / "link.otf").is_symlink()
    assert (outside / "victim.otf").is_file()  # export writes where it is told, as .otf only
    assert sorted(p.name for p in outside.iterdir()) == ["victim", "victim.otf"]
    assert not (tmp_path / "label").exists()


# --------------------------------------------------------------------------- session files


def crafted(path: Path, marker: Path) -> Path:
    """A session file each of whose tensor members would create ``marker`` if unpickled."""
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(2), "evil": _Marker(str(marker))}, buffer)
    members = {name: buffer.getvalue() for name in (MODEL, TRAINER, RNG, DATA)}
    return zip_with(path, {"manifest.json": manifest_bytes(), **members})


def test_a_crafted_session_file_runs_nothing_when_imported_or_resumed(
    onthefly_home: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "pwned"
    evil = crafted(tmp_path / "evil.otf", marker)
    with live_run(onthefly_home, tmp_path) as session:
        wire = Wire(session)
        assert wire.call("pause")["type"] == "reply"
        refused = wire.call("import", path=str(evil))
        assert refused["error"]["code"] == "file_error"
        assert "refused" in refused["error"]["message"]
        assert wire.call("resume")["type"] == "reply"
    trainer = onthefly.Trainer(project="p", max_steps=1, session=False, progress_bar=False)
    model = Net()
    with pytest.raises(SessionFileError, match="refused"):
        trainer.fit(
            model=model,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
            loss_fn=torch.nn.CrossEntropyLoss(),
            train_loader=[(torch.zeros(2, 8), torch.zeros(2, dtype=torch.long))],
            resume_from=evil,
        )
    assert not marker.exists()


# --------------------------------------------------------------------------- the token


def test_the_token_never_appears_in_logs_or_frames(
    onthefly_home: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    frames: list[str] = []
    with live_run(onthefly_home, tmp_path) as session:
        token = session.token
        watcher = Wire(session)
        watcher.call("subscribe", since=0)
        watcher.call("subscribe")  # a snapshot too
        for path in ("/", f"/?token={token[:-2]}", f"/?token={token}x"):
            handshake(session.port, path)
        handshake(session.port, f"/?token={token}", Origin="https://evil.example")
        with onthefly.connect(home=onthefly_home) as client:  # the client logs nothing either
            client.pause()
            client.test()
            client.export(tmp_path / "run.otf")
            client.resume()
        watcher.send('{"type": "ping"')
        logging.getLogger("user").warning("a line of the user's own")
        watcher.call("history", metric="loss")
        received = (*watcher.events, *watcher.answers, *watcher.snapshots, *watcher.notices)
        frames = [json.dumps(m) for m in received]
    assert caplog.records and watcher.snapshots and len(frames) > 10
    assert token not in caplog.text
    assert [f for f in frames if token in f] == []


# --------------------------------------------------------------------------- discovery files


def test_discovery_files_are_private_even_in_a_folder_made_too_open(onthefly_home: Path) -> None:
    folder = sessions_dir()
    folder.mkdir(mode=0o755, parents=True)
    folder.chmod(0o755)
    with SessionServer("p", "r", port=0, quiet=True) as server:
        (path,) = folder.glob(f"*-{server.port}.json")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_a_discovery_folder_of_another_user_is_refused(onthefly_home: Path) -> None:
    folder = sessions_dir()
    folder.mkdir(parents=True)
    os.chown(folder, 65534, 65534)
    with pytest.raises(ConfigurationError, match="belongs to another user"):
        SessionServer("p", "r", port=0, quiet=True).start()
