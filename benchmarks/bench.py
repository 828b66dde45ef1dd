"""Side-by-side benchmark: langgraph-pg-saver against the official langgraph-checkpoint-postgres.

    python -m benchmarks.bench                       # from the repository root; 5 rounds
    python -m benchmarks.bench --quick               # smaller fixtures, 3 rounds (~5 minutes)
    python -m benchmarks.bench --config pooler --workloads put,get_tuple --rounds 3
    PYTHONPATH=/tmp/before python -P -m benchmarks.bench --label before   # an older checkout

Both savers run the same workloads in one process, on one Postgres server with default settings
(fsync on): a throwaway cluster from the local server binaries (tests/pgserver.py), or
LANGGRAPH_PG_BENCH_DSN. Channel values are message lists and dicts, as LangGraph stores them
(payloads.py). Every workload runs in each configuration (configs.py: same pool, defaults, pooler
mode, and fresh statistics: tables analyzed while empty), the configurations' order rotating
with the round. Single operations and the sync graph
alternate between the savers and the floor call by call (workloads.py); the async workload runs as
blocks in rotation. Each row: the median over rounds of each round's median (or throughput), the
min-max, the ratio official/ours, and the floor measured in the same rounds (floors.py). Results go
to benchmarks/results/<label>.json (default latest.json) and to stdout as Markdown. This is not a
test: it asserts nothing.

The package measured is whichever ``import langgraph_pg_saver`` finds. Under ``python -m`` the
current directory comes before PYTHONPATH, so to measure another checkout run from the repository
root with ``python -P -m`` (Python 3.11+; or PYTHONSAFEPATH=1), which leaves the current directory
out and finds the bench through the editable install; the bench refuses to run when PYTHONPATH names
a package that is not the one imported.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import re
import subprocess
import sys
import time
from contextlib import ExitStack, suppress
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _check_sources() -> None:
    """Refuse to measure a package other than the one PYTHONPATH names, or to run a bench that
    PYTHONPATH slipped in front of this checkout's (see benchmarks/results/README.md)."""
    spec = importlib.util.find_spec("langgraph_pg_saver")
    if spec is None or spec.origin is None:
        sys.exit("langgraph_pg_saver is not importable")
    found = Path(spec.origin).resolve().parent
    entries = [Path(e).resolve() for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e]
    for entry in entries:
        wanted = entry / "langgraph_pg_saver"
        if (wanted / "__init__.py").is_file():
            if wanted.resolve() != found:
                sys.exit(
                    f"PYTHONPATH names {wanted}, but {found} is imported first: under `python -m`"
                    " the current directory comes before PYTHONPATH. Run `python -P -m"
                    " benchmarks.bench ...` (Python 3.11+), or set PYTHONSAFEPATH=1."
                )
            break
    cwd = Path.cwd().resolve()
    if ROOT in entries and cwd != ROOT and (cwd / "benchmarks" / "bench.py").is_file():
        sys.exit(
            f"the bench was imported from {ROOT / 'benchmarks'} (PYTHONPATH), not from {cwd}: put"
            " only the package to measure on PYTHONPATH (a directory holding links to its"
            " langgraph_pg_saver/ and sql/)"
        )


def _git(root: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
    )
    return out.stdout.strip() if out.returncode == 0 else ""


def package_info() -> dict[str, Any]:
    """Where the measured langgraph_pg_saver comes from, and its commit when it is a checkout."""
    import langgraph_pg_saver

    path = Path(langgraph_pg_saver.__file__).resolve().parent
    info: dict[str, Any] = {"path": str(path)}
    root = path.parent
    if (
        _git(root, "rev-parse", "--show-toplevel")
        and Path(_git(root, "rev-parse", "--show-toplevel")).resolve() == root
    ):
        commit = _git(root, "rev-parse", "--short=10", "HEAD")
        dirty = bool(_git(root, "status", "--porcelain", "--", "langgraph_pg_saver", "sql"))
        info.update(commit=commit, dirty=dirty)
        info["describe"] = f"{commit}{'+dirty' if dirty else ''} at {root}"
    else:
        info["describe"] = str(path)
    return info


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in (
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "langchain-core",
        "psycopg",
        "psycopg-pool",
    ):
        with suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    from .configs import CONFIGS, parse_configs
    from .workloads import WORKLOADS, parse_workloads

    def checked(parse: Any) -> Any:
        def run(value: str) -> Any:
            try:
                return parse(value)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from exc

        return run

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--rounds", type=int, help="alternating rounds (default 5; 3 with --quick)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller fixtures and fewer calls per round (2,000-superstep DeltaChannel thread,"
        " 500 threads for list(None, filter)) and 3 rounds",
    )
    parser.add_argument(
        "--config",
        type=checked(parse_configs),
        default=list(CONFIGS.values()),
        help=f"configurations, comma-separated (default all: {','.join(CONFIGS)})",
    )
    parser.add_argument(
        "--workloads",
        type=checked(parse_workloads),
        default=list(WORKLOADS),
        help=f"workloads, comma-separated (default all: {','.join(WORKLOADS)})",
    )
    parser.add_argument(
        "--label",
        default="latest",
        help="names the results file benchmarks/results/LABEL.json (default latest)",
    )
    parser.add_argument("--out", type=Path, help="the results file (default from --label)")
    parser.add_argument(
        "--scale",
        type=int,
        default=0,
        help="add this many checkpoints of background threads to each saver's tables before the"
        " other fixtures (copies of a 100-checkpoint thread of the put workload's payloads, 3"
        " writes each): --scale 1000000 measures every workload next to a million checkpoints",
    )
    args = parser.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9._-]+", args.label):
        parser.error("--label: letters, digits, '.', '_' and '-' only")
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    if args.scale < 0:
        parser.error("--scale must be 0 or more")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.out is None:
        args.out = RESULTS / f"{args.label}.json"
    return args


