"""The benchmark's reporting tools, on results files made here: the verdicts of benchmarks.targets
and the growth table of benchmarks.report, which the performance docs quote."""

from __future__ import annotations

from typing import Any

from benchmarks import report, targets


def row(
    wid: str, ours: float, official: float, floor: float | None = None, unit: str = "ms"
) -> Any:
    higher = unit.endswith("/s")
    entry = {
        "id": wid,
        "name": wid,
        "unit": unit,
        "ours_median": ours,
        "ours_min": ours,
        "ours_max": ours,
        "official_median": official,
        "official_min": official,
        "official_max": official,
        "speedup": ours / official if higher else official / ours,
        "rounds": 5,
    }
    if floor is not None:
        entry["floor"] = floor
    return entry


def results(label: str, rows: list[Any], scale: int = 0) -> Any:
    configs = {
        name: {"title": name, "description": "", "workloads": rows}
        for name in ("same-pool", "defaults", "pooler")
    }
    return {"label": label, "rounds": 5, "quick": True, "scale": scale, "configs": configs}


def test_a_target_is_met_by_the_speedup_or_by_the_floor_and_not_otherwise() -> None:
    small = results(
        "small",
        [
            row("put", 1.0, 2.5, floor=0.5),  # 2.5x: met by the speedup
            row("put_writes", 1.0, 1.1, floor=0.9),  # 1.11x of its floor: met by the floor
            row("get_tuple latest", 1.0, 1.1, floor=0.5),  # neither
            row("50 threads async, 3 invokes each", 300.0, 100.0, unit="supersteps/s"),
        ],
    )
    lines = targets.check(small)

    def verdicts(wid: str) -> list[str]:
        line = next(x for x in lines if x.startswith(f"| {wid} >="))
        return [cell.strip() for cell in line.split("|")[2:-1]]

    assert verdicts("put") == ["met: 2.50x, 2.00x floor"] * 3
    assert verdicts("put_writes") == ["met: 1.10x, 1.11x floor"] * 3
    assert verdicts("get_tuple latest") == ["NOT met: 1.10x, 2.00x floor"] * 3
    assert verdicts("get_tuple by id") == ["not run"] * 3
    assert verdicts("50 threads async, 3 invokes each") == ["met: 3.00x"] * 3


def test_growth_divides_large_by_small_and_inverts_throughput() -> None:
    small = results(
        "small",
        [row("put", 1.0, 1.2), row("async", 400.0, 200.0, unit="supersteps/s")],
    )
    large = results(
        "large",
        [row("put", 1.5, 1.2), row("async", 200.0, 200.0, unit="supersteps/s")],
        scale=1_000_000,
    )
    text = report.growth(small, large)
    put = next(line for line in text.splitlines() if line.startswith("| put"))
    assert "| 1.50 |" in put  # 1.5 ms against 1.0 in every configuration
    assert "1.20x / 1.20x / 1.20x | 0.80x / 0.80x / 0.80x |" in put
    async_ = next(line for line in text.splitlines() if line.startswith("| async"))
    assert "| 2.00 |" in async_  # half the throughput is twice as slow
    assert "1,000,000 background checkpoints" in text
    lines = targets.check(small, large)
    assert any(
        line.startswith("| put, large / small") and "NOT met: 1.50x" in line for line in lines
    )
