"""``python -m langgraph_pg_saver.db.render``: a statement as the server receives it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from langgraph_pg_saver.db import render as _render
from langgraph_pg_saver.db.sql import queries_for

#: one value per slot that every statement having that slot accepts
_SAMPLE = {
    "where": "thread,ns",
    "scan": "thread",
    "walk": "200",
    "claim": "true",
    "parts": "true",
    "status": "pending",
    "cap": "100",
    "blob_rows": "2",
    "write_rows": "0",
    "vtype": "vector",
    "vop": "cosine",
    "vdist": "cosine",
}


def test_every_statement_renders_as_the_driver_sends_it() -> None:
    q = queries_for("tenant_a")
    for name in sorted(q.names()):
        slots = q.slots(name)
        text = _render.render(name, [f"{s}={_SAMPLE[s]}" for s in slots], "tenant_a")
        expected = (
            q.render(name, **{s: _render.slot_value(s, _SAMPLE[s]) for s in slots})
            if slots
            else q[name]
        )
        assert text.encode() == expected, name
        assert '"tenant_a".' in text or "{" not in text, name


def test_missing_or_unknown_slots_are_named() -> None:
    with pytest.raises(ValueError, match=r"write_rows=<a count of rows"):
        _render.render("put_writes", [])
    with pytest.raises(ValueError, match=r"takes the slots \['write_rows'\]; 'where=' is not"):
        _render.render("put_writes", ["where=", "write_rows=1"])
    with pytest.raises(KeyError, match="no statement named 'nope'"):
        _render.render("nope", [])
    with pytest.raises(ValueError, match="claim takes true or false"):
        _render.slot_value("claim", "maybe")


def test_the_command_prints_a_statement_and_fails_clearly() -> None:
    run = [sys.executable, "-W", "error", "-m", "langgraph_pg_saver.db.render"]
    out = subprocess.run([*run, "get_tuple", "--schema", "s1"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == queries_for("s1")["get_tuple"].decode().strip()
    listed = subprocess.run([*run, "--list"], capture_output=True, text=True, check=True).stdout
    assert "put_writes  write_rows=" in listed.splitlines()
    bad = subprocess.run([*run, "put", "where="], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.startswith("error: put takes the slots")
    mig = subprocess.run([*run, "--migration", "1"], capture_output=True, text=True, check=True)
    assert "pgsaver_checkpoints" in mig.stdout
