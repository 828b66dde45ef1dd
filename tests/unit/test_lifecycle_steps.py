"""The lifecycle step generators of ``_lifecycle``, driven by a fake driver (no database).

Each test drives a generator the way the savers do (``next``, then ``send(rows)``), records every
:class:`Step` it yields, answers each step from a script keyed by the name of the step's last query,
and asserts on the exact steps and on the returned Report (or the error).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_pg_saver.checkpoint import history as _history
from langgraph_pg_saver.checkpoint import lifecycle as _lifecycle
from langgraph_pg_saver.checkpoint.lifecycle import (
    DEFAULT_BATCH,
    DEFAULT_LOCK_TIMEOUT,
    DEFAULT_THREAD_BATCH,
)
from langgraph_pg_saver.db import steps as _steps
from langgraph_pg_saver.db.sql import queries_for
from langgraph_pg_saver.db.steps import Report, Rows, Step, Stmt
from langgraph_pg_saver.errors import (
    DeltaDependencyError,
    EntangledRunError,
    InvalidInputError,
    ThreadNotEmptyError,
)

Q = queries_for("public")
SERDE = JsonPlusSerializer()
WEEK = timedelta(days=7)


def _rendered_names() -> dict[bytes, str]:
    """Every fully rendered query of the schema, by its text."""
    out: dict[bytes, str] = {}
    for name in Q.names():
        try:
            out[Q[name]] = name
        except KeyError:  # a template with a {where}: see query_name
            continue
    return out


_BY_TEXT = _rendered_names()


def delta_history_text(predicates: tuple[str, ...]) -> bytes:
    """``delta_history`` with its ``{where}`` made of ``predicates``."""
    return Q.render("delta_history", where=predicates)


def query_name(stmt: Stmt) -> str:
    """The name of ``stmt``'s query: the ``queries_for("public")[name]`` it is."""
    name = _BY_TEXT.get(stmt.query)
    if name is not None:
        assert Q[name] == stmt.query
        return name
    for predicates in (("thread", "ns"), ("thread", "ns", "id")):
        if stmt.query == delta_history_text(predicates):
            return "delta_history[" + ",".join(predicates) + "]"
    raise AssertionError(f"a statement that is no query of the schema: {stmt.query[:80]!r}")


def step_names(step: Step) -> tuple[str, ...]:
    return tuple(query_name(s) for s in step.statements)


Script = Callable[[Step, str], Rows] | Mapping[str, list[Rows]]


class FakeDriver:
    """Drives a step generator as ``_drive`` does; records a deep copy of every step it was given.

    ``script`` answers a step: a function ``(step, name of its last query) -> rows``, or a mapping from
    that name to a queue of answers (one popped per step). A step the script has no answer for fails
    the test.
    """

    def __init__(self, script: Script | None = None) -> None:
        self.steps: list[Step] = []
        #: the threads whose status rows a step set again (refresh_status steps, answered here
        #: and kept out of ``steps``)
        self.refreshed: list[str] = []
        #: the threads whose unnamed parts a step deleted (gc_elements, alone or before each
        #: refresh_status; answered here and kept out of ``steps``)
        self.collected: list[str] = []
        if script is None:
            script = {}
        self._fn: Callable[[Step, str], Rows] | None = None
        self._queues: dict[str, list[Rows]] = {}
        if callable(script):
            self._fn = script
        else:
            self._queues = {k: list(v) for k, v in script.items()}

    def _answer(self, step: Step) -> Rows:
        last = query_name(step.statements[-1])
        if self._fn is not None:
            return self._fn(step, last)
        queue = self._queues.get(last)
        if not queue:
            raise AssertionError(f"unexpected step {step_names(step)}")
        return queue.pop(0)

    def run(self, steps: _steps.Steps) -> Any:
        try:
            step = next(steps)
            while True:
                if step.statements and self._upkeep(step):
                    step = steps.send(self._upkeep_rows(step))
                    continue
                # a copy: a generator that later mutated the params it yielded would show here
                self.steps.append(copy.deepcopy(step))
                rows = self._answer(step)
                # what runs next in the same transaction, as the driver runs it
                part = step.then(rows) if step.then is not None else None
                while part is not None:
                    if self._upkeep(part):
                        rows = self._upkeep_rows(part)
                        part = part.then(rows) if part.then is not None else None
                        continue
                    self.steps.append(copy.deepcopy(part))
                    rows = self._answer(part)
                    part = part.then(rows) if part.then is not None else None
                step = steps.send(rows)
        except StopIteration as done:
            return done.value

    @staticmethod
    def _upkeep(step: Step) -> bool:
        return all(query_name(s) in ("refresh_status", "gc_elements") for s in step.statements)

    def _upkeep_rows(self, step: Step) -> Rows:
        """Records the threads of an upkeep step (status refreshes, parts collected); its last
        statement's rows."""
        for s in step.statements:
            thread = str((s.params or {})["thread_id"])
            if query_name(s) == "refresh_status":
                self.refreshed.append(thread)
            else:
                self.collected.append(thread)
        return [("idle",)] if query_name(step.statements[-1]) == "refresh_status" else [(0,)]

    def names(self) -> list[tuple[str, ...]]:
        return [step_names(s) for s in self.steps]

    def assert_consumed(self) -> None:
        left = {k: v for k, v in self._queues.items() if v}
        assert left == {}, f"scripted answers never asked for: {left}"


def locked(
    ids: list[str], *statements: Stmt, lock_timeout: float | None = DEFAULT_LOCK_TIMEOUT
) -> Step:
    return Step((Stmt(Q["lock_threads"], {"thread_ids": ids}), *statements), lock_timeout)


def single(name: str, params: dict[str, Any]) -> Step:
    return Step((Stmt(Q[name], params),))


def cfg(**configurable: object) -> dict[str, Any]:
    return {"configurable": configurable}


# --------------------------------------------------------------------------- the fake driver itself


def test_query_name_tells_queries_apart_and_rejects_foreign_text() -> None:
    assert query_name(Stmt(Q["lock_threads"])) == "lock_threads"
    assert query_name(Stmt(Q["delete_threads"])) == "delete_threads"
    with pytest.raises(AssertionError, match="no query of the schema"):
        query_name(Stmt(b"SELECT 1"))
    # another schema's text is another statement
    with pytest.raises(AssertionError, match="no query of the schema"):
        query_name(Stmt(queries_for("other")["delete_threads"]))


