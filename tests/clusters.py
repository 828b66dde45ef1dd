"""Clusters of a test's own, to stop, kill, restart and fail over for real (tests of outages).

``Cluster`` is one Postgres server from the local binaries (initdb + pg_ctl, run as the ``postgres``
OS user when we are root) on a free port, with durability on (a crash must lose nothing that was
acknowledged). ``replicated_pair`` makes a primary and a streaming standby of it (pg_basebackup), with
synchronous replication or without, and a multi-host DSN naming both with
``target_session_attrs=read-write``, the way a user points a service at a failover pair.

Nothing here mocks a fault: ``stop`` is a real shutdown, ``kill`` an immediate one (a crash: the next
start runs crash recovery), ``promote`` the standby's real promotion.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from pgserver import _bindirs, free_port, service_dir

#: durability on (fsync, synchronous commit): a crash or a failover must lose no acknowledged write
SETTINGS = (
    "-c max_connections=100 -c wal_level=replica -c max_wal_senders=5 -c hot_standby=on"
    " -c wal_keep_size=256MB"
)


def _bindir() -> Path:
    dirs = _bindirs()
    if not dirs:
        if os.environ.get("CI"):
            pytest.fail("no local Postgres server binaries to start a cluster of the test's own")
        pytest.skip("no local Postgres server binaries")
    return dirs[0]


@dataclass
class Cluster:
    """One server of a test's own; ``dsn`` names its ``postgres`` database."""

    bindir: Path
    base: str
    user: str | None
    port: int
    settings: str = SETTINGS
    running: bool = field(default=False)

    @property
    def data(self) -> str:
        return os.path.join(self.base, "data")

    @property
    def log(self) -> str:
        return os.path.join(self.base, "log")

    @property
    def dsn(self) -> str:
        return self.dsn_for("postgres")

    def dsn_for(self, dbname: str) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.bindir / args[0]), *args[1:]],
            check=True,
            capture_output=True,
            text=True,
            user=self.user,
        )

    def _opts(self) -> str:
        return f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 {self.settings}"

    def start(self) -> None:
        self.run(
            "pg_ctl",
            "-D",
            self.data,
            "-o",
            self._opts(),
            "-l",
            self.log,
            "-w",
            "-t",
            "120",
            "start",
        )
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        """A real shutdown (``fast``: sessions end with admin_shutdown; ``immediate``: a crash)."""
        self.run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop")
        self.running = False

    def kill(self) -> None:
        """The server dies as in a crash (no checkpoint): its next start runs crash recovery."""
        self.stop("immediate")

    def promote(self) -> None:
        """A standby becomes a primary (pg_ctl promote waits until it accepts writes)."""
        self.run("pg_ctl", "-D", self.data, "-w", "-t", "60", "promote")

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        with psycopg.connect(self.dsn_for(dbname), autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.Error:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def destroy(self) -> None:
        if self.running:
            with contextlib.suppress(subprocess.CalledProcessError):
                self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


def new_cluster(settings: str = SETTINGS) -> Cluster:
    """An initialized and started cluster of the test's own."""
    bindir = _bindir()
    base, user = service_dir("lgps-test-cluster-")
    cluster = Cluster(bindir, base, user, free_port(), settings)
    cluster.run(
        "initdb", "-D", cluster.data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
        "--locale=C.UTF-8", "--no-sync",
    )  # fmt: skip
    cluster.start()
    return cluster


@dataclass
class Pair:
    primary: Cluster
    standby: Cluster
    synchronous: bool

    def dsn_for(self, dbname: str, **extra: str) -> str:
        """A multi-host DSN naming the primary then the standby, asking for the one that writes."""
        params = {"target_session_attrs": "read-write", **extra}
        tail = " ".join(f"{k}={v}" for k, v in params.items())
        return (
            f"host=127.0.0.1,127.0.0.1 port={self.primary.port},{self.standby.port} "
            f"user=postgres dbname={dbname} {tail}"
        )

    def standby_dsn_for(self, dbname: str) -> str:
        return self.standby.dsn_for(dbname)

    def wait_caught_up(self, timeout: float = 30.0) -> None:
        """Until the standby has replayed everything the primary wrote so far."""
        with psycopg.connect(self.primary.dsn, autocommit=True) as p:
            lsn = p.execute("SELECT pg_current_wal_lsn()").fetchone()
        assert lsn is not None
        deadline = time.monotonic() + timeout
        with psycopg.connect(self.standby.dsn, autocommit=True) as s:
            while True:
                row = s.execute(
                    "SELECT pg_wal_lsn_diff(pg_last_wal_replay_lsn(), %s) >= 0", (lsn[0],)
                ).fetchone()
                if row == (True,):
                    return
                if time.monotonic() > deadline:
                    raise TimeoutError("the standby did not catch up")
                time.sleep(0.02)


def replicated_pair(*, synchronous: bool) -> Pair:
    """A primary and a streaming standby (hot standby: it serves reads). With ``synchronous``, a
    commit returns only once the standby has the WAL (``synchronous_commit=on``, remote flush)."""
    # on the primary's command line, not in postgresql.auto.conf: pg_basebackup would copy that to
    # the standby, and once promoted it would wait for a standby of its own at every commit
    sync = " -c synchronous_standby_names=standby1" if synchronous else ""
    primary = new_cluster(SETTINGS + sync)
    try:
        base, user = service_dir("lgps-test-standby-")
        standby = Cluster(primary.bindir, base, user, free_port(), SETTINGS)
        primary.run(
            "pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres",
            "-D", standby.data, "-X", "stream", "-R", "--no-sync",
            "-d", f"host=127.0.0.1 port={primary.port} user=postgres application_name=standby1",
        )  # fmt: skip
        standby.start()
    except BaseException:
        primary.destroy()
        raise
    pair = Pair(primary, standby, synchronous)
    pair.wait_caught_up()
    return pair


@contextlib.contextmanager
def own_cluster(settings: str = SETTINGS) -> Iterator[Cluster]:
    cluster = new_cluster(settings)
    try:
        yield cluster
    finally:
        cluster.destroy()


@contextlib.contextmanager
def own_pair(*, synchronous: bool) -> Iterator[Pair]:
    pair = replicated_pair(synchronous=synchronous)
    try:
        yield pair
    finally:
        pair.standby.destroy()
        pair.primary.destroy()
