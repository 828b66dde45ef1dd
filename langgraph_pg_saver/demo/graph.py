"""The demo's assistant: a deterministic graph (no model, no API key) with DeltaChannel messages, an
approval interrupt, and memories in the store through a hashed-word embedding."""

from __future__ import annotations

import hashlib
import math
import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import NotRequired, TypedDict

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.store.store import PostgresStore

DEFAULT_DATA_DIR = (
    Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    / "langgraph-pg-saver"
    / "demo-pg"
)
THREAD = "demo-chat"
USER = "ada"
MEMORIES = ("memories", USER)
DIMS = 256
#: what the store knows before the first run
SEED_MEMORIES = {
    "cat": "my cat is called Turing",
    "tea": "I drink green tea, never coffee",
    "team": "the team meets on Tuesdays at ten",
}
#: one new fact per run, saved only once the user approves it (the interrupt), and its question
FACTS = (
    ("sister", "my sister lives in Lisbon", "where does my sister live?"),
    ("allergy", "I am allergic to peanuts", "which food am I allergic to?"),
    ("editor", "my favourite editor is vim", "which editor do I like?"),
    ("running", "I run on Sunday mornings", "when do I go running?"),
)
STOP_WORDS = frozenset(
    [
        "a",
        "am",
        "an",
        "and",
        "are",
        "at",
        "do",
        "does",
        "for",
        "go",
        "i",
        "in",
        "is",
        "it",
        "me",
        "my",
        "of",
        "on",
        "the",
        "to",
        "what",
        "when",
        "where",
        "which",
        "who",
    ]
)


class DemoError(Exception):
    """A message for the user, printed without a traceback."""


# --------------------------------------------------------------------------- the assistant


def words(text: str) -> list[str]:
    """Lower-case words without stop words, a plural or third-person 's' cut off."""
    out = []
    for w in re.findall(r"[a-z0-9']+", text.lower()):
        w = w.removesuffix("'s").strip("'")
        if not w or w in STOP_WORDS:
            continue
        out.append(w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic embedding: hashed words, normalized (cosine = shared words)."""
    vectors = []
    for text in texts:
        v = [0.0] * DIMS
        for w in words(text):
            v[
                int.from_bytes(hashlib.blake2b(w.encode(), digest_size=4).digest(), "big") % DIMS
            ] += 1
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        vectors.append([x / norm for x in v])
    return vectors


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def recall(store: PostgresStore, query: str, *, semantic: bool, limit: int = 3) -> list[Any]:
    """The memories nearest to ``query``: pgvector's ranking, or (on a server without pgvector)
    the same embedding scored here, over every memory."""
    if semantic:
        return list(store.search(MEMORIES, query=query, limit=limit))
    qv = embed([query])[0]
    items = list(store.search(MEMORIES, limit=1000))
    for item in items:
        item.score = round(cosine(qv, embed([item.value["text"]])[0]), 4)
    return sorted((i for i in items if i.score), key=lambda i: -(i.score or 0.0))[:limit]


def add_message_batches(state: list[AnyMessage], batches: Sequence[Any]) -> list[AnyMessage]:
    """The messages' reducer: a DeltaChannel folds a batch of writes at once."""
    out: Any = state
    for batch in batches:
        out = add_messages(out, batch)
    return list(out)


class Chat(TypedDict):
    # only each step's new messages are stored, with a full snapshot every 4 updates
    messages: Annotated[list[AnyMessage], DeltaChannel(add_message_batches, snapshot_frequency=4)]
    turns: NotRequired[int]
    pending: NotRequired[str | None]


def build_graph(checkpointer: PostgresSaver, store: PostgresStore, *, semantic: bool) -> Any:
    """START -> assistant -> (approve ->) END; ``messages`` is a DeltaChannel."""

    def reply(text: str) -> AIMessage:
        return AIMessage(text, id=f"ai-{uuid.uuid4().hex[:12]}")

    def assistant(state: Chat) -> dict[str, Any]:
        turns = state.get("turns", 0) + 1
        said = state["messages"][-1].content
        text = said if isinstance(said, str) else str(said)
        if text.lower().startswith("remember ") or text.lower() == "remember":
            fact = text[len("remember ") :].strip().rstrip(".")
            if not fact:
                return {"turns": turns, "pending": None, "messages": [reply("Remember what?")]}
            return {"turns": turns, "pending": fact}
        if text.rstrip().endswith("?"):
            found = recall(store, text, semantic=semantic, limit=1)
            if found and (found[0].score or 0) > 0.2:
                answer = f"From long-term memory ({found[0].score:.2f}): {found[0].value['text']}."
            else:
                answer = "I have no memory of that."
            return {"turns": turns, "pending": None, "messages": [reply(answer)]}
        humans = [m for m in state["messages"] if isinstance(m, HumanMessage)]
        answer = (
            f"Noted (turn {turns}): {len(state['messages']) + 1} messages here, the first"
            f" {humans[0].content!r}."
        )
        return {"turns": turns, "pending": None, "messages": [reply(answer)]}

    def after_assistant(state: Chat) -> str:
        return "approve" if state.get("pending") else END

    def approve(state: Chat) -> dict[str, Any]:
        fact = state["pending"] or ""
        answer = interrupt({"question": f"Save {fact!r} to long-term memory?", "fact": fact})
        if str(answer).strip().lower() in ("y", "yes"):
            key = "-".join(words(fact))[:40] or "fact"
            store.put(MEMORIES, key, {"text": fact, "source": "approved"})
            text = f"Saved to long-term memory: {fact}."
        else:
            text = "Not saved."
        return {"pending": None, "messages": [reply(text)]}

    g: StateGraph[Any] = StateGraph(Chat)
    g.add_node("assistant", assistant)
    g.add_node("approve", approve)
    g.add_edge(START, "assistant")
    g.add_conditional_edges("assistant", after_assistant, ["approve", END])
    g.add_edge("approve", END)
    return g.compile(checkpointer=checkpointer, store=store)


def human(text: str) -> HumanMessage:
    return HumanMessage(text, id=f"you-{uuid.uuid4().hex[:12]}")
