"""Medians and ratios, the Markdown tables, the results files, and comparing two of them.

    python -m benchmarks.report benchmarks/results/latest.json            # its tables again
    python -m benchmarks.report benchmarks/results/before.json benchmarks/results/after.json
    python -m benchmarks.report --growth small.json large.json   # the same bench without and with --scale

Each row: the median over rounds of each round's median latency (or the block's throughput), the
min-max over rounds, and the speedup official / ours of the medians (ours / official for
throughput: above 1 means we are faster), next to the floor's median and ``best``, the speedup a
saver costing no more than the floor would show.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .floors import NOTE as FLOORS_NOTE
from .targets import rows_of, slowdown


def interleaved(
    ops: dict[str, dict[str, Callable[[], Any]]], calls: int, rounds: int
) -> dict[str, dict[str, float]]:
    """Per operation and party: the median over rounds of each round's median call (ms), the
    parties called in turn, call by call (the first ten calls of each warm it)."""
    out: dict[str, dict[str, float]] = {}
    for op, by_party in ops.items():
        per_round: dict[str, list[float]] = {p: [] for p in by_party}
        for _ in range(rounds):
            times: dict[str, list[float]] = {p: [] for p in by_party}
            for i in range(calls + 10):  # the first ten warm each party
                for party, fn in by_party.items():
                    start = time.perf_counter()
                    fn()
                    if i >= 10:
                        times[party].append(time.perf_counter() - start)
            for party, t in times.items():
                per_round[party].append(statistics.median(t) * 1000)
        out[op] = {p: statistics.median(v) for p, v in per_round.items()}
    return out


def summarize(bench: Any, configs: list[Any]) -> dict[str, Any]:
    """{config name: {"title", "description", "workloads": [row, ...]}} from a Bench's samples."""
    names = bench.names()
    out: dict[str, Any] = {}
    for cfg in configs:
        rows = []
        for row, by_party in bench.samples.get(cfg.name, {}).items():
            higher = bench.higher_is_better[row]
            med = {p: statistics.median(v) for p, v in by_party.items()}
            entry: dict[str, Any] = {
                "id": row,
                "name": names.get(row, row),
                "unit": bench.units[row],
            }
            for party in ("ours", "official"):
                entry[f"{party}_median"] = med[party]
                entry[f"{party}_min"] = min(by_party[party])
                entry[f"{party}_max"] = max(by_party[party])
            entry["speedup"] = (
                med["ours"] / med["official"] if higher else med["official"] / med["ours"]
            )
            entry["rounds"] = len(by_party["ours"])
            if "floor" in med:
                floor = med["floor"]
                entry["floor"] = floor
                entry["floor_min"] = min(by_party["floor"])
                entry["floor_max"] = max(by_party["floor"])
                entry["best_possible_speedup"] = (
                    floor / med["official"] if higher else med["official"] / floor
                )
            rows.append(entry)
        out[cfg.name] = {"title": cfg.title, "description": cfg.description, "workloads": rows}
    return out


def _num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.2f}"
    return f"{x:.3f}"


def _range(row: dict[str, Any], party: str) -> str:
    med, lo, hi = row[f"{party}_median"], row[f"{party}_min"], row[f"{party}_max"]
    if row.get("rounds", 1) == 1:
        return _num(med)
    return f"{_num(med)} ({_num(lo)}–{_num(hi)})"


def _rounds(results: dict[str, Any]) -> str:
    n = results.get("rounds", 0)
    scale = results.get("scale") or 0
    extra = f", {scale:,} background checkpoints per saver" if scale else ""
    return f"{n} round{'' if n == 1 else 's'}{', quick' if results.get('quick') else ''}{extra}"


def markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: one table per configuration, then round trips and storage."""
    lines = [
        f"## Results: {results.get('label', '')}",
        "",
        f"{_rounds(results)};"
        f" server {results.get('server', {}).get('server_version', '?')}"
        f" (fsync {results.get('server', {}).get('fsync', '?')});"
        f" ours: {results.get('package', {}).get('describe', '?')};"
        f" official: langgraph-checkpoint-postgres {results.get('versions', {}).get('langgraph-checkpoint-postgres', '?')}."
        " Medians over rounds (min–max over rounds); speedup: official / ours (throughput: ours /"
        " official), above 1 means ours is faster; best: the speedup a saver costing no more than"
        " the floor would show.",
    ]
    for section in results.get("configs", {}).values():
        lines += [
            "",
            f"### {section['title']}",
            "",
            section["description"],
            "",
            "| workload | ours | official | speedup | floor | best |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in section["workloads"]:
            floor = (
                (_num(row["floor"]), f"{row['best_possible_speedup']:.2f}x")
                if "floor" in row
                else ("", "")
            )
            lines.append(
                f"| {row['name']} [{row['unit']}] | {_range(row, 'ours')} |"
                f" {_range(row, 'official')} | {row['speedup']:.2f}x | {floor[0]} | {floor[1]} |"
            )
    lines += ["", FLOORS_NOTE]
    trips = results.get("round_trips")
    if trips:
        lines += [
            "",
            "Round trips per operation (ours / official): "
            + ", ".join(f"{op} {by['ours']} / {by['official']}" for op, by in trips.items())
            + ".",
        ]
    storage = results.get("storage") or {}
    totals = storage.get("total", {})
    if totals:
        lines += ["", "| storage per 1,000 checkpoints | bytes |", "|---|---:|"]
        for impl, tables in storage.get("tables", {}).items():
            for table, size in tables.items():
                lines.append(f"| {impl}: {table} | {size:,.0f} |")
        for impl, size in totals.items():
            lines.append(f"| **{impl}: all tables** | **{size:,.0f}** |")
        if "ours" in totals and "official" in totals:
            lines.append(f"| ours / official | {totals['ours'] / totals['official']:.2f}x |")
    return "\n".join(lines)


def write(results: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def compare(a: dict[str, Any], b: dict[str, Any]) -> str:
    """Two results files side by side: ours in each, and each run's speedup over the official saver
    (measured in the same run, so it moves less with the machine than ours' latency does)."""
    la, lb = a.get("label", "A"), b.get("label", "B")
    lines = [
        f"## {la} → {lb}",
        "",
        f"{la}: {a.get('package', {}).get('describe', '?')}, {_rounds(a)};"
        f" {lb}: {b.get('package', {}).get('describe', '?')}, {_rounds(b)}."
        f" ours {lb}/{la}: below 1 means {lb} is faster (throughput: above 1).",
    ]
    for name, section in b.get("configs", {}).items():
        old = {r["id"]: r for r in a.get("configs", {}).get(name, {}).get("workloads", [])}
        lines += [
            "",
            f"### {section['title']}",
            "",
            f"| workload | ours {la} | ours {lb} | {lb}/{la} | speedup {la} | speedup {lb} |",
            "|---|---:|---:|---:|---:|---:|",
        ]
        for row in section["workloads"]:
            prev = old.get(row["id"])
            if prev is None:
                lines.append(
                    f"| {row['name']} [{row['unit']}] | | {_num(row['ours_median'])} | |"
                    f" | {row['speedup']:.2f}x |"
                )
                continue
            lines.append(
                f"| {row['name']} [{row['unit']}] | {_num(prev['ours_median'])} |"
                f" {_num(row['ours_median'])} | {row['ours_median'] / prev['ours_median']:.2f} |"
                f" {prev['speedup']:.2f}x | {row['speedup']:.2f}x |"
            )
    return "\n".join(lines)


def growth(small: dict[str, Any], large: dict[str, Any]) -> str:
    """One table of the same bench on a small table and next to a large one (``--scale``): ours'
    median in each configuration (same pool / defaults / pooler mode, in that order), how much
    slower ours is in the large run (throughput: how much less), and each run's speedup over the
    official saver."""
    configs = [c for c in small.get("configs", {}) if c in large.get("configs", {})]
    a_rows = {c: rows_of(small, c) for c in configs}
    b_rows = {c: rows_of(large, c) for c in configs}
    scale = large.get("scale") or 0
    lines = [
        f"{small.get('label', 'small')} ({_rounds(small)}) and {large.get('label', 'large')}"
        f" ({_rounds(large)}); per cell: {' / '.join(configs)}.",
        "",
        "| workload | ours, small | ours, large | large / small | speedup, small |"
        " speedup, large |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    if not configs:
        return "\n".join(lines)
    for wid, first in a_rows[configs[0]].items():
        # ours small, ours large, speedup small, speedup large: one entry per configuration
        cells: list[list[str]] = [[], [], [], []]
        grow: list[float] = []
        for c in configs:
            a, b = a_rows[c].get(wid), b_rows[c].get(wid)
            if a is None or b is None:
                continue
            cells[0].append(f"{a['ours_median']:.3g}")
            cells[1].append(f"{b['ours_median']:.3g}")
            grow.append(slowdown(a, b))
            cells[2].append(f"{a['speedup']:.2f}x")
            cells[3].append(f"{b['speedup']:.2f}x")
        if not grow:
            continue
        lo, hi = f"{min(grow):.2f}", f"{max(grow):.2f}"
        spread = lo if lo == hi else f"{lo}–{hi}"
        lines.append(
            f"| {first['name']} [{first['unit']}] | {' / '.join(cells[0])} |"
            f" {' / '.join(cells[1])} | {spread} | {' / '.join(cells[2])} |"
            f" {' / '.join(cells[3])} |"
        )
    if scale:
        lines += ["", f"large: {scale:,} background checkpoints per saver."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("files", nargs="+", type=Path, help="one results file, or two to compare")
    parser.add_argument(
        "--growth",
        action="store_true",
        help="two files of the same bench, the second with --scale: how ours grows from one to the"
        " other",
    )
    args = parser.parse_args(argv)
    loaded = [json.loads(p.read_text()) for p in args.files]
    if args.growth:
        if len(loaded) != 2:
            parser.error("--growth takes two results files: the small run, then the large one")
        print(growth(*loaded))
    elif len(loaded) == 1:
        print(markdown(loaded[0]))
    elif len(loaded) == 2:
        print(compare(*loaded))
    else:
        parser.error("give one results file, or two to compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