def test_fake_driver_fails_on_an_unscripted_step() -> None:
    with pytest.raises(AssertionError, match="unexpected step"):
        FakeDriver().run(_lifecycle.prune(Q, ["a"], "delete"))


# --------------------------------------------------------------------------- Step and helpers


def test_step_transactional() -> None:
    one = Stmt(Q["threads_size"], {})
    assert Step((one,)).transactional is False
    assert Step((one,), 1.0).transactional is True
    assert Step((one, one)).transactional is True
    assert Stmt(b"x").prepare is False  # lifecycle statements are never prepared by default


def test_lock_timeout_param_is_whole_milliseconds_at_least_one() -> None:
    assert _steps.lock_timeout_param(5.0) == "5000ms"
    assert _steps.lock_timeout_param(0.25) == "250ms"
    assert _steps.lock_timeout_param(0.0001) == "1ms"
    assert _steps.lock_timeout_param(0) == "1ms"


def test_report_add_sums_counts_only() -> None:
    total = Report(threads=1, checkpoints=2, dry_run=True, last_thread_id="a")
    total.add(
        Report(threads=2, checkpoints=3, writes=4, blobs=5, bytes=6, batches=7, last_thread_id="z")
    )
    assert total == Report(
        threads=3,
        checkpoints=5,
        writes=4,
        blobs=5,
        bytes=6,
        batches=7,
        dry_run=True,
        last_thread_id="a",
    )
    assert total.as_dict()["checkpoints"] == 5


def test_thread_ids_param_sorts_and_dedups() -> None:
    assert _lifecycle.thread_ids_param(["b", "a", "b", 3]) == ["3", "a", "b"]  # type: ignore[list-item]
    assert _lifecycle.thread_ids_param(("x",)) == ["x"]
    assert _lifecycle.thread_ids_param([]) == []


# --------------------------------------------------------------------------- input checks


def _gen_prune(*a: Any, **k: Any) -> Callable[[], _steps.Steps]:
    return lambda: _lifecycle.prune(Q, *a, **k)


def _gen_retention(**k: Any) -> Callable[[], _steps.Steps]:
    return lambda: _lifecycle.retention(Q, **k)


BAD_INPUTS: list[Any] = [
    pytest.param(_gen_prune("t1", "delete"), "single string", id="prune-lone-string"),
    pytest.param(_gen_prune(b"t1", "delete"), "single string", id="prune-lone-bytes"),
    pytest.param(_gen_prune(5, "delete"), "not int", id="prune-not-a-list"),
    pytest.param(_gen_prune(["a", None], "delete"), "None", id="prune-none-in-list"),
    pytest.param(_gen_prune(["a\x00"], "delete"), "NUL", id="prune-nul-in-id"),
    pytest.param(_gen_prune(["a"], "keep_all"), "unknown prune strategy", id="prune-bad-strategy"),
    pytest.param(
        _gen_prune([], "keep_all"), "unknown prune strategy", id="prune-bad-strategy-empty"
    ),
    pytest.param(_gen_prune(["a"], None), "unknown prune strategy", id="prune-strategy-none"),
    pytest.param(_gen_prune(["a"], "keep_latest", batch=0), "batch size", id="prune-batch-0"),
    pytest.param(_gen_prune(["a"], "keep_latest", batch=True), "batch size", id="prune-batch-true"),
    pytest.param(_gen_prune(["a"], "keep_latest", batch="3"), "batch size", id="prune-batch-str"),
    pytest.param(_gen_prune([], "keep_latest", batch=0), "batch size", id="prune-batch-0-empty"),
    pytest.param(lambda: _lifecycle._keep_last(Q, ["a"], 0), "keep_last", id="keep-last-0"),
    pytest.param(lambda: _lifecycle._keep_last(Q, ["a"], True), "keep_last", id="keep-last-true"),
    pytest.param(lambda: _lifecycle._keep_last(Q, ["a"], "3"), "keep_last", id="keep-last-str"),
    pytest.param(lambda: _lifecycle._keep_last(Q, [], 0), "keep_last", id="keep-last-0-empty"),
    pytest.param(_gen_retention(), "needs keep_last", id="retention-neither"),
    pytest.param(_gen_retention(keep_last=0), "keep_last", id="retention-keep-last-0"),
    pytest.param(_gen_retention(keep_last=True), "keep_last", id="retention-keep-last-true"),
    pytest.param(_gen_retention(keep_last="3"), "keep_last", id="retention-keep-last-str"),
    pytest.param(_gen_retention(idle_for=timedelta(seconds=-1)), "idle_for", id="idle-negative"),
    pytest.param(_gen_retention(idle_for=timedelta(0)), "idle_for", id="idle-zero"),
    pytest.param(_gen_retention(idle_for=3600), "idle_for", id="idle-int"),
    pytest.param(_gen_retention(keep_last=1, idle_for="7d"), "idle_for", id="idle-str"),
    pytest.param(_gen_retention(keep_last=1, thread_batch=0), "batch size", id="thread-batch-0"),
    pytest.param(_gen_retention(keep_last=1, thread_ids="abc"), "single string", id="ret-lone-str"),
    pytest.param(_gen_retention(keep_last=1, thread_ids=["a", None]), "None", id="ret-none-id"),
    pytest.param(_gen_retention(keep_last=1, start_after=None), "None", id="ret-start-none"),
    pytest.param(
        lambda: _lifecycle.copy_thread(Q, "a", "a", overwrite=True), "same thread", id="copy-same"
    ),
    pytest.param(
        lambda: _lifecycle.copy_thread(Q, 1, "1", overwrite=False),
        "same thread",
        id="copy-same-text",
    ),
    pytest.param(
        lambda: _lifecycle.copy_thread(Q, None, "b", overwrite=False), "None", id="copy-none-source"
    ),
    pytest.param(lambda: _lifecycle.delete_for_runs(Q, "run-1"), "single string", id="runs-string"),
    pytest.param(lambda: _lifecycle.delete_for_runs(Q, ["r", None]), "run id", id="runs-none"),
    pytest.param(
        lambda: _history.delta_history(Q, SERDE, cfg(thread_id="t"), "messages"),
        "channels must be a list",
        id="history-channels-string",
    ),
    pytest.param(
        lambda: _history.delta_history(Q, SERDE, cfg(), ["messages"]),
        "thread_id",
        id="history-no-thread",
    ),
]


