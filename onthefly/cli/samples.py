"""The per-sample subcommands of the ``onthefly`` CLI: ``scan``, ``hist``, ``samples``, ``select``.

Each is an argument builder plus a call ``(client, args) -> (reply data, text renderer)``;
:mod:`onthefly.cli.entry` lists them in its table. Text is plain (an ASCII histogram, a table).
Never imports torch.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from onthefly.cli.runner import Rendered
from onthefly.errors import ConfigurationError

if TYPE_CHECKING:
    from onthefly.client import Client

SPLITS = ("train", "val", "test")
REGIONS = ("easy", "ambiguous", "hard", "mislabeled")
_BAR = 40
_FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json"}


def _split(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument("--split", choices=SPLITS, default=default, help=f"(default {default})")
    parser.add_argument(
        "--source",
        choices=("training", "scan"),
        help="training statistics or the latest scan (default: the scan if there is one)",
    )


def _number(value: Any) -> str:
    return "-" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)


# ---------------------------------------------------------------------- scan


def scan_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--split", choices=SPLITS, default="val", help="(default val)")


def scan(client: Client, args: argparse.Namespace) -> Rendered:
    data = client.scan(args.split)
    if data.get("cancelled"):
        return data, lambda: f"scan of {args.split}: cancelled"
    return (
        data,
        lambda: (
            f"scan of {data['split']} at step {data['step']}: {data['size']} samples in "
            f"{data['duration']:.2f} s, mean loss {_number(data['loss_mean'])}"
        ),
    )


# ---------------------------------------------------------------------- hist


def hist_arguments(parser: argparse.ArgumentParser) -> None:
    _split(parser, "train")
    parser.add_argument("--bins", type=int, default=50, metavar="N", help="(default 50)")
    parser.add_argument("--min", type=float, metavar="LOSS", help="lower edge")
    parser.add_argument("--max", type=float, metavar="LOSS", help="upper edge")


def hist(client: Client, args: argparse.Namespace) -> Rendered:
    data = client.histogram(args.split, args.bins, args.min, args.max, args.source)
    return data, lambda: render_histogram(data)


def render_histogram(data: dict[str, Any]) -> str:
    """One line per bin: its range, its count and a bar."""
    counts: list[int] = data["counts"]
    edges: list[float] = data["edges"]
    peak = max(counts) if counts and max(counts) > 0 else 1
    lines = [
        f"{data['split']} losses ({data['source']}, step {data['step']}): {data['total']} samples, "
        f"mean {_number(data['mean'])}"
    ]
    for lo, hi, count in zip(edges, edges[1:], counts, strict=False):
        bar = "#" * round(_BAR * count / peak)
        lines.append(f"[{lo:>10.4g}, {hi:>10.4g})  {count:>8}  {bar}")
    outside = [f"{data[key]} {key}" for key in ("below", "above", "missing") if data[key]]
    if outside:
        lines.append("not shown: " + ", ".join(outside))
    return "\n".join(lines)


# ---------------------------------------------------------------------- samples


def samples_arguments(parser: argparse.ArgumentParser) -> None:
    _split(parser, "train")
    parser.add_argument("--top", type=int, default=100, metavar="K", help="(default 100)")
    parser.add_argument("--name", help="the selection's name (default top-K)")
    parser.add_argument(
        "--out", metavar="FILE", help="export to FILE (.parquet, .csv or .json) instead of printing"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out FILE")


def samples(client: Client, args: argparse.Namespace) -> Rendered:
    chosen = client.select(args.split, args.name, top=args.top, source=args.source)
    name = chosen["name"]
    if args.out:
        directory, file = os.path.split(os.path.abspath(args.out))
        fmt = _FORMATS.get(os.path.splitext(file)[1].lower())
        if fmt is None:
            raise ConfigurationError(
                f"--out {args.out!r}: expected a .parquet, .csv or .json file name"
            )
        data = client.export_selection(name, directory, fmt, file, args.overwrite)
        return data, lambda: f"wrote {data['rows']} samples of {name!r} to {data['path']}"
    data = client.selection_rows(name, limit=args.top)
    return data, lambda: render_rows(data)


def render_rows(data: dict[str, Any]) -> str:
    """A selection's rows as an aligned table."""
    columns = ("index", "loss", "confidence", "variability", "correct", "count", "label")
    lines = [f"{data['name']}: {data['total']} samples", "  ".join(f"{c:>11}" for c in columns)]
    for row in data["rows"]:
        lines.append("  ".join(f"{_number(row[c]):>11}" for c in columns))
    return "\n".join(lines)


