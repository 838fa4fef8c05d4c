"""Reading session files defensively: every bad file gets a clear error and runs nothing."""

from __future__ import annotations

import io
import json
import pickle
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

from onthefly.errors import SessionFileError
from onthefly.sessions.archive import Limits, SessionArchive
from onthefly.sessions.manifest import FORMAT_VERSION, MODEL, Manifest
from onthefly.sessions.members import safe_member_name
from onthefly.sessions.writer import ArchiveWriter


def manifest(**fields: Any) -> Manifest:
    values: dict[str, Any] = {
        "project": "p",
        "run": "r",
        "run_name": "r",
        "driver": "native",
        "step": 3,
        "epoch": 0,
    }
    return Manifest(**{**values, **fields})


def good_file(path: Path) -> Path:
    with ArchiveWriter(path) as writer:
        writer.add_torch(MODEL, {"w": torch.arange(1000, dtype=torch.float32)})
        writer.add_json("history/history.json", {"runs": []})
        writer.commit(manifest())
    return path


def zip_with(path: Path, members: dict[str, bytes], compress: int = zipfile.ZIP_STORED) -> Path:
    with zipfile.ZipFile(path, "w", compress) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def manifest_bytes(**fields: Any) -> bytes:
    return manifest().model_copy(update=fields).model_dump_json().encode()