@pytest.mark.parametrize(("make", "message"), BAD_INPUTS)
def test_input_checks_raise_before_any_step(make: Callable[[], _steps.Steps], message: str) -> None:
    driver = FakeDriver()  # answers no step: a yielded step would fail with an AssertionError
    with pytest.raises(InvalidInputError, match=message):
        driver.run(make())
    assert driver.steps == []


def test_retention_checks_batch_before_any_step() -> None:
    driver = FakeDriver()
    for options in ({"keep_last": 1}, {"idle_for": timedelta(days=1)}):
        with pytest.raises(InvalidInputError, match="batch size"):
            driver.run(_lifecycle.retention(Q, batch=0, **options))  # type: ignore[arg-type]
    assert driver.steps == []


# --------------------------------------------------------------------------- prune("delete")


def test_prune_delete_is_one_locked_step() -> None:
    driver = FakeDriver({"delete_threads": [[(2, 7, 3, 4, 1234, ["a", "b"])]]})
    report = driver.run(_lifecycle.prune(Q, ["b", "a", "b"], "delete"))
    assert driver.names() == [("lock_threads", "delete_threads")]
    ids = ["a", "b"]
    assert driver.steps == [
        locked(ids, Stmt(Q["delete_threads"], {"thread_ids": ids, "idle_for": None}))
    ]
    (step,) = driver.steps
    assert step.transactional
    assert step.lock_timeout == DEFAULT_LOCK_TIMEOUT == 5.0
    assert all(s.prepare is False for s in step.statements)
    assert report == Report(threads=2, checkpoints=7, writes=3, blobs=4, bytes=1234, batches=1)


def test_prune_delete_names_the_ids_it_deleted_nothing_of() -> None:
    # the statement returns the threads it deleted: the others held no checkpoint
    driver = FakeDriver({"delete_threads": [[(1, 2, 0, 1, 90, ["b"])]]})
    report = driver.run(_lifecycle.prune(Q, ["c", "b", "a"], "delete"))
    assert driver.names() == [("lock_threads", "delete_threads")]  # no statement more
    assert report == Report(
        threads=1, checkpoints=2, blobs=1, bytes=90, batches=1, missing=["a", "c"]
    )


def test_prune_delete_options_and_null_size() -> None:
    driver = FakeDriver({"delete_threads": [[(0, 0, 0, 0, None, None)]]})
    report = driver.run(_lifecycle.prune(Q, ["a"], "delete", lock_timeout=0.25))
    assert driver.steps[0].lock_timeout == 0.25
    assert report == Report(batches=1, missing=["a"])


def test_prune_delete_dry_run_finds_the_missing_then_sizes_the_rest() -> None:
    driver = FakeDriver({"missing_threads": [[("b",)]], "threads_size": [[(1, 2, 3, 4, 500)]]})
    report = driver.run(_lifecycle.prune(Q, ["b", "a"], "delete", dry_run=True))
    driver.assert_consumed()
    assert driver.names() == [("missing_threads",), ("threads_size",)]
    assert driver.steps == [
        single("missing_threads", {"thread_ids": ["a", "b"]}),
        single("threads_size", {"thread_ids": ["a", "b"], "idle_for": None}),
    ]
    assert all(s.lock_timeout is None and not s.transactional for s in driver.steps)
    assert report == Report(
        threads=1, checkpoints=2, writes=3, blobs=4, bytes=500, dry_run=True, missing=["b"]
    )


@pytest.mark.parametrize("strategy", ["delete", "keep_latest"])
@pytest.mark.parametrize("dry_run", [False, True])
def test_prune_of_no_threads_yields_no_step(strategy: str, dry_run: bool) -> None:
    driver = FakeDriver()
    report = driver.run(_lifecycle.prune(Q, [], strategy, dry_run=dry_run))
    assert driver.steps == []
    assert report == Report(dry_run=dry_run)


# --------------------------------------------------------------------------- prune("keep_latest")


def test_prune_keep_latest_repeats_full_batches_then_prunes_blobs() -> None:
    driver = FakeDriver(
        {
            "prune_keep_last_batch": [
                [(["a"], 2, 5, 100, 3)],
                [(["b", "a"], 2, 1, None, 1)],
                [(["b"], 1, 0, 30, 0)],
            ],
            "prune_blobs": [[(3, 40)]],
            "missing_threads": [[]],
        }
    )
    report = driver.run(_lifecycle.prune(Q, ["b", "a", "c"], "keep_latest", batch=2))
    driver.assert_consumed()
    ids = ["a", "b", "c"]
    batch = Stmt(Q["prune_keep_last_batch"], {"thread_ids": ids, "keep_last": 1, "batch": 2})
    blobs = Stmt(Q["prune_blobs"], {"thread_ids": ids})
    assert driver.steps[0] == single("missing_threads", {"thread_ids": ids})
    del driver.steps[0]
    assert driver.names() == [
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_blobs"),
    ]
    assert driver.steps == [locked(ids, batch)] * 3 + [locked(ids, blobs)]
    assert all(s.transactional and s.lock_timeout == DEFAULT_LOCK_TIMEOUT for s in driver.steps)
    assert report == Report(
        threads=2,  # a and b: distinct over the batches; c lost nothing
        checkpoints=5,
        writes=6,
        blobs=3,
        bytes=170,
        batches=3,
    )


def test_prune_keep_latest_stops_on_a_short_first_batch() -> None:
    driver = FakeDriver(
        {
            "missing_threads": [[]],
            "prune_keep_last_batch": [[([], 0, 0, 0, 0)]],
            "prune_blobs": [[(0, None)]],
        }
    )
    report = driver.run(_lifecycle.prune(Q, ["a"], "keep_latest"))
    driver.assert_consumed()
    assert driver.names() == [
        ("missing_threads",),
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_blobs"),
    ]
    assert driver.steps[1].statements[1].params == {
        "thread_ids": ["a"],
        "keep_last": 1,
        "batch": DEFAULT_BATCH,
    }
    assert report == Report(batches=1)


def test_prune_keep_latest_stops_when_nothing_doomed_is_left() -> None:
    driver = FakeDriver(
        {
            "missing_threads": [[]],
            "prune_keep_last_batch": [[(["a"], 999, 0, 0, 0)]],
            "prune_blobs": [[(0, 0)]],
        }
    )
    report = driver.run(_lifecycle.prune(Q, ["a"], "keep_latest", lock_timeout=None))
    assert len(driver.steps) == 3
    # no lock timeout, but still one transaction: the locks and the delete go together
    assert all(s.lock_timeout is None and s.transactional for s in driver.steps[1:])
    assert report.checkpoints == 999
    assert report.threads == 1


