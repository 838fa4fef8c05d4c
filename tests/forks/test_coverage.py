"""The narrow-slice warning: a slice concentrated on few of the run's classes."""

from __future__ import annotations

import numpy as np

from onthefly.forks.coverage import narrow_slice

CLASSES = np.repeat(np.arange(10.0), 20)


def test_a_slice_of_two_classes_out_of_ten_is_narrow() -> None:
    warning = narrow_slice(np.array([3.0] * 15 + [8.0] * 15), CLASSES)
    assert warning is not None
    assert "100% of its 30 samples are of 2 of the run's 10 classes (3, 8)" in warning
    assert "replay=0.5" in warning


def test_a_few_strays_do_not_widen_a_narrow_slice() -> None:
    labels = np.array([3.0] * 50 + [8.0] * 45 + [0.0, 1.0, 2.0, 4.0, 5.0])
    assert narrow_slice(labels, CLASSES) is not None  # 95 % in two classes


def test_broad_slices_binary_tasks_and_unknown_labels_are_not_warned() -> None:
    assert narrow_slice(np.arange(10.0).repeat(3), CLASSES) is None
    assert narrow_slice(np.arange(6.0), CLASSES) is None  # six of ten classes
    assert narrow_slice(np.zeros(20), np.repeat([0.0, 1.0], 10)) is None
    assert narrow_slice(np.full(5, np.nan), CLASSES) is None
    assert narrow_slice(np.array([0.5, 1.5]), np.array([0.5, 1.5, 2.5, 3.5])) is None