# ---------------------------------------------------------------------- select


def select_arguments(parser: argparse.ArgumentParser) -> None:
    _split(parser, "train")
    parser.add_argument("--name", help="the selection's name (default: from the criterion)")
    criterion_arguments(parser, parser.add_mutually_exclusive_group(required=True))


def criterion_arguments(
    parser: argparse.ArgumentParser, criterion: argparse._MutuallyExclusiveGroup
) -> None:
    """The criteria of ``select`` (also a fork's slice), exactly one of them in ``criterion``."""
    criterion.add_argument("--top", type=int, metavar="K", help="the K highest losses")
    criterion.add_argument("--quantile", type=float, metavar="Q", help="losses >= the Q-quantile")
    criterion.add_argument("--min", type=float, metavar="LOSS", help="losses >= LOSS")
    criterion.add_argument(
        "--region", choices=REGIONS, help="a data-map region; mislabeled ranks by lowest confidence"
    )
    criterion.add_argument(
        "--box",
        type=box,
        metavar="C0:C1,V0:V1",
        help="a box on the data map: confidence in [C0, C1], variability in [V0, V1] (a bound "
        "may be left empty: ':0.3,' is confidence <= 0.3)",
    )
    criterion.add_argument("--clusters", type=int, metavar="K", help="k-means into K clusters")
    parser.add_argument("--max", type=float, metavar="LOSS", help="with --min: losses <= LOSS")
    parser.add_argument("--cluster", type=int, default=0, metavar="C", help="(default 0)")
    share = parser.add_mutually_exclusive_group()
    share.add_argument(
        "--fraction",
        type=float,
        metavar="F",
        help="share of a region (default 1/3; mislabeled: its estimated count)",
    )
    share.add_argument("--size", type=int, metavar="N", help="exactly N samples of a region")
    parser.add_argument(
        "--with-correctness",
        action="store_true",
        help="mislabeled: rank by the mean of confidence and correctness",
    )


def box(text: str) -> dict[str, float | None]:
    """``C0:C1,V0:V1`` as the four bounds of a data-map box (empty: open).

    Raises:
        argparse.ArgumentTypeError: not two ``LO:HI`` ranges of numbers.
    """
    fields: dict[str, float | None] = {}
    ranges = text.split(",")
    if len(ranges) == 1:
        ranges.append(":")  # confidence only
    try:
        if len(ranges) != 2:
            raise ValueError(text)
        for axis, part in zip(("confidence", "variability"), ranges, strict=True):
            low, colon, high = part.partition(":")
            if not colon and part.strip():
                raise ValueError(part)
            fields[f"{axis}_min"] = float(low) if low.strip() else None
            fields[f"{axis}_max"] = float(high) if high.strip() else None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected C0:C1,V0:V1 (confidence and variability ranges, numbers in "
            "[0, 1], any bound may be empty)"
        ) from None
    if all(value is None for value in fields.values()):
        raise argparse.ArgumentTypeError(f"{text!r}: expected at least one bound")
    return fields


def criterion_of(args: argparse.Namespace) -> dict[str, Any]:
    """The command fields of the criterion ``args`` give (:func:`criterion_arguments`).

    Raises:
        ConfigurationError: region options without ``--region``.
    """
    region_options = args.fraction is not None or args.size is not None or args.with_correctness
    if args.region is None and region_options:
        raise ConfigurationError("--fraction, --size and --with-correctness go with --region")
    if args.top is not None:
        return {"top": args.top}
    if args.quantile is not None:
        return {"quantile": args.quantile}
    if args.region is not None:
        region = {"region": args.region, "fraction": args.fraction, "size": args.size}
        return {**region, **({"with_correctness": True} if args.with_correctness else {})}
    if args.box is not None:
        return dict(args.box)
    if args.clusters is not None:
        return {"clusters": args.clusters, "cluster": args.cluster}
    return {"loss_min": args.min, "loss_max": args.max}


def select(client: Client, args: argparse.Namespace) -> Rendered:
    data = client.select(args.split, args.name, source=args.source, **criterion_of(args))
    return (
        data,
        lambda: (
            f"selection {data['name']!r}: {data['size']} {data['split']} samples "
            f"({data['source']}, step {data['step']}), loss {_number(data['loss_min'])} to "
            f"{_number(data['loss_max'])}, mean {_number(data['loss_mean'])}"
        ),
    )