def test_prune_keep_latest_stops_on_a_batch_that_deleted_nothing() -> None:
    # only rows a survivor still needs were left in the batch (ids out of time order): the job
    # ends instead of repeating the same empty batch
    driver = FakeDriver(
        {
            "missing_threads": [[]],
            "prune_keep_last_batch": [[(["a"], 3, 0, 9, 2)], [([], 0, 0, 0, 2)]],
            "prune_blobs": [[(0, 0)]],
        }
    )
    report = driver.run(_lifecycle.prune(Q, ["a"], "keep_latest", batch=3))
    driver.assert_consumed()
    assert report.checkpoints == 3
    assert report.batches == 2


def test_keep_last_passes_n() -> None:
    driver = FakeDriver(
        {"prune_keep_last_batch": [[(["a"], 0, 0, 0, 0)]], "prune_blobs": [[(0, 0)]]}
    )
    driver.run(_lifecycle._keep_last(Q, ["a"], 3, batch=10))
    assert driver.steps[0] == locked(
        ["a"],
        Stmt(Q["prune_keep_last_batch"], {"thread_ids": ["a"], "keep_last": 3, "batch": 10}),
    )


def test_prune_keep_latest_dry_run_is_one_plain_plan_step() -> None:
    driver = FakeDriver({"missing_threads": [[]], "prune_keep_last_plan": [[(2, 4, 3, 5, None)]]})
    report = driver.run(_lifecycle.prune(Q, ["b", "a"], "keep_latest", dry_run=True))
    assert driver.steps == [
        single("missing_threads", {"thread_ids": ["a", "b"]}),
        single("prune_keep_last_plan", {"thread_ids": ["a", "b"], "keep_last": 1}),
    ]
    assert not any(s.transactional for s in driver.steps)
    assert all(s.lock_timeout is None for s in driver.steps)
    assert report == Report(threads=2, checkpoints=4, writes=3, blobs=5, bytes=0, dry_run=True)


@pytest.mark.parametrize("dry_run", [False, True])
def test_prune_keep_latest_leaves_missing_ids_out_and_names_them(dry_run: bool) -> None:
    driver = FakeDriver(
        {
            "missing_threads": [[("c",), ("a",)]],
            "prune_keep_last_plan": [[(1, 2, 0, 0, 0)]],
            "prune_keep_last_batch": [[(["b"], 2, 0, 0, 0)]],
            "prune_blobs": [[(0, 0)]],
        }
    )
    report = driver.run(_lifecycle.prune(Q, ["c", "b", "a"], "keep_latest", dry_run=dry_run))
    assert driver.steps[0] == single("missing_threads", {"thread_ids": ["a", "b", "c"]})
    # the work sees only the thread that exists
    assert all(s.statements[-1].params["thread_ids"] == ["b"] for s in driver.steps[1:])  # type: ignore[index]
    assert report.missing == ["a", "c"]
    assert report.checkpoints == 2


def test_prune_keep_latest_of_missing_ids_only_runs_one_statement() -> None:
    driver = FakeDriver({"missing_threads": [[("a",)]]})
    report = driver.run(_lifecycle.prune(Q, ["a"], "keep_latest"))
    assert driver.names() == [("missing_threads",)]
    assert report == Report(missing=["a"])


# --------------------------------------------------------------------------- copy_thread


def _source_check(source: str, target: str) -> Step:
    """The first part of copy_thread's transaction: the target's lock, then whether the source
    holds a checkpoint."""
    return Step(
        (
            Stmt(Q["lock_copy"], {"source": source, "target": target}),
            Stmt(Q["gin_pending_list_small"]),
            Stmt(Q["missing_threads"], {"thread_ids": [source]}),
        ),
        DEFAULT_LOCK_TIMEOUT,
    )


def _batch(what: str, table: str, after: list[str] | None, batch: int = 2) -> Step:
    params = {"source": "src", "target": "dst", "batch": batch, "after": after}
    return Step((Stmt(Q[f"{what}_{table}_batch"], params),))


def test_copy_thread_without_overwrite_copies_in_batches_in_one_transaction() -> None:
    # batches of 2: checkpoints 1, writes 2 + 0, blobs 2 + 1 (a batch that read fewer than 2 is
    # the table's last; the next starts after the last key the one before read)
    driver = FakeDriver(
        {
            "missing_threads": [[]],
            "copy_target_used": [[(False,)]],
            "copy_blobs_batch": [[(2, 2, ["", "a", "1"])], [(1, 1, ["", "b", "1"])]],
            "copy_writes_batch": [[(2, 2, ["", "1", "t", "0"])], [(0, 0, None)]],
            "copy_checkpoints_batch": [[(1, 1, ["", "1"])]],
            "copy_elements_batch": [[(2, 2, ["0a"])], [(0, 0, None)]],
        }
    )
    report = driver.run(_lifecycle.copy_thread(Q, "src", "dst", overwrite=False, batch=2))
    assert driver.names() == [
        ("lock_copy", "gin_pending_list_small", "missing_threads"),
        ("copy_target_used",),
        ("copy_checkpoints_batch",),
        ("copy_writes_batch",),
        ("copy_writes_batch",),
        ("copy_blobs_batch",),
        ("copy_blobs_batch",),
        ("copy_elements_batch",),
        ("copy_elements_batch",),
    ]
    assert driver.steps[2:] == [
        _batch("copy", "checkpoints", None),
        _batch("copy", "writes", None),
        _batch("copy", "writes", ["", "1", "t", "0"]),
        _batch("copy", "blobs", None),
        _batch("copy", "blobs", ["", "a", "1"]),
        _batch("copy", "elements", None),
        _batch("copy", "elements", ["0a"]),
    ]
    # then the target's parts no copied value names, and its status, in the same transaction
    assert driver.collected == driver.refreshed == ["dst"]
    assert driver.steps[0] == _source_check("src", "dst")
    assert driver.steps[1] == Step(
        (Stmt(Q["copy_target_used"], {"source": "src", "target": "dst"}),)
    )
    assert driver.steps[0].lock_timeout == DEFAULT_LOCK_TIMEOUT
    # every batch is a continuation of the first step: one transaction
    assert all(step.then is not None for step in driver.steps[:-1])
    assert report == Report(threads=1, checkpoints=1, writes=2, blobs=3)