def test_a_written_file_reads_back(tmp_path: Path) -> None:
    with SessionArchive(good_file(tmp_path / "a.otf")) as archive:
        assert archive.manifest.step == 3
        assert archive.manifest.members[MODEL] == archive.size(MODEL)
        assert torch.equal(archive.load_torch(MODEL)["w"], torch.arange(1000.0))
        assert archive.read_json("history/history.json") == {"runs": []}


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"", "corrupt or truncated"),
        (b"PK\x03\x04 not really a zip", "corrupt or truncated"),
        (b"just some text", "corrupt or truncated"),
    ],
)
def test_not_a_zip(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "x.otf"
    path.write_bytes(content)
    with pytest.raises(SessionFileError, match=expected):
        SessionArchive(path)


def test_a_truncated_file(tmp_path: Path) -> None:
    path = good_file(tmp_path / "a.otf")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(SessionFileError, match="corrupt or truncated"):
        SessionArchive(path)


def test_a_flipped_bit_in_the_weights(tmp_path: Path) -> None:
    path = good_file(tmp_path / "a.otf")
    data = bytearray(path.read_bytes())
    at = data.find(b"\x00\x00\xfaC")  # the float32 500.0 of the weights
    assert at > 0
    data[at + 3] ^= 0x01
    path.write_bytes(bytes(data))
    with SessionArchive(path) as archive, pytest.raises(SessionFileError, match="checksum"):
        archive.load_torch(MODEL)  # small members are checked on every load
    with SessionArchive(path, Limits(verify_bytes=0)) as archive:
        archive.load_torch(MODEL)  # large ones only on request …
        with pytest.raises(SessionFileError, match=f"member {MODEL} is corrupt"):
            archive.verify()  # … as `onthefly inspect --verify` does


def test_a_zip_that_is_not_a_session(tmp_path: Path) -> None:
    path = zip_with(tmp_path / "x.otf", {"readme.txt": b"hello"})
    with pytest.raises(SessionFileError, match="not an OnTheFly session file: it has no manifest"):
        SessionArchive(path)
    path = zip_with(tmp_path / "y.otf", {"manifest.json": b'{"format": "something-else"}'})
    with pytest.raises(SessionFileError, match="not an OnTheFly session file"):
        SessionArchive(path)


def test_a_newer_format_version(tmp_path: Path) -> None:
    newer = manifest_bytes(format_version=FORMAT_VERSION + 1, onthefly_version="9.0")
    path = zip_with(tmp_path / "x.otf", {"manifest.json": newer})
    with pytest.raises(SessionFileError, match=r"format version 2 \(OnTheFly 9.0\).*upgrade"):
        SessionArchive(path)


def test_an_invalid_manifest(tmp_path: Path) -> None:
    document = json.loads(manifest_bytes())
    document["step"] = -1
    path = zip_with(tmp_path / "x.otf", {"manifest.json": json.dumps(document).encode()})
    with pytest.raises(SessionFileError, match=r"invalid manifest\.json.*step"):
        SessionArchive(path)


@pytest.mark.parametrize("name", ["../evil", "/etc/passwd", "a/../../b", "C:/x", "a\\b", "a\x01b"])
def test_unsafe_member_names_are_refused(tmp_path: Path, name: str) -> None:
    assert not safe_member_name(name)
    path = zip_with(tmp_path / "x.otf", {"manifest.json": manifest_bytes(), name: b"x"})
    with pytest.raises(SessionFileError, match="unsafe member name"):
        SessionArchive(path)


def test_sizes_are_bounded(tmp_path: Path) -> None:
    bomb = zip_with(
        tmp_path / "bomb.otf",
        {"manifest.json": manifest_bytes(), "history/x.json": b"0" * 5_000_000},
        zipfile.ZIP_DEFLATED,
    )
    with pytest.raises(SessionFileError, match=r"expands \d+-fold"):
        SessionArchive(bomb)
    many = zip_with(tmp_path / "many.otf", {f"files/{i}": b"" for i in range(20)})
    with pytest.raises(SessionFileError, match="has 20 members; expected at most 10"):
        SessionArchive(many, Limits(max_members=10))
    path = good_file(tmp_path / "a.otf")
    with pytest.raises(
        SessionFileError, match=r"state/model.pt is \d+ bytes; expected at most 100"
    ):
        SessionArchive(path, Limits(max_member_bytes=100))


class _Marker:
    """Unpickling this would create a file: proof that code ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


@pytest.mark.parametrize("wrap", ["torch", "pickle"])
def test_a_file_crafted_to_run_code_is_refused_and_runs_nothing(tmp_path: Path, wrap: str) -> None:
    marker = tmp_path / "pwned"
    payload = {"w": torch.zeros(2), "evil": _Marker(str(marker))}
    if wrap == "torch":
        buffer = io.BytesIO()
        torch.save(payload, buffer)
        data = buffer.getvalue()
    else:
        data = pickle.dumps(payload, protocol=2)  # what torch.load expects of a legacy file
    path = zip_with(tmp_path / "x.otf", {"manifest.json": manifest_bytes(), MODEL: data})
    with SessionArchive(path) as archive, pytest.raises(SessionFileError, match="refused"):
        archive.load_torch(MODEL)
    assert not marker.exists()


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def test_a_deeply_nested_manifest_is_refused_naming_the_member(tmp_path: Path) -> None:
    raw = manifest_bytes().replace(b'"trainer":{}', b'"trainer":{"x":' + _nested(100_000) + b"}")
    path = zip_with(tmp_path / "deep.otf", {"manifest.json": raw})
    with pytest.raises(
        SessionFileError, match=r"member manifest\.json was refused: it nests deeper"
    ):
        SessionArchive(path)


def test_json_members_are_bounded_by_their_parsed_size(tmp_path: Path) -> None:
    # 100,000 empty lists: 300 kB of text, over 6 MB once parsed.
    lists = b"[" + b"[]," * 100_000 + b"[]]"
    raw = manifest_bytes().replace(b'"trainer":{}', b'"trainer":{"x":' + lists + b"}")
    path = zip_with(tmp_path / "wide.otf", {"manifest.json": raw, "history/h.json": lists})
    with pytest.raises(SessionFileError, match=r"manifest.json was refused: .* once parsed"):
        SessionArchive(path, Limits(max_manifest_memory=1 << 20))
    with (
        SessionArchive(path, Limits(max_json_memory=1 << 20)) as archive,
        pytest.raises(SessionFileError, match=r"history/h.json was refused: .* MiB"),
    ):
        archive.read_json("history/h.json")


def test_a_manifest_over_its_own_size_limit_is_refused(tmp_path: Path) -> None:
    path = good_file(tmp_path / "a.otf")
    with pytest.raises(SessionFileError, match=r"manifest.json is \d+ bytes; expected at most 10"):
        SessionArchive(path, Limits(max_manifest_bytes=10))


@pytest.mark.parametrize(
    "names",
    [
        ["files/x", "files/x/y"],
        ["files/x/y", "files/x"],
        ["files/x/", "files/x"],
        ["files/a/b/c", "files/a/b"],
    ],
)
def test_a_name_that_is_both_a_file_and_a_folder_is_refused(
    tmp_path: Path, names: list[str]
) -> None:
    members = {"manifest.json": manifest_bytes(), **{name: b"x" for name in names}}
    path = zip_with(tmp_path / "clash.otf", members)
    with pytest.raises(SessionFileError, match="both as a file and as a folder"):
        SessionArchive(path)


def test_files_beside_each_other_in_folders_are_fine(tmp_path: Path) -> None:
    members = {"manifest.json": manifest_bytes(), "files/a/x": b"1", "files/a/y": b"2"}
    path = zip_with(tmp_path / "ok.otf", {**members, "files/a/": b"", "files/b": b"3"})
    with SessionArchive(path) as archive:
        written = archive.extract("files/", tmp_path / "out")
    assert sorted(p.relative_to(tmp_path / "out").as_posix() for p in written) == [
        "a/x",
        "a/y",
        "b",
    ]


def test_a_history_that_is_not_a_snapshot_is_a_session_file_error(tmp_path: Path) -> None:
    from onthefly.protocol import Snapshot

    members = {"manifest.json": manifest_bytes(), "history/history.json": b'{"runs": 3}'}
    path = zip_with(tmp_path / "h.otf", members)
    with (
        SessionArchive(path) as archive,
        pytest.raises(SessionFileError, match=r"history\.json is not a valid Snapshot"),
    ):
        archive.read_model("history/history.json", Snapshot)
