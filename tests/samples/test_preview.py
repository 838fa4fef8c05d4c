"""Sample previews: thumbnails of image-like inputs, texts, tensor summaries, hook values."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import pytest
import torch

from onthefly.samples.preview import MAX_TEXT, previews, render, summary


def pixels(preview: dict[str, Any]) -> np.ndarray:
    data = np.frombuffer(base64.b64decode(preview["pixels"]), dtype=np.uint8)
    return data.reshape(preview["height"], preview["width"], preview["channels"])


@pytest.mark.parametrize(
    ("shape", "channels"),
    [((1, 28, 28), 1), ((28, 28), 1), ((3, 32, 32), 3), ((32, 32, 3), 3), ((4, 16, 16), 4)],
)
def test_image_like_inputs_become_thumbnails(shape: tuple[int, ...], channels: int) -> None:
    out = render(torch.rand(shape), size=64)
    assert out["kind"] == "image" and out["channels"] == channels
    assert (out["height"], out["width"]) == (shape[-2], shape[-2])  # never scaled up
    assert pixels(out).shape == (out["height"], out["width"], channels)


def test_a_large_image_is_scaled_down_keeping_its_aspect_and_its_values() -> None:
    image = torch.zeros(3, 200, 100)
    image[0] = 1.0  # pure red, in [0, 1]
    out = render(image, size=64)
    assert (out["height"], out["width"]) == (64, 32)
    assert pixels(out)[..., 0].min() == 255 and pixels(out)[..., 1:].max() == 0


def test_uint8_images_keep_their_values_and_others_are_stretched() -> None:
    gray = np.full((8, 8), 77, dtype=np.uint8)
    assert pixels(render(gray, size=64)).max() == 77
    normalised = torch.linspace(-2.0, 3.0, 64).reshape(8, 8)
    assert (pixels(render(normalised, size=64)).min(), pixels(render(normalised, 64)).max()) == (
        0,
        255,
    )


def test_texts_tensors_and_other_values() -> None:
    assert render("a cat on a mat", 64) == {"kind": "text", "text": "a cat on a mat"}
    assert len(render("x" * 2000, 64)["text"]) == MAX_TEXT
    tokens = render(torch.arange(100, 140), 64)
    assert tokens == {
        "kind": "tensor",
        "text": "int64[40] " + ", ".join(map(str, range(100, 116))) + ", …",
    }
    features = render(torch.tensor([[0.5, -1.0, 2.0, 1.5, 0.0, 3.0, 1.0, -2.0, 0.25]]), 64)
    assert features["kind"] == "tensor" and features["text"].startswith("float32[1, 9] mean ")
    assert "NaN" in summary(torch.tensor([1.0, float("nan")] * 8))


def test_previews_read_the_dataset_and_keep_labels_and_failures_per_sample() -> None:
    dataset = [(torch.rand(1, 28, 28), torch.tensor(7)), {"text": "hello", "label": 2}]
    out = previews(dataset, [0, 1, 5], size=16)
    assert [p["kind"] for p in out] == ["image", "text", "error"]
    assert [p.get("label") for p in out] == [7, 2, None]
    assert out[0]["height"] == 16 and out[2]["index"] == 5
    assert "IndexError" in out[2]["text"]


def test_the_hook_wins_and_may_take_the_split() -> None:
    dataset = [(torch.tensor([3, 1, 4]), 0)]
    seen: list[Any] = []

    def text(index: int) -> str:
        return f"sample {index}"

    def with_split(index: int, split: str) -> np.ndarray:
        seen.append((index, split))
        return np.zeros((10, 10, 3), dtype=np.uint8)

    assert previews(dataset, [0], 32, describe=text)[0]["text"] == "sample 0"
    shown = previews(dataset, [0], 32, split="val", describe=with_split)[0]
    assert shown["kind"] == "image" and seen == [(0, "val")]
    assert previews(None, [4], 32, describe=text)[0] == {
        "index": 4,
        "kind": "text",
        "text": "sample 4",
    }
    assert "no map-style dataset" in previews(None, [4], 32)[0]["text"]