def test_copy_thread_with_overwrite_clears_the_target_in_batches_after_the_lock() -> None:
    driver = FakeDriver(
        {
            "missing_threads": [[]],
            "clear_blobs_batch": [[(2, 2, ["", "a", "1"])], [(0, 0, None)]],
            "clear_writes_batch": [[(0, 0, None)]],
            "clear_checkpoints_batch": [[(1, 1, ["", "1"])]],
            "copy_target_used": [[(False,)]],
            "copy_blobs_batch": [[(2, 2, ["", "a", "1"])], [(0, 0, None)]],
            "copy_writes_batch": [[(0, 0, None)]],
            "copy_checkpoints_batch": [[(1, 1, ["", "1"])]],
            "copy_elements_batch": [[(0, 0, None)]],
        }
    )
    report = driver.run(_lifecycle.copy_thread(Q, "src", "dst", overwrite=True, batch=2))
    assert driver.names() == [
        ("lock_copy", "gin_pending_list_small", "missing_threads"),
        ("clear_checkpoints_batch",),
        ("clear_writes_batch",),
        ("clear_blobs_batch",),
        ("clear_blobs_batch",),
        ("copy_target_used",),
        ("copy_checkpoints_batch",),
        ("copy_writes_batch",),
        ("copy_blobs_batch",),
        ("copy_blobs_batch",),
        ("copy_elements_batch",),
    ]
    assert driver.steps[3:5] == [
        _batch("clear", "blobs", None),
        _batch("clear", "blobs", ["", "a", "1"]),
    ]
    assert report == Report(threads=1, checkpoints=1, writes=0, blobs=2)


def test_copy_thread_into_a_used_target_raises() -> None:
    driver = FakeDriver({"missing_threads": [[]], "copy_target_used": [[(True,)]]})
    with pytest.raises(ThreadNotEmptyError) as info:
        driver.run(_lifecycle.copy_thread(Q, "src", "dst", overwrite=False))
    assert info.value.thread_id == "dst"
    assert len(driver.steps) == 2


@pytest.mark.parametrize("overwrite", [False, True])
def test_copy_thread_of_a_missing_source_copies_nothing_and_leaves_the_target(
    overwrite: bool,
) -> None:
    # the transaction ends after the check: no copy, and no delete of the target
    driver = FakeDriver({"missing_threads": [[("src",)]]})
    report = driver.run(_lifecycle.copy_thread(Q, "src", "dst", overwrite=overwrite))
    assert driver.steps == [_source_check("src", "dst")]
    assert report == Report(missing=["src"])


def test_copy_thread_rerun_after_a_transient_error_starts_from_the_check() -> None:
    # the driver reruns a step from its start: what the first attempt saw must not leak into
    # the second (here the source was deleted between the attempts)
    answers = [[], [(True, 3, 2, 4)], [("src",)]]
    steps = _lifecycle.copy_thread(Q, "src", "dst", overwrite=False)
    first = next(steps)
    assert first.then is not None
    copy = first.then(answers[0])
    assert copy is not None
    assert copy.then is not None
    assert copy.then(answers[1]) is None
    assert first.then(answers[2]) is None  # the rerun: the source is gone now
    with pytest.raises(StopIteration) as done:
        steps.send(answers[2])
    assert done.value.value == Report(missing=["src"])


# --------------------------------------------------------------------------- delete_for_runs


def _summary(*counts: int, missing: list[str] | None = None) -> tuple[Any, ...]:
    """The kind-0 row of delete_for_runs: checkpoints, writes, blobs, threads, bytes, missing."""
    return (0, None, None, None, None, None, None, None, *counts, missing or [])


def test_delete_for_runs_locks_the_runs_threads_then_deletes_there_in_one_transaction() -> None:
    driver = FakeDriver(
        {
            "lock_threads_of_runs": [[(["t1", "t2"],)]],
            "delete_for_runs": [[_summary(4, 6, 2, 2, 900)]],
        }
    )
    report = driver.run(_lifecycle.delete_for_runs(Q, ["r2", "r1", "r2"]))
    # the delete is the lock step's continuation: the same transaction, on the threads it locked
    assert driver.names() == [("lock_threads_of_runs",), ("delete_for_runs",)]
    first, second = driver.steps
    assert first == Step(
        (Stmt(Q["lock_threads_of_runs"], {"run_ids": ["r1", "r2"]}),), DEFAULT_LOCK_TIMEOUT
    )
    assert first.then is not None
    assert first.transactional
    assert second == Step(
        (Stmt(Q["delete_for_runs"], {"run_ids": ["r1", "r2"], "thread_ids": ["t1", "t2"]}),)
    )
    assert report == Report(threads=2, checkpoints=4, writes=6, blobs=2, bytes=900, batches=1)


def test_a_dry_run_of_delete_for_runs_locks_nothing_and_plans() -> None:
    driver = FakeDriver(
        {
            "runs_threads": [[(["t1"],)]],
            "delete_for_runs_plan": [[_summary(1, 2, 3, 1, 50, missing=["nope"])]],
        }
    )
    report = driver.run(_lifecycle.delete_for_runs(Q, ["r", "nope"], dry_run=True))
    assert driver.names() == [("runs_threads",), ("delete_for_runs_plan",)]
    assert driver.steps[0].lock_timeout is None
    assert report == Report(
        threads=1, checkpoints=1, writes=2, blobs=3, bytes=50, dry_run=True, missing=["nope"]
    )


@pytest.mark.parametrize("dry_run", [False, True])
def test_runs_without_a_thread_match_nothing_and_are_named(dry_run: bool) -> None:
    first = "runs_threads" if dry_run else "lock_threads_of_runs"
    driver = FakeDriver({first: [[([],)]]})
    report = driver.run(_lifecycle.delete_for_runs(Q, ["b", "a"], dry_run=dry_run))
    assert driver.names() == [(first,)]
    assert report == Report(dry_run=dry_run, missing=["a", "b"])


def test_delete_for_runs_refuses_when_survivors_depend_on_the_runs() -> None:
    rows: Rows = [
        _summary(0, 0, 0, 0, 0),
        (1, "t1", "", "c3", "c2", None, None, None, None, None, None, None, None, None),
        (1, "t2", "sub", "c9", "c8", None, None, None, None, None, None, None, None, None),
    ]
    driver = FakeDriver({"lock_threads_of_runs": [[(["t1", "t2"],)]], "delete_for_runs": [rows]})
    with pytest.raises(DeltaDependencyError) as info:
        driver.run(_lifecycle.delete_for_runs(Q, ["r2", "r1"]))
    assert info.value.run_ids == ("r1", "r2")
    assert info.value.dependents == (("t1", "", "c3", "c2"), ("t2", "sub", "c9", "c8"))
    assert "t1/(root)/c3 needs c2" in str(info.value)
    assert "t2/sub/c9 needs c8" in str(info.value)
    assert "nothing was deleted" in str(info.value)


