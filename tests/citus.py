"""A Citus cluster for the tests that run on one: found or started once per session, a fresh
distributed database per test.

Where the coordinator comes from, first match wins:

1. ``LANGGRAPH_PG_SAVER_TEST_CITUS_DSN``: an existing coordinator (a superuser's DSN to any of its
   databases); its workers must accept the same user.
2. The local cluster of the workplace's Citus scripts (``../shared/citus/cluster.sh``, beside the
   repository, or ``LANGGRAPH_PG_SAVER_CITUS_SCRIPTS``), started on ``CITUS_PORT`` (29400 and the
   two ports after it, below the ports the kernel hands out to outgoing connections, so that none
   holds one of them; ``LANGGRAPH_PG_SAVER_CITUS_PORT`` moves it) when Citus is installed in the
   machine's Postgres 15 (``bash ../shared/citus/build.sh``); stopped again after the session if
   the tests started it.
3. Where a Docker engine answers: the ``citusdata/citus`` image (``LANGGRAPH_PG_SAVER_CITUS_IMAGE``)
   through testcontainers, a coordinator and two workers on a network of their own, each port
   published to the host (the tests reach every node; the nodes know each other by name).

Each test gets a database made on every node (``citus.enable_create_database_propagation``), the
citus extension created in it on each node and the workers added: what a user's new database on
a cluster looks like before ``setup()``.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

ENV_DSN = "LANGGRAPH_PG_SAVER_TEST_CITUS_DSN"
ENV_SCRIPTS = "LANGGRAPH_PG_SAVER_CITUS_SCRIPTS"
ENV_IMAGE = "LANGGRAPH_PG_SAVER_CITUS_IMAGE"
CITUS_IMAGE = "citusdata/citus:13.2"
CITUS_PORT = int(os.environ.get("LANGGRAPH_PG_SAVER_CITUS_PORT", "29400"))
_REPO = Path(__file__).resolve().parent.parent


@dataclass
class Cluster:
    #: the coordinator's DSN (its ``postgres`` database, or the one given)
    dsn: str
    source: str
    stop: Callable[[], None] | None = None
    #: the data directories of the workers this session started (the scripts' cluster), by
    #: port: a test may stop one and start it again; empty for a cluster given by DSN
    workers: dict[int, Path] = field(default_factory=dict)
    #: where the tests reach a node the cluster names (host, port) otherwise (containers: the
    #: nodes' names on their network, published on the host's ports)
    addresses: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    #: the coordinator as the workers reach it (None: the DSN's host and port)
    coordinator: tuple[str, int] | None = None

    def reach(self, host: str, port: int) -> tuple[str, int]:
        return self.addresses.get((host, port), (host, port))

    def stop_worker(self, port: int) -> None:
        """Stop a worker this session started (immediate: as a crash or a pulled cable)."""
        _pg_ctl(self.workers[port], "-m", "immediate", "stop")

    def start_worker(self, port: int) -> None:
        _pg_ctl(
            self.workers[port], "-l", str(self.workers[port].parent / "server.log"), "-w", "start"
        )

    def node_dsns(self, dbname: str) -> list[str]:
        """Every node's DSN for ``dbname``: the coordinator first, then the workers."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            nodes = conn.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' "
                "AND isactive ORDER BY groupid = 0 DESC, nodeport"
            ).fetchall()
        coordinator = make_conninfo(self.dsn, dbname=dbname)
        params = conninfo_to_dict(self.dsn)
        own = self.coordinator or (str(params.get("host")), int(params.get("port") or 5432))
        out = [coordinator]
        for host, port in nodes:
            if int(port) == own[1] and host in (own[0], "127.0.0.1"):
                continue
            at, at_port = self.reach(host, int(port))
            out.append(make_conninfo(self.dsn, dbname=dbname, host=at, port=str(at_port)))
        return out

    def worker_names(self) -> list[tuple[str, int]]:
        """The workers as the coordinator names them (its postgres database's pg_dist_node)."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT nodename, nodeport FROM pg_dist_node WHERE noderole = 'primary' "
                "AND isactive AND groupid <> 0 ORDER BY nodeport, nodename"
            ).fetchall()
        return [(str(h), int(p)) for h, p in rows]

    def create_db(self) -> str:
        """A new database on every node with citus in it and the workers added; its DSN."""
        name = f"lgps_c_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SET citus.enable_create_database_propagation = on")
            conn.execute(f'CREATE DATABASE "{name}"')
        dsns = self.node_dsns(name)
        for dsn in dsns:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("SET client_min_messages = warning")
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
        params = conninfo_to_dict(dsns[0])
        own = self.coordinator or (
            str(params.get("host") or "127.0.0.1"),
            int(params.get("port") or 5432),
        )
        with psycopg.connect(dsns[0], autocommit=True) as conn:
            conn.execute("SELECT citus_set_coordinator_host(%s, %s::int)", own)
            for host, port in self.worker_names():
                conn.execute("SELECT citus_add_node(%s, %s::int)", (host, port))
        return dsns[0]

    def seal(self, dsn: str) -> str:
        """Make the database of ``dsn`` a template on every node (copy_db): no connection may
        open (Citus's maintenance daemon included) and those open are ended. Its name."""
        name = str(conninfo_to_dict(dsn)["dbname"])
        with psycopg.connect(dsn, autocommit=True) as conn:
            # no prepared transaction left to recover: a sealed database's would stay forever
            conn.execute("SELECT recover_prepared_transactions()")
        for node in self.node_dsns("postgres"):
            with psycopg.connect(node, autocommit=True) as conn:
                # (ALTER DATABASE is refused on a worker: the catalog, as a superuser may)
                conn.execute(
                    "UPDATE pg_database SET datallowconn = false WHERE datname = %s", (name,)
                )
                conn.execute(_END_SESSIONS, (name,))
        return name

    def copy_db(self, template: str) -> str:
        """A new database copied from ``template`` (sealed) on every node: the same tables,
        shards and Citus metadata under a new name, in about a sixth of create_db and setup()'s
        time. Its DSN; drop it with drop_copy."""
        name = f"lgps_c_{uuid.uuid4().hex[:12]}"
        done: list[str] = []
        try:
            for node in self.node_dsns("postgres"):
                # (a daemon that had not seen the seal yet may still be in the template)
                _on_node(node, f'CREATE DATABASE "{name}" TEMPLATE "{template}"', template)
                done.append(node)
        except BaseException:
            self._drop_on(done, name)
            raise
        return self.node_dsns(name)[0]

    def drop_copy(self, dsn: str) -> None:
        """Drop a database copy_db made, on every node (a local database on each: Citus does
        not propagate its drop)."""
        name = str(conninfo_to_dict(dsn)["dbname"])
        self._drop_on(self.node_dsns("postgres"), name)

    @staticmethod
    def _drop_on(nodes: list[str], name: str) -> None:
        """Drop ``name`` on each node, each tried (a worker a test left stopped fails alone);
        the first failure raised after."""
        failed: list[BaseException] = []
        for node in reversed(nodes):
            try:
                # (Citus's maintenance daemon, which FORCE does not end, is ended by _on_node)
                _on_node(node, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', name)
            except (psycopg.Error, RuntimeError) as exc:
                failed.append(exc)
        if failed:
            raise failed[0]

    def drop_db(self, dsn: str) -> None:
        name = conninfo_to_dict(dsn)["dbname"]
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SET citus.enable_create_database_propagation = on")
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextlib.contextmanager
def extra_worker(dbname: str) -> Iterator[tuple[str, int]]:
    """A new, empty Postgres with citus (a worker to add: the rebalance test), on a free port,
    with ``dbname`` and the citus extension in it; stopped and removed afterwards. Its
    host and port."""
    import shutil
    import socket
    import tempfile

    pgbin = next(Path("/usr/lib/postgresql").glob("*/bin/initdb")).parent
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    base = tempfile.mkdtemp(prefix="lgps-citus-worker-")
    data = f"{base}/data"
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_pg:
        shutil.chown(base, "postgres")
    subprocess.run(
        [*as_pg, str(pgbin / "initdb"), "-D", data, "-U", "postgres", "--auth=trust"],
        check=True,
        capture_output=True,
    )
    with open(f"{data}/postgresql.conf", "a") as conf:
        conf.write(
            f"listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = "
            f"'{base}'\nshared_preload_libraries = 'citus'\nwal_level = logical\n"
            "max_connections = 100\n"
        )
    subprocess.run(
        [*as_pg, str(pgbin / "pg_ctl"), "-D", data, "-l", f"{base}/log", "-w", "start"],
        check=True,
        capture_output=True,
    )
    try:
        dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        with psycopg.connect(make_conninfo(dsn, dbname=dbname), autocommit=True) as conn:
            conn.execute("SET client_min_messages = warning")
            conn.execute("CREATE EXTENSION citus")
        yield "127.0.0.1", port
    finally:
        subprocess.run(
            [*as_pg, str(pgbin / "pg_ctl"), "-D", data, "-m", "immediate", "stop"],
            check=False,
            capture_output=True,
        )
        shutil.rmtree(base, ignore_errors=True)


def _scripts() -> Path | None:
    given = os.environ.get(ENV_SCRIPTS)
    for folder in ([Path(given)] if given else []) + [_REPO.parent / "shared" / "citus"]:
        if (folder / "cluster.sh").is_file():
            return folder
    return None


def _citus_installed() -> bool:
    return any(Path("/usr/lib/postgresql").glob("*/lib/citus.so"))


def find_cluster() -> Cluster | None:
    """The coordinator to test on, or None (nothing given, no scripts or Citus not built, no
    Docker engine)."""
    given = os.environ.get(ENV_DSN)
    if given:
        return Cluster(given, f"{ENV_DSN}")
    scripts = _scripts()
    if scripts is None or not _citus_installed():
        return from_testcontainers()
    script = str(scripts / "cluster.sh")
    for attempt in range(3):  # a port of the three may be held a moment (a closing socket)
        done = subprocess.run(
            ["bash", script, "start", str(CITUS_PORT)], capture_output=True, text=True, timeout=300
        )
        if done.returncode == 0:
            break
        time.sleep(5 * (attempt + 1))
    if done.returncode != 0:
        raise RuntimeError(f"{script} start {CITUS_PORT} failed: {done.stderr.strip()[-2000:]}")
    dsn = done.stdout.strip().splitlines()[-1]

    def stop() -> None:
        with contextlib.suppress(Exception):
            subprocess.run(["bash", script, "stop", str(CITUS_PORT)], timeout=120, check=False)

    root = Path(os.environ.get("CITUS_DIR", "/tmp/citus-cluster"))
    workers = {p: root / str(p) / "data" for p in (CITUS_PORT + 1, CITUS_PORT + 2)}
    return Cluster(dsn, f"{script} on port {CITUS_PORT}", stop, workers)


def _pg_ctl(data: Path, *args: str) -> None:
    pgbin = next(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")).parent
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    subprocess.run(
        [*as_pg, str(pgbin / "pg_ctl"), "-D", str(data), *args], check=True, capture_output=True
    )


_END_SESSIONS = (
    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
    "WHERE datname = %s AND pid <> pg_backend_pid()"
)


def _on_node(node: str, statement: str, busy: str) -> None:
    """``statement`` (a CREATE or DROP DATABASE) on one node alone, not propagated; while
    database ``busy`` is in use, its sessions ended and the statement tried again."""
    with psycopg.connect(node, autocommit=True) as conn:
        conn.execute("SET citus.enable_create_database_propagation = off")
        for _ in range(100):
            try:
                conn.execute(statement.encode())
                return
            except psycopg.errors.ObjectInUse:
                conn.execute(_END_SESSIONS, (busy,))
                time.sleep(0.05)
    raise RuntimeError(f"database {busy} stays in use on {node}")


@contextlib.contextmanager
def copied_database(cluster: Cluster, template: str) -> Iterator[str]:
    dsn = cluster.copy_db(template)
    try:
        yield dsn
    finally:
        cluster.drop_copy(dsn)


@contextlib.contextmanager
def database(cluster: Cluster) -> Iterator[str]:
    dsn = cluster.create_db()
    try:
        yield dsn
    finally:
        cluster.drop_db(dsn)


#: the tables a saver's rows live in (copy_rows)
ROW_TABLES = ("pgsaver_checkpoints", "pgsaver_blobs", "pgsaver_writes")


def copy_rows(source: str, target: str) -> None:
    """The source database's rows of the checkpoint tables, as they are, into the target's (on
    one server or a cluster: a distributed table takes COPY)."""
    with psycopg.connect(source) as src, psycopg.connect(target) as dst:
        for table in ROW_TABLES:
            with (
                src.cursor().copy(f"COPY {table} TO STDOUT (FORMAT binary)") as out,
                dst.cursor().copy(f"COPY {table} FROM STDIN (FORMAT binary)") as into,
            ):
                for data in out:
                    into.write(data)


def from_testcontainers() -> Cluster | None:
    """A coordinator and two workers of the ``citusdata/citus`` image where a Docker engine
    answers (the probe of tests/pgserver.py), or None."""
    from pgserver import docker_engine_answers

    if not docker_engine_answers():
        return None
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.network import Network

    image = os.environ.get(ENV_IMAGE, CITUS_IMAGE)
    network = Network().create()
    names = ("coordinator", "worker1", "worker2")
    containers: list[Any] = []

    def stop() -> None:
        for container in containers:
            with contextlib.suppress(Exception):
                container.stop()
        with contextlib.suppress(Exception):
            network.remove()

    try:
        for name in names:
            container = (
                DockerContainer(image)
                .with_env("POSTGRES_HOST_AUTH_METHOD", "trust")
                .with_network(network)
                .with_network_aliases(name)
                .with_exposed_ports(5432)
                .with_command("postgres -c wal_level=logical -c max_connections=300")
            )
            container.start()
            containers.append(container)
        addresses = {
            (name, 5432): (c.get_container_host_ip(), int(c.get_exposed_port(5432)))
            for name, c in zip(names, containers, strict=True)
        }
        dsns = {
            name: f"postgresql://postgres@{host}:{port}/postgres"
            for (name, _), (host, port) in addresses.items()
        }
        for dsn in dsns.values():
            _wait_accepting(dsn)
        with psycopg.connect(dsns["coordinator"], autocommit=True) as conn:
            conn.execute("SET client_min_messages = warning")
            conn.execute("CREATE EXTENSION IF NOT EXISTS citus")
            conn.execute("SELECT citus_set_coordinator_host('coordinator', 5432)")
            for name in names[1:]:
                conn.execute("SELECT citus_add_node(%s, 5432)", (name,))
    except BaseException:
        stop()
        raise
    return Cluster(
        dsns["coordinator"],
        f"testcontainers {image}",
        stop,
        addresses=addresses,
        coordinator=("coordinator", 5432),
    )


def _wait_accepting(dsn: str, timeout: float = 120.0) -> None:
    """Until a new container's server accepts connections (its init restarts it once)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(dsn, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
