"""Starts a PgBouncer in transaction mode in front of the test server (for tests/test_pgbouncer.py).

PgBouncer refuses to run as root, so as root it runs as the ``postgres`` OS user, like the test
cluster. Its binary comes from Debian's ``pgbouncer`` package (``.ci/run`` installs it).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pgserver import free_port, service_dir
from psycopg.conninfo import conninfo_to_dict, make_conninfo

CANDIDATES = ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer", "/usr/local/bin/pgbouncer")


def find_pgbouncer() -> str | None:
    found = shutil.which("pgbouncer")
    if found:
        return found
    return next((c for c in CANDIDATES if os.access(c, os.X_OK)), None)


@dataclass
class Bouncer:
    port: int
    version: str

    def dsn(self, server_dsn: str) -> str:
        """``server_dsn`` (a database of the test server) through this PgBouncer."""
        params = conninfo_to_dict(server_dsn)
        params.update(host="127.0.0.1", port=str(self.port))
        params.pop("password", None)
        return make_conninfo(**params)  # type: ignore[arg-type]


@contextlib.contextmanager
def pgbouncer(binary: str, server_dsn: str, *, server_pool_size: int = 2) -> Iterator[Bouncer]:
    """A transaction-mode PgBouncer that forwards every database to the server of ``server_dsn``,
    sharing at most ``server_pool_size`` server connections per database among its clients."""
    server = conninfo_to_dict(server_dsn)
    base, user = service_dir("lgps-test-pgbouncer-")
    port = free_port()
    target = " ".join(
        f"{key}={server[key]}" for key in ("host", "port", "user", "password") if server.get(key)
    )
    ini = Path(base, "pgbouncer.ini")
    Path(base, "userlist.txt").write_text('"postgres" ""\n')
    ini.write_text(
        "[databases]\n"
        f"* = {target}\n"
        "[pgbouncer]\n"
        "listen_addr = 127.0.0.1\n"
        f"listen_port = {port}\n"
        "unix_socket_dir =\n"
        "auth_type = trust\n"
        f"auth_file = {base}/userlist.txt\n"
        "pool_mode = transaction\n"
        f"default_pool_size = {server_pool_size}\n"
        "max_client_conn = 200\n"
        "ignore_startup_parameters = extra_float_digits\n"
        f"logfile = {base}/pgbouncer.log\n"
    )
    for path in Path(base).iterdir():
        if user is not None:
            shutil.chown(path, user)
    version = subprocess.run(
        [binary, "--version"], capture_output=True, text=True, check=False
    ).stdout.split("\n")[0]
    out = Path(base, "stderr.log")
    with out.open("wb") as sink:
        proc = subprocess.Popen([binary, str(ini)], user=user, stdout=sink, stderr=sink)
    try:
        deadline = time.monotonic() + 10
        while True:
            if proc.poll() is not None:
                log = Path(base, "pgbouncer.log")
                raise RuntimeError(
                    f"pgbouncer exited: {out.read_text()} {log.read_text() if log.exists() else ''}"
                )
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("pgbouncer did not start listening within 10 s")
            time.sleep(0.05)
        yield Bouncer(port, version)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(base, ignore_errors=True)