def test_delete_for_runs_refuses_rows_it_cannot_tell_from_another_runs() -> None:
    rows: Rows = [
        (2, "t", "", "c1", "task-1", "__interrupt__", "r2", ["r1"], *[None] * 6),
        (2, "t", "child:task-1", None, "task-1", None, "r2", None, *[None] * 6),
        _summary(0, 0, 0, 0, 0),
    ]
    driver = FakeDriver({"lock_threads_of_runs": [[(["t"],)]], "delete_for_runs": [rows]})
    with pytest.raises(EntangledRunError) as info:
        driver.run(_lifecycle.delete_for_runs(Q, ["r2"]))
    assert info.value.run_ids == ("r2",)
    assert info.value.rows == (
        ("t", "", "c1", "task-1", "__interrupt__", "r2", ("r1",)),
        ("t", "child:task-1", None, "task-1", None, "r2", ()),
    )
    text = str(info.value)
    assert (
        "t/(root)/c1: run 'r2''s __interrupt__ write of task task-1 replaced the write of 'r1'"
        in text
    )
    assert "subgraph namespace t/child:task-1 of task task-1" in text
    assert "nothing was deleted" in text


def test_delete_for_no_runs_yields_nothing() -> None:
    driver = FakeDriver()
    assert driver.run(_lifecycle.delete_for_runs(Q, [])) == Report()
    assert driver.run(_lifecycle.delete_for_runs(Q, [], dry_run=True)) == Report(dry_run=True)
    assert driver.steps == []


# --------------------------------------------------------------------------- retention


def _pages(pages: Mapping[str, list[str]]) -> Callable[[Step, str], Rows]:
    """threads_after answered by cursor; keep_last batches short and empty, blobs none."""

    def answer(step: Step, name: str) -> Rows:
        if name == "threads_after":
            after = step.statements[0].params["after"]  # type: ignore[index]
            return [(t,) for t in pages[after]]
        if name == "prune_keep_last_batch":
            ids = step.statements[1].params["thread_ids"]  # type: ignore[index]
            return [(ids[:1], 1, 2, 10, 0)]
        if name == "prune_blobs":
            return [(1, 5)]
        if name == "missing_threads":
            return [(t,) for t in step.statements[0].params["thread_ids"] if t.startswith("x")]  # type: ignore[index]
        raise AssertionError(f"unexpected step {step_names(step)}")

    return answer


def _keep_steps(ids: list[str], n: int, batch: int = DEFAULT_BATCH) -> list[Step]:
    return [
        locked(
            ids,
            Stmt(Q["prune_keep_last_batch"], {"thread_ids": ids, "keep_last": n, "batch": batch}),
        ),
        locked(ids, Stmt(Q["prune_blobs"], {"thread_ids": ids})),
    ]


def _after(after: str, limit: int) -> Step:
    return single("threads_after", {"after": after, "limit": limit})


def test_retention_pages_through_threads_after() -> None:
    driver = FakeDriver(_pages({"": ["a", "b"], "b": ["c"], "c": []}))
    report = driver.run(_lifecycle.retention(Q, keep_last=2, thread_batch=2))
    assert driver.names() == [
        ("threads_after",),
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_blobs"),
        ("threads_after",),
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_blobs"),
        ("threads_after",),
    ]
    assert driver.steps == [
        _after("", 2),
        *_keep_steps(["a", "b"], 2),
        _after("b", 2),
        *_keep_steps(["c"], 2),
        _after("c", 2),
    ]
    assert not driver.steps[0].transactional
    assert report == Report(
        threads=2, checkpoints=2, writes=4, blobs=2, bytes=30, batches=2, last_thread_id="c"
    )


def test_retention_defaults_and_start_after() -> None:
    driver = FakeDriver(_pages({"m": []}))
    report = driver.run(_lifecycle.retention(Q, keep_last=1, start_after="m"))
    assert driver.steps == [_after("m", DEFAULT_THREAD_BATCH)]
    assert report == Report(last_thread_id="m")


def test_retention_of_an_empty_database() -> None:
    driver = FakeDriver(_pages({"": []}))
    report = driver.run(_lifecycle.retention(Q, keep_last=1))
    assert driver.names() == [("threads_after",)]
    assert report == Report(last_thread_id=None)


def test_retention_of_given_threads_filters_and_pages_them() -> None:
    driver = FakeDriver(_pages({}))
    report = driver.run(
        _lifecycle.retention(
            Q,
            keep_last=1,
            thread_ids=["d", "a", "c", "b", "a"],
            start_after="a",
            thread_batch=2,
            batch=7,
            lock_timeout=1.5,
        )
    )
    assert "threads_after" not in {n for names in driver.names() for n in names}
    expected = _keep_steps(["b", "c"], 1, 7) + _keep_steps(["d"], 1, 7)
    expected = [Step(s.statements, 1.5) for s in expected]
    assert driver.steps == [single("missing_threads", {"thread_ids": ["b", "c", "d"]}), *expected]
    assert report.missing == []
    assert report.last_thread_id == "d"
    assert report.batches == 2
    assert report.threads == 2  # b and d (the first id of each batch, per the script)


@pytest.mark.parametrize("dry_run", [False, True])
def test_retention_of_given_threads_names_the_missing_and_leaves_them_out(dry_run: bool) -> None:
    def answer(step: Step, name: str) -> Rows:
        if name == "prune_keep_last_plan":
            return [(1, 3, 0, 0, 0)]
        return _pages({})(step, name)

    driver = FakeDriver(answer)
    report = driver.run(
        _lifecycle.retention(
            Q, keep_last=1, thread_ids=["x2", "b", "x1", "a"], thread_batch=2, dry_run=dry_run
        )
    )
    assert driver.steps[0] == single("missing_threads", {"thread_ids": ["a", "b", "x1", "x2"]})
    # one page of the two ids that exist: the missing ones take no work, and no page
    assert {tuple(s.statements[-1].params["thread_ids"]) for s in driver.steps[1:]} == {("a", "b")}  # type: ignore[index]
    assert report.missing == ["x1", "x2"]
    assert report.last_thread_id == "b"


