"""The store's semantic search on pgvector (the embedded Postgres with pgvector), against
InMemoryStore with the same deterministic embedding function (no network, no model)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import psycopg
import pytest
from langgraph.store.base import PutOp
from langgraph.store.memory import InMemoryStore

from langgraph_pg_saver import (
    AsyncPostgresStore,
    InvalidInputError,
    PgSaverError,
    PostgresStore,
    SchemaError,
)
from tests import helpers

DIMS = 16


class Embedder(helpers.Embedder):
    """A bag of hashed words (lowercased, commas split them), counting its calls and texts."""

    def __init__(self, dims: int = DIMS) -> None:
        super().__init__(dims, lower=True)


MEMORIES = {
    "m1": {"text": "I like pizza and pasta", "kind": "food", "n": 1},
    "m2": {"text": "my dog is called Rex", "kind": "pet", "n": 2},
    "m3": {"text": "pizza with extra cheese", "kind": "food", "n": 3},
    "m4": {"text": "dogs and cats and birds", "kind": "pet", "n": 4},
    "m5": {"text": "I work as a pizza chef", "kind": "work", "n": 5},
    "m6": {"text": "cheese is my favourite food", "kind": "food", "n": 6},
}


def fill(store: Any, ns: tuple[str, ...] = ("u1", "memories")) -> None:
    for key, value in MEMORIES.items():
        store.put(ns, key, value, index=False if key == "m6" else None)


def ranked(items: Sequence[Any]) -> list[tuple[str, float | None]]:
    return [(i.key, None if i.score is None else round(i.score, 6)) for i in items]


def test_semantic_search_ranks_as_in_memory_store(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"]}
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        fill(store)
        fill(memory)
        for query in ("pizza", "dog", "cheese pizza", "chef", "nothing matches this"):
            for kw in ({}, {"limit": 2}, {"limit": 2, "offset": 1}, {"filter": {"kind": "food"}}):
                ours = store.search(("u1",), query=query, **kw)
                theirs = memory.search(("u1",), query=query, **kw)
                assert ranked(ours) == ranked(theirs), (query, kw)
        # the item put with index=False comes after the scored ones, without a score
        found = store.search(("u1",), query="cheese", limit=10)
        assert found[-1].key == "m6"
        assert found[-1].score is None


def test_fields_per_put_and_lists_of_texts(vector_dsn: str) -> None:
    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["title", "tags[*]"]}
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        for s in (store, memory):
            s.put(("d",), "a", {"title": "pizza night", "tags": ["cheese", "friends"], "body": "x"})
            s.put(("d",), "b", {"title": "vet visit", "tags": ["dog"], "body": "pizza"})
            s.put(("d",), "c", {"title": "notes", "body": "pizza pizza"}, index=["body"])
        for query in ("pizza", "dog", "friends", "cheese"):
            assert ranked(store.search(("d",), query=query)) == ranked(
                memory.search(("d",), query=query)
            ), query
        with psycopg.connect(vector_dsn) as conn:
            fields = conn.execute(
                "SELECT key, field FROM pgsaver_store_vectors ORDER BY key, field"
            ).fetchall()
        assert fields == [
            ("a", "tags[*].0"),
            ("a", "tags[*].1"),
            ("a", "title"),
            ("b", "tags[*]"),
            ("b", "title"),
            ("c", "body"),
        ]


def test_an_unchanged_field_is_not_embedded_again(vector_dsn: str) -> None:
    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["title", "body"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("d",), "a", {"title": "pizza", "body": "cheese"})
        store.put(("d",), "b", {"title": "dog", "body": "rex"})
        assert sorted(embed.texts) == ["cheese", "dog", "pizza", "rex"]
        embed.texts.clear()
        store.put(("d",), "a", {"title": "pizza", "body": "mozzarella"})  # one field changed
        assert embed.texts == ["mozzarella"]
        embed.texts.clear()
        store.put(("d",), "b", {"title": "dog", "body": "rex", "extra": 1})  # none changed
        assert embed.texts == []
        # one call for a whole batch
        calls = embed.calls
        store.batch(
            [
                *(
                    __import__("langgraph.store.base", fromlist=["PutOp"]).PutOp(
                        ("d",), f"k{i}", {"title": f"t{i}", "body": f"b{i}"}
                    )
                    for i in range(5)
                )
            ]
        )
        assert embed.calls == calls + 1
        # index=False takes an item's vectors away; a delete too
        store.put(("d",), "a", {"title": "pizza"}, index=False)
        store.delete(("d",), "b")
        with psycopg.connect(vector_dsn) as conn:
            keys = {k for (k,) in conn.execute("SELECT key FROM pgsaver_store_vectors")}
        assert keys == {f"k{i}" for i in range(5)}


def test_an_embedding_of_the_wrong_dimension_writes_nothing(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(dims=DIMS + 1), "fields": ["text"]}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        with pytest.raises(InvalidInputError, match="has 17 dimensions; the index has 16"):
            store.put(("d",), "a", {"text": "pizza"})
        assert store.get(("d",), "a") is None
        with pytest.raises(InvalidInputError, match="the query"):
            store.search(("d",), query="pizza")


@pytest.mark.parametrize(
    ("distance", "ann"),
    [
        ("l2", {"kind": "hnsw", "m": 8, "ef_construction": 32}),
        ("inner_product", {"kind": "ivfflat", "nlist": 4}),
        ("cosine", {"kind": "flat", "vector_type": "halfvec"}),
        ("cosine", {"kind": "hnsw", "vector_type": "halfvec"}),
    ],
)
def test_distances_index_kinds_and_halfvec(
    vector_dsn: str, distance: str, ann: dict[str, Any]
) -> None:
    index = {
        "dims": DIMS,
        "embed": Embedder(),
        "fields": ["text"],
        "distance_type": distance,
        "ann_index_config": ann,
    }
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        fill(store)
        found = store.search(("u1",), query="pizza cheese", limit=3)
        # the same ranking and scores as computed here, exactly, for each distance
        (q,) = Embedder()(["pizza cheese"])
        expected = []
        for key, value in MEMORIES.items():
            if key == "m6":
                continue
            (v,) = Embedder()([value["text"]])
            dot = sum(a * b for a, b in zip(q, v, strict=True))
            if distance == "inner_product":
                sim = dot
            elif distance == "l2":
                sim = -math.dist(q, v)
            else:
                sim = dot / (math.hypot(*q) * math.hypot(*v))
            expected.append((round(sim, 3), key))
        expected.sort(key=lambda x: (-x[0], x[1]))
        assert [(round(i.score or 0, 3), i.key) for i in found] == expected[:3]
    with psycopg.connect(vector_dsn) as conn:
        (column,) = conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
            "'pgsaver_store_vectors'::regclass AND attname = 'embedding'"
        ).fetchone() or ("",)
        methods = {
            m
            for (m,) in conn.execute(
                "SELECT am.amname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                "JOIN pg_am am ON am.oid = c.relam WHERE i.indrelid = "
                "'pgsaver_store_vectors'::regclass"
            )
        }
    assert column == f"{ann.get('vector_type', 'vector')}({DIMS})"
    assert ("hnsw" in methods) == (ann["kind"] == "hnsw")
    assert ("ivfflat" in methods) == (ann["kind"] == "ivfflat")


def test_another_dimension_than_the_table_has_is_refused(vector_dsn: str) -> None:
    with PostgresStore.from_conn_string(
        vector_dsn,
        index={"dims": DIMS, "embed": Embedder()},  # type: ignore[typeddict-item]
    ) as store:
        store.setup()
    with (
        PostgresStore.from_conn_string(
            vector_dsn,
            index={"dims": 8, "embed": Embedder(8)},  # type: ignore[typeddict-item]
        ) as other,
        pytest.raises(
            SchemaError, match=r"are vector\(16\); this store's index asks for vector\(8\)"
        ),
    ):
        other.setup()


def test_without_pgvector_everything_else_works(db_dsn: str) -> None:
    # the local Postgres 15 has no pgvector
    with psycopg.connect(db_dsn) as conn:
        available = conn.execute(
            "SELECT count(*) FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    if available != (0,):
        pytest.skip("this server has pgvector")
    index = {"dims": DIMS, "embed": Embedder()}
    with (
        PostgresStore.from_conn_string(db_dsn, index=index) as store,  # type: ignore[arg-type]
        pytest.raises(PgSaverError, match=r"needs the pgvector extension.*install pgvector"),
    ):
        store.setup()
    with PostgresStore.from_conn_string(db_dsn) as plain:
        plain.put(("a",), "k", {"text": "pizza"})
        assert plain.search(("a",), filter={"text": "pizza"})[0].key == "k"
        # without an index a query is ignored, as by the official store
        assert [i.key for i in plain.search(("a",), query="pizza")] == ["k"]


def test_bad_index_configs_are_refused() -> None:
    base = {"dims": DIMS, "embed": Embedder()}
    for bad, words in (
        ({**base, "dims": 0}, "dims"),
        ({"dims": DIMS}, "embed"),
        ({**base, "distance_type": "hamming"}, "distance_type"),
        ({**base, "ann_index_config": {"kind": "lsh"}}, "kind"),
        ({**base, "ann_index_config": {"kind": "hnsw", "m": "x"}}, "m must be an int"),
        ({**base, "dims": 3000}, "at most 2000"),
        ({**base, "fields": 3}, "fields"),
    ):
        with pytest.raises(InvalidInputError, match=words):
            PostgresStore.from_conn_string("postgresql://nowhere", index=bad)  # type: ignore[arg-type]


async def test_async_semantic_search(vector_dsn: str) -> None:
    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    async with AsyncPostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        await store.setup()
        for key, value in MEMORIES.items():
            await store.aput(("u",), key, value)
            await memory.aput(("u",), key, value)
        for query in ("pizza", "dog", "cheese"):
            ours = await store.asearch(("u",), query=query, limit=4)
            theirs = await memory.asearch(("u",), query=query, limit=4)
            assert ranked(ours) == ranked(theirs), query


def test_import_from_the_official_store_keeps_items_and_vectors(vector_dsn: str) -> None:
    from langgraph.store.postgres import PostgresStore as OfficialStore

    embed = Embedder()
    index = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    with OfficialStore.from_conn_string(vector_dsn, index=index) as official:  # type: ignore[arg-type]
        official.setup()
        for i in range(23):
            official.put(("users", f"u{i % 3}"), f"k{i}", {"text": f"pizza {i}", "n": i})
        official.put(("users", "u0"), "plain", {"text": "no vector"}, index=False)
        official.put(("ttl",), "t", {"text": "expires"}, ttl=60)
        want = {
            (tuple(i.namespace), i.key): (i.value, i.created_at, i.updated_at)
            for i in official.search((), limit=1000)
        }
        ranking = sorted(
            (-round(i.score or 0, 5), i.key)
            for i in official.search(("users",), query="pizza 7", limit=30)
        )
    seen: list[dict[str, int]] = []
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        counts = store.import_official(batch=10, progress=seen.append)
        assert counts["items"] == counts["imported"] == 25
        assert counts["vectors"] == 24  # every item but the one put with index=False
        assert len(seen) == 3
        got = {
            (tuple(i.namespace), i.key): (i.value, i.created_at, i.updated_at)
            for i in store.search((), limit=1000)
        }
        assert got == want
        ours = store.search(("users",), query="pizza 7", limit=30)
        # the same items and scores (ties may come in another order); the item without a vector
        # comes last, unscored, as from InMemoryStore (the official store leaves it out)
        assert ours[-1].key == "plain"
        assert ours[-1].score is None
        assert sorted((-round(i.score or 0, 5), i.key) for i in ours[:-1]) == ranking
        # again: nothing is imported twice, nothing changes
        again = store.import_official(batch=7)
        assert again["imported"] == 0
        assert again["items"] == 25
        calls = embed.calls
        redo = store.import_official(reembed=True)
        assert redo["embedded"] == 25  # every text again (the plain one too, now indexed)
        assert embed.calls > calls
        with pytest.raises(PgSaverError, match=r"no table nowhere\.store"):
            store.import_official(source_schema="nowhere")


def test_the_docs_semantic_search_example(vector_dsn: str) -> None:
    import uuid

    index = {"embed": Embedder(), "dims": DIMS, "fields": ["food_preference", "$"]}
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    namespace_for_memory = ("1", "memories")
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        for s in (store, memory):
            s.put(namespace_for_memory, "a", {"food_preference": "I like pizza"})
            s.put(
                namespace_for_memory,
                "b",
                {"food_preference": "I love Italian cuisine", "context": "Discussing dinner plans"},
                index=["food_preference"],
            )
            s.put(
                namespace_for_memory, "c", {"system_info": "Last updated: 2024-01-01"}, index=False
            )
        for query in ("What does the user like to eat?", "Italian dinner", "pizza"):
            ours = store.search(namespace_for_memory, query=query, limit=3)
            theirs = memory.search(namespace_for_memory, query=query, limit=3)
            assert ranked(ours) == ranked(theirs), query
        # stored but not searchable by meaning: found by a plain search, unscored by a query
        assert store.get(namespace_for_memory, "c") is not None
        assert [
            i.score for i in store.search(namespace_for_memory, query="updated") if i.key == "c"
        ] == [None]
        assert uuid  # the docs make keys with uuid4; fixed keys here keep the comparison exact


def _brute(query: str, items: dict[str, str], k: int) -> list[str]:
    (q,) = Embedder()([query])
    scored = []
    for key, text in items.items():
        (v,) = Embedder()([text])
        norm = math.hypot(*q) * math.hypot(*v)
        scored.append((-(sum(a * b for a, b in zip(q, v, strict=True)) / norm if norm else 0), key))
    return [key for _, key in sorted(scored)[:k]]


@pytest.mark.parametrize("kind", ["hnsw", "flat"])
def test_a_filter_that_only_far_items_pass_still_finds_them(vector_dsn: str, kind: str) -> None:
    index = {
        "dims": DIMS,
        "embed": Embedder(),
        "fields": ["text"],
        "ann_index_config": {"kind": kind},
    }
    memory = InMemoryStore(index=index)  # type: ignore[arg-type]
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        for s in (store, memory):
            s.batch(
                [
                    PutOp(("n",), f"c{i}", {"text": f"pizza cheese {i}", "tag": "common"})
                    for i in range(100)
                ]
                + [
                    PutOp(("n",), f"r{i}", {"text": f"dog cat bird {i}", "tag": "rare"})
                    for i in range(3)
                ]
                + [PutOp(("n",), f"u{i}", {"text": "x", "n": i % 2}, index=False) for i in range(6)]
            )
        for flt, limit in (({"tag": "rare"}, 10), ({"n": 1}, 3), (None, 5)):
            ours = store.search(("n",), query="pizza cheese", filter=flt, limit=limit)
            theirs = memory.search(("n",), query="pizza cheese", filter=flt, limit=limit)
            assert sorted(ranked(ours)) == sorted(ranked(theirs)), flt


def test_an_hnsw_search_under_a_small_prefix_is_complete(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"]}
    rng = __import__("random").Random(7)
    words = [
        "pizza",
        "cheese",
        "dog",
        "cat",
        "bird",
        "rex",
        "chef",
        "work",
        "travel",
        "music",
        "coffee",
        "tea",
        "book",
        "film",
    ]
    mine = {f"m{i}": " ".join(rng.choice(words) for _ in range(4)) for i in range(60)}
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        for start in range(0, 3000, 500):
            store.batch(
                [
                    PutOp(
                        ("other",), f"o{i}", {"text": " ".join(rng.choice(words) for _ in range(4))}
                    )
                    for i in range(start, start + 500)
                ]
            )
        store.batch([PutOp(("mine",), k, {"text": t}) for k, t in mine.items()])
        with psycopg.connect(vector_dsn, autocommit=True) as conn:
            conn.execute("ANALYZE")
        for query in ("pizza dog", "music coffee book"):
            found = store.search(("mine",), query=query, limit=30)
            assert len(found) == 30
            want = _brute(query, mine, 60)
            scores = {k: s for k, s in zip(want, range(60), strict=True)}
            # the 30 best (ties broken either way at the edge)
            assert max(scores[i.key] for i in found) < 30 + 10, query


def test_a_field_changed_by_another_writer_meanwhile_is_embedded_again(vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder(), "fields": ["title", "body"]}
    with (
        PostgresStore.from_conn_string(vector_dsn, index=index) as other,  # type: ignore[arg-type]
    ):
        other.setup()
        other.put(("r",), "k", {"title": "pizza", "body": "one"})

        class Racing(Embedder):
            def __call__(self, texts: Sequence[str]) -> list[list[float]]:
                if "two" in texts and not self.calls:
                    # between this writer reading the stored hashes and writing
                    other.put(("r",), "k", {"title": "dog", "body": "one"})
                return super().__call__(texts)

        racing = {**index, "embed": Racing()}
        with PostgresStore.from_conn_string(vector_dsn, index=racing) as store:  # type: ignore[arg-type]
            store.put(("r",), "k", {"title": "pizza", "body": "two"})
            item = store.get(("r",), "k")
            assert item is not None
            assert item.value == {"title": "pizza", "body": "two"}
            found = store.search(("r",), query="pizza", limit=1)
            assert found[0].score == pytest.approx(1.0)  # the title's vector is pizza's again


def test_an_import_leaves_an_item_already_here_alone(vector_dsn: str) -> None:
    from langgraph.store.postgres import PostgresStore as OfficialStore

    index = {"dims": DIMS, "embed": Embedder(), "fields": ["text"]}
    with OfficialStore.from_conn_string(vector_dsn, index=index) as official:  # type: ignore[arg-type]
        official.setup()
        official.put(("u",), "b", {"text": "dog"})
        official.put(("u",), "c", {"text": "cat"})
    with PostgresStore.from_conn_string(vector_dsn, index=index) as store:  # type: ignore[arg-type]
        store.setup()
        store.put(("u",), "b", {"text": "mine"}, index=False)
        counts = store.import_official()
        assert counts["imported"] == 1
        assert counts["vectors"] == 1
        item = store.get(("u",), "b")
        assert item is not None
        assert item.value == {"text": "mine"}
        found = {i.key: i.score for i in store.search(("u",), query="dog")}
        assert found["b"] is None  # no vector of the source's "dog" attached to it


def test_a_role_that_may_not_create_pgvector_is_told_so(plain_role_vector_dsn: str) -> None:
    index = {"dims": DIMS, "embed": Embedder()}
    with PostgresStore.from_conn_string(plain_role_vector_dsn, index=index) as store:  # type: ignore[arg-type]
        with pytest.raises(PgSaverError) as info:
            store.setup()
        assert type(info.value) is PgSaverError  # not a PrivilegeError naming table privileges
        assert "creating the pgvector extension needs a role allowed to" in str(info.value)
        assert "CREATE EXTENSION vector" in str(info.value)
    with PostgresStore.from_conn_string(plain_role_vector_dsn) as plain:  # the rest works
        plain.setup()
        plain.put(("a",), "k", {"text": "pizza"})
        assert plain.get(("a",), "k") is not None
