"""The pools' reconnection schedule (db/pool.py ``Reconnect``): about a second between attempts,
never psycopg_pool's doubling, and psycopg_pool's give-up after ``reconnect_timeout``."""

from __future__ import annotations

import time
from typing import Any

from psycopg_pool import base

from langgraph_pg_saver.db.pool import RECONNECT_MAX_DELAY, Reconnect


def _delays(attempt: Any, failures: int, every: float = 0.0) -> list[float]:
    now, out = 1000.0, []
    for _ in range(failures):
        attempt.update_delay(now)
        out.append(attempt.delay)
        now += attempt.delay + every
    return out


def test_attempts_come_about_a_second_apart_after_two_quick_ones() -> None:
    delays = _delays(Reconnect(timeout=300.0), 40)
    assert 0.1875 <= delays[0] <= 0.25
    assert 0.375 <= delays[1] <= 0.5
    assert all(0.75 * RECONNECT_MAX_DELAY <= d <= RECONNECT_MAX_DELAY for d in delays[2:])
    assert len(set(delays[2:])) > 1  # jittered: pools that failed together part ways
    # psycopg_pool's own: 1 s, doubling (past a call's 30 s timeout after a 20 s outage)
    if hasattr(base, "AttemptWithBackoff"):
        theirs_attempt = base.AttemptWithBackoff(timeout=300.0)
    else:  # psycopg_pool before 3.3
        theirs_attempt = base.ConnectionAttempt(reconnect_timeout=300.0)
    theirs = _delays(theirs_attempt, 6)
    assert theirs[4] > 14.0


def test_gives_up_after_reconnect_timeout_as_psycopg_pool_does() -> None:
    attempt = Reconnect(timeout=5.0)
    now = 1000.0
    attempt.update_delay(now)  # the first failure starts the clock
    assert attempt.give_up_at == now + 5.0
    while not attempt.time_to_give_up(now):
        now += attempt.delay
        assert now <= 1005.0 + 1e-9  # the last wait is cut to the give-up time
        attempt.update_delay(now)
    assert attempt.time_to_give_up(1005.0)


def test_one_probe_per_pool_and_the_others_run_at_once_when_it_connects() -> None:
    from langgraph_pg_saver.db.pool import RECONNECT_OTHERS_MAX_DELAY, Reconnecting

    pool = Reconnecting()
    now = time.monotonic()  # done() reads the clock to tell a give-up
    a, b, c = (pool.start(None, False, 300.0) for _ in range(3))
    assert None not in (a, b, c)
    assert a is not None
    assert b is not None
    assert c is not None
    assert (a.probe, b.probe, c.probe) == (True, False, False)
    for attempt in (a, b, c):  # each fails once, as psycopg_pool's _add_connection records it
        attempt.update_delay(now)
        assert pool.done(attempt, 0) == []
    assert a.delay <= 0.25
    assert 0.75 <= b.delay <= 1.0
    for _ in range(8):
        b.update_delay(now)
    assert b.delay <= RECONNECT_OTHERS_MAX_DELAY
    # c is trying right now when a (the probe, on its second run) connects
    assert pool.start(c, False, 300.0) is c
    assert pool.start(a, False, 300.0) is a
    copies = pool.done(a, 1)
    assert len(copies) == 1  # b's copy; c is running and goes on by itself
    assert (copies[0].failures, copies[0].give_up_at) == (b.failures, b.give_up_at)
    assert pool.start(b, False, 300.0) is None  # b's scheduled run does nothing
    assert pool.start(copies[0], False, 300.0) is copies[0]
    assert copies[0].probe  # the probe connected: the next one to run takes its place


def test_an_attempt_rerun_before_its_last_run_ended_is_not_taken_for_waiting() -> None:
    """A retry scheduled with (almost) no delay (the last one, cut to the give-up time) can start
    on another worker before the run that scheduled it has ended: it is still running, so a
    connect of another attempt must not run a copy of it beside it (two connections for one of
    the pool's count)."""
    from langgraph_pg_saver.db.pool import Reconnecting

    pool = Reconnecting()
    now = time.monotonic()
    a, b = pool.start(None, False, 300.0), pool.start(None, False, 300.0)
    assert a is not None
    assert b is not None
    b.update_delay(now)  # b failed once and waits
    assert pool.done(b, 0) == []
    a.update_delay(now)  # a's run fails and reschedules itself at once...
    assert pool.start(a, False, 300.0) is a  # ...and its rerun starts on another worker
    assert pool.done(a, 0) == []  # before the first run's end is recorded
    assert pool.start(b, False, 300.0) is b
    copies = pool.done(b, 1)  # b connects: a is still trying, so no copy of it
    assert copies == []
    assert pool.start(a, False, 300.0) is a  # nor is a's own run skipped


def test_the_others_keep_their_pace_through_any_number_of_failures() -> None:
    """A pool's other attempts under a long ``reconnect_timeout`` (one that never gives up):
    their doubling stops at the cap, and never overflows (2.0 ** 1024 does)."""
    from langgraph_pg_saver.db.pool import RECONNECT_OTHERS_MAX_DELAY

    attempt = Reconnect(timeout=float("inf"))
    attempt.probe = False
    attempt.failures = 2000
    attempt.give_up_at = float("inf")
    attempt.update_delay(1000.0)
    assert 0.75 * RECONNECT_OTHERS_MAX_DELAY <= attempt.delay <= RECONNECT_OTHERS_MAX_DELAY
