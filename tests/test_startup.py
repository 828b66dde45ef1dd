"""Start-up honours ``timeout=`` and names the cause; healthcheck() answers within its own bound.

Faults are real: a port where nothing listens, a database that does not exist, a wrong role, a
wrong password, a server whose connection slots are all taken. The
bounds asserted are generous (a few times the timeout asked for) and far below psycopg_pool's
30 s default wait, which is what start-up used before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from clusters import SETTINGS, own_cluster
from pgserver import free_port
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from langgraph_pg_saver import (
    AsyncPostgresSaver,
    AsyncPostgresStore,
    ConnectionTimeoutError,
    InvalidInputError,
    PostgresSaver,
    PostgresStore,
)

TIMEOUT = 1.5
#: far below the 30 s start-up used to wait whatever timeout= said
BOUND = 12.0


def _closed_port_dsn() -> tuple[str, str]:
    port = free_port()  # nothing listens there
    return f"host=127.0.0.1 port={port} user=postgres dbname=nowhere", f"127.0.0.1:{port}/nowhere"


def _with(db_dsn: str, **parts: str) -> str:
    return make_conninfo(db_dsn, **parts)


def _target(dsn: str) -> str:
    d = conninfo_to_dict(dsn)
    return f"{d.get('host', '')}:{d.get('port', '')}/{d['dbname']}"


def _pool_threads() -> int:
    return sum(1 for t in threading.enumerate() if "pool" in t.name.lower())


def _settled(before: int) -> bool:
    for _ in range(50):
        if _pool_threads() <= before:
            return True
        time.sleep(0.1)
    return False


SYNC_OPENERS: list[tuple[str, Callable[..., Any]]] = [
    ("saver", PostgresSaver.from_conn_string),
    ("store", PostgresStore.from_conn_string),
]


@pytest.mark.parametrize(("what", "make"), SYNC_OPENERS)
def test_start_up_on_a_closed_port_raises_within_timeout_naming_the_server(
    what: str, make: Callable[..., Any]
) -> None:
    dsn, target = _closed_port_dsn()
    before = _pool_threads()
    started = time.monotonic()
    with pytest.raises(ConnectionTimeoutError) as info, make(dsn, timeout=TIMEOUT):
        pytest.fail(f"the {what} opened on a closed port")
    assert time.monotonic() - started < BOUND
    message = str(info.value)
    assert target in message, message
    assert "refused" in message.lower(), message
    # nothing keeps trying in the background after the failed start
    assert _settled(before), [t.name for t in threading.enumerate()]


def test_start_up_names_an_unknown_database_and_a_wrong_role(db_dsn: str) -> None:
    for parts, words in (
        ({"dbname": "lgps_no_such_db"}, "does not exist"),
        ({"user": "lgps_no_such_role"}, "lgps_no_such_role"),
    ):
        dsn = _with(db_dsn, **parts)
        started = time.monotonic()
        with (
            pytest.raises(ConnectionTimeoutError) as info,
            PostgresSaver.from_conn_string(dsn, timeout=TIMEOUT),
        ):
            pytest.fail("opened")
        assert time.monotonic() - started < BOUND
        message = str(info.value)
        assert _target(dsn) in message, message
        assert words in message, message


def test_explicit_open_takes_its_own_timeout_and_a_second_open_says_what_to_do() -> None:
    dsn, target = _closed_port_dsn()
    saver = PostgresSaver.from_conn_string(dsn)  # the default 30 s wait of calls
    started = time.monotonic()
    with pytest.raises(ConnectionTimeoutError) as info:
        saver.open(timeout=TIMEOUT)
    assert time.monotonic() - started < BOUND
    assert target in str(info.value)
    with pytest.raises(Exception, match="create a new saver"):
        saver.open(timeout=TIMEOUT)


async def test_async_start_up_raises_within_timeout_naming_the_server() -> None:
    for make in (AsyncPostgresSaver.from_conn_string, AsyncPostgresStore.from_conn_string):
        dsn, target = _closed_port_dsn()
        started = time.monotonic()
        with pytest.raises(ConnectionTimeoutError) as info:
            async with make(dsn, timeout=TIMEOUT):
                pytest.fail("opened on a closed port")
        assert time.monotonic() - started < BOUND
        assert target in str(info.value)
        assert "refused" in str(info.value).lower()


def test_start_up_on_a_live_server_still_opens(db_dsn: str) -> None:
    with PostgresSaver.from_conn_string(db_dsn, timeout=TIMEOUT) as saver:
        saver.setup()
        assert saver.healthcheck()["ok"] is True


def test_healthcheck_answers_within_its_bound_while_the_server_is_down() -> None:
    dsn, target = _closed_port_dsn()
    saver = PostgresSaver.from_conn_string(dsn)  # calls would wait 30 s for a connection
    saver.open(wait=False)
    try:
        started = time.monotonic()
        report = saver.healthcheck(timeout=0.5)
        assert time.monotonic() - started < BOUND / 2
        assert report["ok"] is False
        assert report["reachable"] is False
        assert "ConnectionTimeoutError" in report["error"]
        assert target in report["error"]
        started = time.monotonic()
        assert saver.healthcheck()["ok"] is False  # the default bound: 2 s
        assert time.monotonic() - started < BOUND
        with pytest.raises(InvalidInputError, match="timeout must be a positive number"):
            saver.healthcheck(timeout=0)
    finally:
        saver.close()


async def test_async_healthcheck_answers_within_its_bound_while_the_server_is_down() -> None:
    dsn, _ = _closed_port_dsn()
    saver = AsyncPostgresSaver.from_conn_string(dsn)
    await saver.open(wait=False)
    try:
        started = time.monotonic()
        report = await saver.ahealthcheck(timeout=0.5)
        assert time.monotonic() - started < BOUND / 2
        assert report["reachable"] is False
    finally:
        await saver.close()


def test_healthcheck_on_a_live_server_within_a_short_bound(db_dsn: str) -> None:
    with psycopg.connect(db_dsn, autocommit=True) as conn:
        report = PostgresSaver(conn).healthcheck(timeout=0.5)
    assert report["reachable"] is True
    assert report["schema_current"] is True


def test_start_up_names_a_wrong_password_and_full_slots() -> None:
    """On a cluster of the test's own: a role that must give a password (scram), and a server
    whose connection slots are all taken; both raise within the timeout, naming the cause."""
    settings = SETTINGS.replace("max_connections=100", "max_connections=6")
    with own_cluster(settings + " -c superuser_reserved_connections=0") as cluster:
        cluster.execute("CREATE ROLE lgps_pw LOGIN PASSWORD 'right-one'")
        hba = Path(cluster.data) / "pg_hba.conf"
        hba.write_text("host all lgps_pw 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
        cluster.execute("SELECT pg_reload_conf()")
        wrong = (
            f"host=127.0.0.1 port={cluster.port} user=lgps_pw password=wrong-one dbname=postgres"
        )
        started = time.monotonic()
        with (
            pytest.raises(ConnectionTimeoutError) as info,
            PostgresSaver.from_conn_string(wrong, timeout=TIMEOUT),
        ):
            pytest.fail("opened with a wrong password")
        assert time.monotonic() - started < BOUND
        message = str(info.value)
        assert f"127.0.0.1:{cluster.port}/postgres" in message, message
        assert "password authentication failed" in message, message
        assert "wrong-one" not in message, message

        held = []
        try:
            while True:  # take every slot
                try:
                    held.append(psycopg.connect(cluster.dsn, connect_timeout=5))
                except psycopg.OperationalError:
                    break
            assert held, "the cluster took no connection at all"
            for opener in (PostgresSaver.from_conn_string, PostgresStore.from_conn_string):
                started = time.monotonic()
                with (
                    pytest.raises(ConnectionTimeoutError) as info,
                    opener(cluster.dsn, timeout=TIMEOUT),
                ):
                    pytest.fail("opened on a server with no free slot")
                assert time.monotonic() - started < BOUND
                assert "too many clients" in str(info.value), str(info.value)
        finally:
            for conn in held:
                conn.close()
        # and once slots are free again, a new saver opens
        with PostgresSaver.from_conn_string(cluster.dsn, timeout=TIMEOUT) as saver:
            assert saver.healthcheck()["reachable"] is True
