"""Exports in three formats, raw columns included, never outside the chosen folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
import torch
from torch.utils.data import TensorDataset

from onthefly.errors import ConfigurationError
from onthefly.samples import export
from tests.samples.conftest import make_view


def test_each_format_holds_the_rows_and_raw_columns(tmp_path: Path) -> None:
    view = make_view(5)
    dataset = TensorDataset(torch.arange(10.0).reshape(10, 1).repeat(1, 2), torch.arange(10))
    table = export.table(view, dataset, classes=True)
    assert table.column("index").to_pylist() == [0, 2, 4, 6, 8]
    assert table.column("item_1").to_pylist() == [0, 2, 4, 6, 8]
    assert table.column("item_0").to_pylist()[1] == [2.0, 2.0]
    assert table.column("label").type == "int64"
    parquet = export.target_path(tmp_path, "hard", "parquet")
    export.write(table, parquet, "parquet")
    assert pq.read_table(parquet).equals(table)
    csv = export.target_path(tmp_path, "hard", "csv")
    export.write(table, csv, "csv")
    read = pa_csv.read_csv(csv)
    assert read.column("index").to_pylist() == [0, 2, 4, 6, 8] and "item_0" not in read.column_names
    path = export.target_path(tmp_path, "hard.json", "json")
    export.write(table, path, "json")
    rows = json.loads(path.read_text())
    assert rows[0]["index"] == 0 and rows[0]["variability"] is not None
    assert rows[0]["item_0"] == [0.0, 0.0]


def test_nan_is_null_in_json(tmp_path: Path) -> None:
    view = make_view(2)
    view.margin[:] = np.nan
    path = export.target_path(tmp_path, "x", "json")
    export.write(export.table(view), path, "json")
    assert json.loads(path.read_text())[0]["margin"] is None


@pytest.mark.parametrize("name", ["../evil", "sub/evil", "/etc/evil", "..", ".", "a\\b", ""])
def test_a_crafted_name_cannot_leave_the_folder(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigurationError, match="bare file name"):
        export.target_path(tmp_path, name, "csv")


def test_a_link_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    inside = tmp_path / "inside"
    inside.mkdir()
    os.symlink(outside / "target.csv", inside / "link.csv")
    with pytest.raises(ConfigurationError, match="resolves outside"):
        export.target_path(inside, "link.csv", "csv")


def test_the_folder_must_be_absolute_and_exist(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="relative"):
        export.target_path("relative/dir", "x", "csv")
    with pytest.raises(ConfigurationError, match="does not exist"):
        export.target_path(tmp_path / "missing", "x", "csv")
    with pytest.raises(ConfigurationError, match="expected one of csv, parquet, json"):
        export.target_path(tmp_path, "x", "xlsx")


def test_an_existing_file_is_replaced_only_when_asked(tmp_path: Path) -> None:
    table = export.table(make_view(3))
    path = export.target_path(tmp_path, "hard", "csv")
    path.write_text("earlier")
    with pytest.raises(FileExistsError) as refused:
        export.write(table, path, "csv")
    assert (
        refused.value.strerror
        == f"{path} exists; expected a new file name, or overwrite to replace it"
    )
    assert path.read_text() == "earlier"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.csv"]
    export.write(table, path, "csv", overwrite=True)
    assert pa_csv.read_csv(path).num_rows == 3


def test_a_name_too_long_is_an_os_error(tmp_path: Path) -> None:
    with pytest.raises(OSError, match="too long"):
        export.target_path(tmp_path / ("d" * 300), "x", "csv")
