"""The store as a drop-in for ``langgraph.store.postgres``: namespace rules as LangGraph 4.3 states
them (``validate_op_namespace`` for the ops given to ``batch``, ``BaseStore``'s methods for the rest),
on a real Postgres, sync and async."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
    validate_op_namespace,
)

from langgraph_pg_saver import AsyncPostgresStore, PostgresStore


@pytest.fixture
def store(db_dsn: str) -> Iterator[PostgresStore]:
    with PostgresStore.from_conn_string(db_dsn) as s:
        yield s


@pytest.fixture
async def astore(db_dsn: str) -> AsyncIterator[AsyncPostgresStore]:
    async with AsyncPostgresStore.from_conn_string(db_dsn) as s:
        yield s


#: namespaces LangGraph refuses in any op (a label that is empty, not a str, holds '.' or NUL)
BAD = [("a.b",), ("a", ""), ("a", 7), ("a\x00",), ("",)]
#: namespaces it lets through in every op (() included: validate_op_namespace checks labels only)
GOOD: list[tuple[Any, ...]] = [(), ("a",), ("langgraph",), ("langgraph", "x"), ("*",), ("a", "b_%")]


def _ops(namespace: tuple[Any, ...]) -> dict[str, Op]:
    return {
        "get": GetOp(namespace, "k"),
        "put": PutOp(namespace, "k", {"v": 1}),
        "delete": PutOp(namespace, "k", None),
        "search": SearchOp(namespace),
        "list-prefix": ListNamespacesOp((MatchCondition("prefix", namespace),)),
        "list-suffix": ListNamespacesOp((MatchCondition("suffix", namespace),)),
    }


def _refused_by_langgraph(op: Op) -> bool:
    try:
        validate_op_namespace(op)
    except InvalidNamespaceError:
        return True
    return False


# the one op LangGraph lets through that we refuse: a value at () (put() refuses it too; the
# official store would store it and read it back under the namespace ("",))
_OURS_ONLY = {((), "put")}

CASES = [(ns, kind) for ns in BAD + GOOD for kind in _ops(())]


def _case_id(case: Any) -> str:
    return repr(case)


@pytest.mark.parametrize(("namespace", "kind"), CASES, ids=_case_id)
def test_batch_refuses_the_ops_langgraph_refuses(
    store: PostgresStore, namespace: tuple[Any, ...], kind: str
) -> None:
    store.put(("a", "b"), "k", {"original": True})
    op = _ops(namespace)[kind]
    refused = _refused_by_langgraph(op) or (namespace, kind) in _OURS_ONLY
    if refused:
        # a user catching LangGraph's exception catches ours: it is the same class
        with pytest.raises(InvalidNamespaceError):
            store.batch([PutOp(("other",), "k", {"v": 2}), op])
        assert store.get(("other",), "k") is None  # nothing of the batch ran
    else:
        store.batch([PutOp(("other",), "k", {"v": 2}), op])
        assert store.get(("other",), "k") is not None
    item = store.get(("a", "b"), "k")
    assert item is not None
    assert item.value == {"original": True}


@pytest.mark.parametrize(("namespace", "kind"), CASES, ids=_case_id)
async def test_abatch_refuses_the_ops_langgraph_refuses(
    astore: AsyncPostgresStore, namespace: tuple[Any, ...], kind: str
) -> None:
    await astore.aput(("a", "b"), "k", {"original": True})
    op = _ops(namespace)[kind]
    refused = _refused_by_langgraph(op) or (namespace, kind) in _OURS_ONLY
    if refused:
        with pytest.raises(InvalidNamespaceError):
            await astore.abatch([PutOp(("other",), "k", {"v": 2}), op])
        assert await astore.aget(("other",), "k") is None
    else:
        await astore.abatch([PutOp(("other",), "k", {"v": 2}), op])
        assert await astore.aget(("other",), "k") is not None
    item = await astore.aget(("a", "b"), "k")
    assert item is not None
    assert item.value == {"original": True}


def test_what_the_newly_allowed_ops_do(store: PostgresStore) -> None:
    # a get or delete at (): nothing can be stored there, so None / nothing deleted
    store.put(("a",), "k", {"v": 1})
    assert store.batch([GetOp((), "k"), PutOp((), "k", None)]) == [None, None]
    assert store.get((), "k") is None
    store.delete((), "k")
    assert store.get(("a",), "k") is not None
    # the root label "langgraph": put() refuses it (BaseStore's rule) ...
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        store.put(("langgraph", "x"), "k", {"v": 1})
    # ... an op given to batch writes under it, and delete() removes it, as in the official store
    store.batch([PutOp(("langgraph", "x"), "k", {"v": 3})])
    item = store.get(("langgraph", "x"), "k")
    assert item is not None
    assert item.namespace == ("langgraph", "x")
    assert item.value == {"v": 3}
    assert store.list_namespaces(prefix=("langgraph",)) == [("langgraph", "x")]
    store.delete(("langgraph", "x"), "k")
    assert store.get(("langgraph", "x"), "k") is None
    # a value at () is refused in batch too, and names the namespace's fault
    with pytest.raises(InvalidNamespaceError, match="empty"):
        store.batch([PutOp((), "k", {"v": 1})])
    assert [i.namespace for i in store.search(())] == [("a",)]


async def test_what_the_newly_allowed_ops_do_async(astore: AsyncPostgresStore) -> None:
    await astore.aput(("a",), "k", {"v": 1})
    assert await astore.abatch([GetOp((), "k"), PutOp((), "k", None)]) == [None, None]
    assert await astore.aget((), "k") is None
    await astore.adelete((), "k")
    assert await astore.aget(("a",), "k") is not None
    with pytest.raises(InvalidNamespaceError, match="langgraph"):
        await astore.aput(("langgraph", "x"), "k", {"v": 1})
    await astore.abatch([PutOp(("langgraph", "x"), "k", {"v": 3})])
    item = await astore.aget(("langgraph", "x"), "k")
    assert item is not None
    assert item.namespace == ("langgraph", "x")
    assert item.value == {"v": 3}
    assert await astore.alist_namespaces(prefix=("langgraph",)) == [("langgraph", "x")]
    await astore.adelete(("langgraph", "x"), "k")
    assert await astore.aget(("langgraph", "x"), "k") is None
    with pytest.raises(InvalidNamespaceError, match="empty"):
        await astore.abatch([PutOp((), "k", {"v": 1})])
    assert [i.namespace for i in await astore.asearch(())] == [("a",)]


def test_like_wildcards_in_labels_are_literal(store: PostgresStore) -> None:
    # '_' and '%' are LIKE's wildcards; in a label they are characters
    for ns in [("t_%",), ("t_%", "in"), ("tX%",), ("T_%",), ("t_%x",)]:
        store.put(ns, "k", {})
    assert sorted(i.namespace for i in store.search(("t_%",))) == [("t_%",), ("t_%", "in")]
    assert store.list_namespaces(prefix=("t_%", "*")) == [("t_%", "in")]
    assert store.list_namespaces(suffix=("t_%",)) == [("t_%",)]


async def test_like_wildcards_in_labels_are_literal_async(astore: AsyncPostgresStore) -> None:
    for ns in [("t_%",), ("t_%", "in"), ("tX%",), ("T_%",), ("t_%x",)]:
        await astore.aput(ns, "k", {})
    found = sorted(i.namespace for i in await astore.asearch(("t_%",)))
    assert found == [("t_%",), ("t_%", "in")]
    assert await astore.alist_namespaces(prefix=("t_%", "*")) == [("t_%", "in")]
    assert await astore.alist_namespaces(suffix=("t_%",)) == [("t_%",)]