def test_retention_of_given_threads_all_missing_does_nothing_more() -> None:
    driver = FakeDriver(_pages({}))
    report = driver.run(_lifecycle.retention(Q, keep_last=1, thread_ids=["x1"], dry_run=True))
    assert driver.names() == [("missing_threads",)]
    assert report == Report(dry_run=True, missing=["x1"])


def test_retention_of_given_threads_all_before_start_after() -> None:
    driver = FakeDriver()
    report = driver.run(
        _lifecycle.retention(Q, keep_last=1, thread_ids=["a", "b"], start_after="b")
    )
    assert driver.steps == []
    assert report == Report(last_thread_id="b")


def test_retention_deletes_idle_threads_and_keeps_last_of_the_rest() -> None:
    def answer(step: Step, name: str) -> Rows:
        if name == "threads_after":
            after = step.statements[0].params["after"]  # type: ignore[index]
            return {"": [("a",), ("b",), ("c",)], "c": []}[after]
        return {
            "idle_threads": [("b",)],
            "delete_threads": [(1, 5, 2, 3, 100, ["b"])],
            "prune_keep_last_batch": [(["c"], 4, 1, 40, 0)],
            "prune_blobs": [(2, 8)],
        }[name]

    driver = FakeDriver(answer)
    report = driver.run(_lifecycle.retention(Q, keep_last=2, idle_for=WEEK, lock_timeout=2.0))
    assert driver.names() == [
        ("threads_after",),
        ("idle_threads",),
        ("lock_threads", "delete_threads"),
        ("lock_threads", "prune_keep_last_batch"),
        ("lock_threads", "prune_blobs"),
        ("threads_after",),
    ]
    rest = ["a", "c"]
    assert driver.steps == [
        _after("", DEFAULT_THREAD_BATCH),
        single("idle_threads", {"thread_ids": ["a", "b", "c"], "idle_for": WEEK}),
        locked(
            ["b"],
            Stmt(Q["delete_threads"], {"thread_ids": ["b"], "idle_for": WEEK}),
            lock_timeout=2.0,
        ),
        *[Step(s.statements, 2.0) for s in _keep_steps(rest, 2)],
        _after("c", DEFAULT_THREAD_BATCH),
    ]
    assert not driver.steps[1].transactional
    assert report == Report(
        threads=2,  # b deleted, c pruned
        checkpoints=9,
        writes=3,
        blobs=5,
        bytes=148,
        batches=2,
        last_thread_id="c",
    )


def test_retention_with_no_idle_thread_deletes_nothing() -> None:
    answers = {
        "threads_after": [[("a",)], []],
        "idle_threads": [[]],
        "prune_keep_last_batch": [[([], 0, 0, 0, 0)]],
        "prune_blobs": [[(0, 0)]],
    }
    driver = FakeDriver(answers)
    driver.run(_lifecycle.retention(Q, keep_last=1, idle_for=WEEK))
    driver.assert_consumed()
    assert ("lock_threads", "delete_threads") not in driver.names()
    assert driver.steps[2] == _keep_steps(["a"], 1)[0]


def test_retention_idle_only_skips_keep_last() -> None:
    driver = FakeDriver(
        {
            "threads_after": [[("a",), ("b",)], []],
            "idle_threads": [[("a",), ("b",)]],
            "delete_threads": [[(2, 2, 0, 1, 10, ["a", "b"])]],
        }
    )
    report = driver.run(_lifecycle.retention(Q, idle_for=WEEK))
    driver.assert_consumed()
    assert driver.names() == [
        ("threads_after",),
        ("idle_threads",),
        ("lock_threads", "delete_threads"),
        ("threads_after",),
    ]
    assert report == Report(
        threads=2, checkpoints=2, blobs=1, bytes=10, batches=1, last_thread_id="b"
    )


def test_retention_dry_run_only_reads() -> None:
    driver = FakeDriver(
        {
            "threads_after": [[("a",), ("b",), ("c",)], []],
            "idle_threads": [[("b",)]],
            "threads_size": [[(1, 5, 2, 3, 100)]],
            "prune_keep_last_plan": [[(1, 4, 1, 2, None)]],
        }
    )
    report = driver.run(_lifecycle.retention(Q, keep_last=3, idle_for=WEEK, dry_run=True))
    driver.assert_consumed()
    assert driver.steps == [
        _after("", DEFAULT_THREAD_BATCH),
        single("idle_threads", {"thread_ids": ["a", "b", "c"], "idle_for": WEEK}),
        single("threads_size", {"thread_ids": ["b"], "idle_for": None}),
        single("prune_keep_last_plan", {"thread_ids": ["a", "c"], "keep_last": 3}),
        _after("c", DEFAULT_THREAD_BATCH),
    ]
    assert not any(s.transactional for s in driver.steps)
    assert report == Report(
        threads=2,
        checkpoints=9,
        writes=3,
        blobs=5,
        bytes=100,
        dry_run=True,
        batches=0,
        last_thread_id="c",
    )


def test_retention_dry_run_without_idle_threads_sizes_nothing() -> None:
    driver = FakeDriver(
        {
            "threads_after": [[("a",)], []],
            "idle_threads": [[]],
            "prune_keep_last_plan": [[(0, 0, 0, 0, 0)]],
        }
    )
    report = driver.run(_lifecycle.retention(Q, keep_last=1, idle_for=WEEK, dry_run=True))
    driver.assert_consumed()
    assert ("threads_size",) not in driver.names()
    assert report == Report(dry_run=True, last_thread_id="a")


def test_retention_progress_gets_a_copy_once_per_page() -> None:
    seen: list[Report] = []

    def progress(report: Report) -> None:
        seen.append(copy.deepcopy(report))
        report.checkpoints += 1000  # must not leak into the total
        report.last_thread_id = "zzz"

    driver = FakeDriver(_pages({"": ["a"], "a": ["b"], "b": ["c"], "c": []}))
    total = driver.run(_lifecycle.retention(Q, keep_last=1, thread_batch=1, progress=progress))
    assert [r.last_thread_id for r in seen] == ["a", "b", "c"]
    assert [r.checkpoints for r in seen] == [1, 2, 3]
    assert [r.batches for r in seen] == [1, 2, 3]
    assert total.checkpoints == 3
    assert total.last_thread_id == "c"
    assert total == Report(
        threads=3, checkpoints=3, writes=6, blobs=3, bytes=45, batches=3, last_thread_id="c"
    )