def _run(
    args: argparse.Namespace, dsn: str, package: dict[str, Any], started: float
) -> dict[str, Any]:
    import psycopg

    from . import report
    from .configs import CONFIGS, FRESH_SCHEMA
    from .workloads import FULL, QUICK, STALE_SCHEMA, Bench

    with psycopg.connect(dsn, autocommit=True) as conn:
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('fsync', 'synchronous_commit', 'server_version', 'shared_buffers')"
            ).fetchall()
        )
    print(f"server: {settings}", flush=True)
    bench = Bench(dsn, QUICK if args.quick else FULL, args.workloads, args.scale)
    configs = args.config
    with ExitStack() as stack:
        with ExitStack() as build:
            builders = CONFIGS["same-pool"].sync_savers(dsn, build)
            for saver in builders.values():
                saver.setup()  # type: ignore[attr-defined]
            print("building fixtures...", flush=True)
            bench.build_fixtures(builders)
        stale: dict[str, Any] = {}
        if "stale" in args.workloads:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {STALE_SCHEMA} CASCADE")
                conn.execute(f"CREATE SCHEMA {STALE_SCHEMA}")
            with ExitStack() as build:
                builders = CONFIGS["same-pool"].sync_savers(dsn, build, STALE_SCHEMA)
                for saver in builders.values():
                    saver.setup()  # type: ignore[attr-defined]
                bench.build_stale(builders)
            stale = {c.name: c.sync_savers(dsn, stack, STALE_SCHEMA) for c in configs}
        if any(c.fresh for c in configs):
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {FRESH_SCHEMA} CASCADE")
                conn.execute(f"CREATE SCHEMA {FRESH_SCHEMA}")
            with ExitStack() as build:
                builders = CONFIGS["same-pool"].sync_savers(dsn, build, FRESH_SCHEMA)
                for saver in builders.values():
                    saver.setup()  # type: ignore[attr-defined]
            bench.autovacuum_off(FRESH_SCHEMA)
        with psycopg.connect(dsn, autocommit=True) as conn:
            # every run starts from the same statistics; fresh-stats' tables are analyzed empty
            conn.execute("ANALYZE")
        savers = {c.name: c.sync_savers(dsn, stack, c.schema) for c in configs}
        print(f"fixtures ready after {time.perf_counter() - started:.0f}s", flush=True)
        for r in range(args.rounds):
            k = r % len(configs)
            for cfg in configs[k:] + configs[:k]:
                bench.run_round(cfg, savers[cfg.name], stale.get(cfg.name), r)
            print(
                f"round {r + 1}/{args.rounds} done after {time.perf_counter() - started:.0f}s",
                flush=True,
            )
    summary = report.summarize(bench, configs)
    trips = bench.round_trips()
    storage = bench.storage()
    return {
        "label": args.label,
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "seconds": round(time.perf_counter() - started),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "server": settings,
        "package": package,
        "versions": versions(),
        "rounds": args.rounds,
        "quick": args.quick,
        "scale": args.scale,
        "workloads_selected": args.workloads,
        "workload_seconds": {k: round(v, 1) for k, v in bench.seconds.items()},
        "configs": summary,
        "round_trips": trips,
        "storage": storage,
    }


def main(argv: list[str] | None = None) -> int:
    _check_sources()
    args = parse_args(argv)

    from . import report
    from .server import bench_database

    package = package_info()
    print(f"measuring langgraph_pg_saver {package['describe']}", flush=True)
    started = time.perf_counter()
    with bench_database("bench", settings="-c max_connections=200") as dsn:
        results = _run(args, dsn, package, started)
    print()
    print(report.markdown(results))
    report.write(results, args.out)
    print(f"\nwrote {args.out} ({results['seconds']}s in all)")
    return 0


if __name__ == "__main__":
    if not __package__:
        sys.exit(
            "run the benchmark as a module from the repository root:"
            " python -m benchmarks.bench [--quick] [--help]"
        )
    raise SystemExit(main())
