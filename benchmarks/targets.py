"""Issue 19's targets checked against `make bench` results files: what each row measured, and whether
it meets its target, per configuration.

    python -m benchmarks.targets benchmarks/results/latest.json
    python -m benchmarks.targets small.json --large large.json   # adds the 10k -> 1M checks

A row meets a speed target when ours over the official saver (ratio of medians, measured in the same
rounds) reaches it, or, where the target allows it, when ours is within the given factor of the
floor of the same run (ours / floor; for throughput floor / ours). With ``--large`` (a run with
``--scale``) it also checks that the hot operations stay within 1.3x, and list() across threads
within 1.5x, from the first file's run to the second's. It asserts nothing: it prints a table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: workload id -> (least speedup, or None; largest ours / floor that also meets it, or None)
SPEED = {
    "put": (2.0, 1.2),
    "put_writes": (1.5, 1.2),
    "get_tuple latest": (2.0, 1.2),
    "get_tuple by id": (2.0, 1.2),
    "list(thread, limit=20)": (3.0, None),
    "list(None, dense filter, limit=10)": (3.0, None),
    "list(None, sparse filter, limit=10)": (3.0, None),
    "list(None, filter of old checkpoints, limit=10)": (3.0, None),
    "8-node graph, sync, per superstep": (1.6, None),
    "50 threads async, 3 invokes each": (3.0, None),
}
#: the operations a running graph makes: within 1.3x from the small run to the large one
HOT = (
    "put",
    "put_writes",
    "get_tuple latest",
    "get_tuple by id",
    "list(thread, limit=20)",
    "8-node graph, sync, per superstep",
    "50 threads async, 3 invokes each",
)
#: list() across threads with a limit: within 1.5x from the small run to the large one
FLAT = (
    "list(None, dense filter, limit=10)",
    "list(None, sparse filter, limit=10)",
    "list(None, filter of old checkpoints, limit=10)",
)
STORAGE = 0.7


def _floor_ratio(row: dict[str, Any]) -> float | None:
    floor = row.get("floor")
    if not floor:
        return None
    ours = float(row["ours_median"])
    return float(floor) / ours if row["unit"].endswith("/s") else ours / float(floor)


def slowdown(small: dict[str, Any], large: dict[str, Any]) -> float:
    """How much slower ours is in the large run (throughput: how much less)."""
    a, b = float(small["ours_median"]), float(large["ours_median"])
    return a / b if small["unit"].endswith("/s") else b / a


def rows_of(results: dict[str, Any], config: str) -> dict[str, dict[str, Any]]:
    section = results.get("configs", {}).get(config, {})
    return {row["id"]: row for row in section.get("workloads", [])}


def check(small: dict[str, Any], large: dict[str, Any] | None = None) -> list[str]:
    """The Markdown lines of the verdicts."""
    configs = list(small.get("configs", {}))
    lines = [
        "| target | " + " | ".join(configs) + " |",
        "|---|" + "---|" * len(configs),
    ]
    for wid, (least, near) in SPEED.items():
        cells = []
        for config in configs:
            row = rows_of(small, config).get(wid)
            if row is None:
                cells.append("not run")
                continue
            speedup = float(row["speedup"])
            ratio = _floor_ratio(row)
            met = speedup >= least or (near is not None and ratio is not None and ratio <= near)
            floor = f", {ratio:.2f}x floor" if ratio is not None else ""
            cells.append(f"{'met' if met else 'NOT met'}: {speedup:.2f}x{floor}")
        goal = f">= {least}x" + (f" or <= {near}x floor" if near else "")
        lines.append(f"| {wid} {goal} | " + " | ".join(cells) + " |")
    storage = small.get("storage", {}).get("total", {})
    if storage.get("official"):
        share = storage["ours"] / storage["official"]
        verdict = "met" if share <= STORAGE else "NOT met"
        lines.append(
            f"| storage <= {STORAGE}x | {verdict}: {share:.2f}x |" + " |" * (len(configs) - 1)
        )
    if large is not None:
        for names, limit in ((HOT, 1.3), (FLAT, 1.5)):
            for wid in names:
                cells = []
                for config in configs:
                    a, b = rows_of(small, config).get(wid), rows_of(large, config).get(wid)
                    if a is None or b is None:
                        cells.append("not run")
                        continue
                    growth = slowdown(a, b)
                    cells.append(f"{'met' if growth <= limit else 'NOT met'}: {growth:.2f}x")
                lines.append(f"| {wid}, large / small <= {limit}x | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("results", type=Path, help="a make bench results file")
    parser.add_argument("--large", type=Path, help="the same bench with --scale, to compare with")
    args = parser.parse_args(argv)
    small = json.loads(args.results.read_text())
    large = json.loads(args.large.read_text()) if args.large else None
    print("\n".join(check(small, large)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