def test_retention_progress_is_not_called_without_threads() -> None:
    seen: list[Report] = []
    FakeDriver(_pages({"": []})).run(_lifecycle.retention(Q, keep_last=1, progress=seen.append))
    assert seen == []


# --------------------------------------------------------------------------- delta_history


def test_delta_history_of_no_channels_runs_nothing() -> None:
    driver = FakeDriver()
    assert driver.run(_history.delta_history(Q, SERDE, cfg(thread_id="t"), [])) == {}
    assert driver.steps == []


def _row(kind: int, channel: str, value: Any, task_id: str | None = None, depth: int = 0) -> Any:
    type_, blob = SERDE.dumps_typed(value)
    return (
        kind,
        depth,
        "" if kind == 0 else None,
        task_id,
        0 if kind == 0 else None,
        channel,
        type_,
        blob,
        "t",
        "sub",
        f"checkpoint-{depth}",
        None if kind == 0 else "1",
    )


def test_delta_history_is_one_hot_path_statement() -> None:
    rows: Rows = [_row(0, "b", "w1", "task-1", depth=1), _row(1, "b", ["seed"], depth=1)]
    driver = FakeDriver({"delta_history[thread,ns]": [rows]})
    config = cfg(thread_id="t", checkpoint_ns="sub")
    # the statement itself: where migration 0011's function cannot be called
    result = driver.run(_history.delta_history(Q, SERDE, config, ["b", "a", "b"], function=False))
    assert driver.names() == [("delta_history[thread,ns]",)]
    (step,) = driver.steps
    assert step == Step(
        (
            Stmt(
                delta_history_text(("thread", "ns")),
                {"thread_id": "t", "checkpoint_ns": "sub", "channels": ["b", "a"]},
                prepare=None,
            ),
        )
    )
    assert step.statements[0].prepare is None
    assert not step.transactional
    assert list(result) == ["b", "a"]
    assert result == {
        "b": {"writes": [("task-1", "b", "w1")], "seed": ["seed"]},
        "a": {"writes": []},
    }


def test_delta_history_of_a_checkpoint_id() -> None:
    driver = FakeDriver({"delta_history[thread,ns,id]": [[]]})
    config = cfg(thread_id=7, checkpoint_id="c5")
    result = driver.run(_history.delta_history(Q, SERDE, config, ("m",), function=False))
    assert driver.steps[0].statements[0].params == {
        "thread_id": "7",
        "checkpoint_ns": "",
        "checkpoint_id": "c5",
        "channels": ["m"],
    }
    assert result == {"m": {"writes": []}}


def test_delta_history_calls_the_function_by_default() -> None:
    """The call of migration 0011's pgsaver_delta_history, whose plans stay on the primary keys
    under any statistics; checkpoint_id None: the latest."""
    rows: Rows = [_row(1, "b", ["seed"], depth=0)]
    driver = FakeDriver({"delta_history_call": [rows]})
    result = driver.run(_history.delta_history(Q, SERDE, cfg(thread_id="t"), ["b"]))
    (step,) = driver.steps
    assert step == Step(
        (
            Stmt(
                Q["delta_history_call"],
                {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": None, "channels": ["b"]},
                prepare=None,
            ),
        )
    )
    assert result == {"b": {"writes": [], "seed": ["seed"]}}


def test_assemble_history_seeds_and_writes_in_row_order() -> None:
    rows: Rows = [
        _row(0, "a", {"n": 1}, "t-old", depth=3),
        _row(0, "b", "b-only", "t-b", depth=2),
        _row(0, "a", {"n": 2}, "t-new", depth=1),
        _row(0, "a", None, "t-none", depth=0),
        _row(1, "a", [1, 2], depth=3),
        _row(1, "c", None, depth=0),  # a stored None is a seed too
    ]
    result = _history.assemble_history(SERDE, ["a", "b", "c", "d"], rows)
    assert result == {
        "a": {
            "writes": [("t-old", "a", {"n": 1}), ("t-new", "a", {"n": 2}), ("t-none", "a", None)],
            "seed": [1, 2],
        },
        "b": {"writes": [("t-b", "b", "b-only")]},
        "c": {"writes": [], "seed": None},
        "d": {"writes": []},
    }
    assert "seed" not in result["b"]
    assert "seed" in result["c"]


def test_assemble_history_reads_a_null_blob_as_empty_bytes() -> None:
    # a NULL blob is decoded as b"": an empty bytes value, not None
    rows: Rows = [
        (0, 0, "", "task", 0, "a", "bytes", None, "t", "", "c1", None),
        (1, 0, None, None, None, "a", "bytes", None, "t", "", "c1", "1"),
        (1, 0, None, None, None, "n", "null", None, "t", "", "c1", "1"),
    ]
    result = _history.assemble_history(SERDE, ["a", "n"], rows)
    assert result == {
        "a": {"writes": [("task", "a", b"")], "seed": b""},
        "n": {"writes": [], "seed": None},
    }
    assert result["a"]["seed"] is not None


def test_delta_history_channel_names_are_checked_as_channel_names() -> None:
    driver = FakeDriver()
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with pytest.raises(InvalidInputError, match="channel name"):
        driver.run(_history.delta_history(Q, SERDE, config, ["a", None]))  # type: ignore[list-item]
    assert driver.steps == []


def test_retention_prunes_an_idle_thread_written_before_its_delete() -> None:
    """idle_threads saw "b" idle, but it was written before the locked delete, which then left it
    alone: it is pruned to keep_last in the same pass instead of being skipped."""
    answers = {
        "threads_after": [[("a",), ("b",)], []],
        "idle_threads": [[("a",), ("b",)]],
        "delete_threads": [[(1, 3, 0, 1, 10, ["a"])]],
        "prune_keep_last_batch": [[(["b"], 2, 0, 20, 0)]],
        "prune_blobs": [[(0, 0)]],
    }
    driver = FakeDriver(answers)
    report = driver.run(_lifecycle.retention(Q, keep_last=1, idle_for=WEEK))
    driver.assert_consumed()
    keep = [s for s in driver.steps if query_name(s.statements[-1]) == "prune_keep_last_batch"]
    assert [s.statements[-1].params["thread_ids"] for s in keep] == [["b"]]  # type: ignore[index]
    assert report.threads == 2
    assert report.checkpoints == 5
