"""The per-sample subcommands of the ``onthefly`` CLI: ``scan``, ``hist``, ``samples``, ``select``.

Each is an argument builder plus a call ``(client, args) -> (reply data, text renderer)``;
``onthefly/cli.py`` lists them in its table. Text is plain (an ASCII histogram, a table).
Never imports torch.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from onthefly.errors import ConfigurationError

if TYPE_CHECKING:
    from onthefly.client import Client

Rendered = tuple[dict[str, Any], Callable[[], str]]
SPLITS = ("train", "val", "test")
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
    criterion = parser.add_mutually_exclusive_group(required=True)
    criterion.add_argument("--top", type=int, metavar="K", help="the K highest losses")
    criterion.add_argument("--quantile", type=float, metavar="Q", help="losses >= the Q-quantile")
    criterion.add_argument("--min", type=float, metavar="LOSS", help="losses >= LOSS")
    criterion.add_argument(
        "--region", choices=("easy", "ambiguous", "hard"), help="a data-map region"
    )
    criterion.add_argument("--clusters", type=int, metavar="K", help="k-means into K clusters")
    parser.add_argument("--max", type=float, metavar="LOSS", help="with --min: losses <= LOSS")
    parser.add_argument("--cluster", type=int, default=0, metavar="C", help="(default 0)")
    parser.add_argument(
        "--fraction", type=float, default=1 / 3, metavar="F", help="share of a region"
    )


def select(client: Client, args: argparse.Namespace) -> Rendered:
    if args.top is not None:
        criterion: dict[str, Any] = {"top": args.top}
    elif args.quantile is not None:
        criterion = {"quantile": args.quantile}
    elif args.region is not None:
        criterion = {"region": args.region, "fraction": args.fraction}
    elif args.clusters is not None:
        criterion = {"clusters": args.clusters, "cluster": args.cluster}
    else:
        criterion = {"loss_min": args.min, "loss_max": args.max}
    data = client.select(args.split, args.name, source=args.source, **criterion)
    return (
        data,
        lambda: (
            f"selection {data['name']!r}: {data['size']} {data['split']} samples "
            f"({data['source']}, step {data['step']}), loss {_number(data['loss_min'])} to "
            f"{_number(data['loss_max'])}, mean {_number(data['loss_mean'])}"
        ),
    )
