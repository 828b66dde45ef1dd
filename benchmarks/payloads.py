"""What the workloads store, and the graphs that store it.

Channel values are what LangGraph stores for real applications: lists of a few messages
(``HumanMessage``/``AIMessage``, 200-2,000 characters of content each, with ids and, for the AI
messages, response and usage metadata) and nested dicts of a few KB. Plain strings appear only in
the workload named for them: the official saver inlines strings and numbers into its checkpoint
JSONB instead of writing a blob, so string-valued channels flatter a saver that writes blobs.

Every value is drawn from pools generated once from a seeded generator: building a message or a
few KB of text costs tens of microseconds of Python, which would otherwise be timed inside every
put and every graph superstep.
"""

from __future__ import annotations

import operator
import random
import string
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

rng = random.Random(7)
POOL_SIZE = 256  # values per kind; drawn at random

# ---------------------------------------------------------------------------- text

_WORDS = ["".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 9))) for _ in range(2000)]


def text(n: int) -> str:
    """About n characters of word salad (compresses roughly as prose does, unlike random letters)."""
    out: list[str] = []
    size = 0
    while size < n:
        word = rng.choice(_WORDS)
        out.append(word)
        size += len(word) + 1
    return " ".join(out)[:n]


def _id() -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def _message(kind: str, n: int) -> BaseMessage:
    if kind == "human":
        return HumanMessage(content=text(n), id=_id())
    return ai_message(n)


def ai_message(n: int, **extra: Any) -> AIMessage:
    """An AI message of about n characters, with the metadata a chat model returns (``extra``:
    more fields, such as ``tool_calls``)."""
    tokens = n // 4
    return AIMessage(
        content=text(n),
        id=f"run-{_id()}",
        response_metadata={"model_name": "gpt-4o-2024-08-06", "finish_reason": "stop"},
        usage_metadata={
            "input_tokens": 3 * tokens,
            "output_tokens": tokens,
            "total_tokens": 4 * tokens,
        },
        **extra,
    )


def _document(n_docs: int) -> dict[str, Any]:
    """A nested dict as graphs keep in state: a user profile, retrieved documents, flags."""
    return {
        "user": {
            "id": _id(),
            "name": f"{rng.choice(_WORDS)} {rng.choice(_WORDS)}",
            "locale": "en-US",
            "preferences": {"tone": rng.choice(_WORDS), "topics": rng.sample(_WORDS, 5)},
        },
        "retrieval": {
            "query": text(80),
            "documents": [
                {
                    "id": _id(),
                    "title": text(40),
                    "snippet": text(rng.randint(150, 400)),
                    "score": round(rng.random(), 4),
                    "metadata": {"source": rng.choice(_WORDS), "page": rng.randint(1, 300)},
                }
                for _ in range(n_docs)
            ],
        },
        "step": rng.randint(0, 50),
        "flags": {"escalate": rng.random() < 0.1, "cached": rng.random() < 0.5},
    }


def _message_list() -> list[BaseMessage]:
    kinds = ("human", "ai")
    start = rng.randrange(2)
    return [
        _message(kinds[(start + i) % 2], rng.randint(200, 2000)) for i in range(rng.randint(2, 4))
    ]


_POOLS: dict[str, list[Any]] = {}


def _pooled(kind: str, make: Callable[[], Any]) -> Any:
    pool = _POOLS.get(kind)
    if pool is None:
        pool = _POOLS[kind] = [make() for _ in range(POOL_SIZE)]
    return rng.choice(pool)


def messages() -> list[BaseMessage]:
    """A channel value: a list of 2-4 messages of 200-2,000 characters each (~1-6 KB)."""
    return _pooled("messages", _message_list)


def message() -> BaseMessage:
    """One message of 200-2,000 characters (a node's output)."""
    return _pooled("message", lambda: _message(rng.choice(("human", "ai")), rng.randint(200, 2000)))


def short_message() -> BaseMessage:
    """One AI message of ~200 characters (a DeltaChannel chat turn)."""
    return _pooled("short", lambda: _message("ai", 200))


def document() -> dict[str, Any]:
    """A channel value: a nested dict of ~2-4 KB."""
    return _pooled("document", lambda: _document(rng.randint(4, 9)))


def small_document() -> dict[str, Any]:
    """A nested dict of ~1 KB (a write)."""
    return _pooled("small_document", lambda: _document(1))


def plain_string(n: int = 2000) -> str:
    """A random n-character string (only for the plain-string workload)."""
    chars = string.ascii_letters + string.digits
    return _pooled(f"str{n}", lambda: "".join(rng.choices(chars, k=n)))


def channel_value(index: int) -> Any:
    """The value of channel ``index``: even channels hold message lists, odd ones dicts."""
    return messages() if index % 2 == 0 else document()


def string_value(index: int) -> Any:
    return plain_string(2000)


def small_value(index: int) -> Any:
    """The values of the many small threads that list(None, filter) searches."""
    return [short_message()] if index % 2 == 0 else small_document()


def three_writes() -> list[tuple[str, Any]]:
    """A node's writes: two messages (each in a list, as reducers take them) and a dict."""
    return [("messages", [message()]), ("k1", small_document()), ("k2", [message()])]


def warm() -> None:
    """Generate every pool before anything is timed."""
    for make in (messages, message, short_message, document, small_document, plain_string):
        make()


# ---------------------------------------------------------------------------- checkpoints


def make_checkpoint(values: dict[str, Any], versions: dict[str, Any], step: int) -> Any:
    return {
        "v": 4,
        "id": str(uuid6(clock_seq=step)),
        "ts": "2026-11-30T00:00:00+00:00",
        "channel_values": values,
        "channel_versions": versions,
        "versions_seen": {"node": {k: v for k, v in list(versions.items())[:4]}},
        "updated_channels": None,
    }


class Chain:
    """Checkpoints of one thread, one put at a time: the first stores every channel, each next one
    changes ``changed`` of them (so two savers' puts can be timed alternately). ``saver`` is anything
    with ``get_next_version``, ``put`` and ``put_writes`` (a saver, or a floor)."""

    def __init__(
        self,
        saver: Any,
        thread: str,
        *,
        channels: int = 12,
        changed: int = 2,
        value: Callable[[int], Any] = channel_value,
        writes: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self.saver, self.changed, self.value, self.writes = saver, changed, value, writes
        self.names = [f"ch{i}" for i in range(channels)]
        self.metadata = metadata or {}
        self.versions: dict[str, Any] = {}
        self.values: dict[str, Any] = {}
        self.config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        self.configs: list[Any] = []

    def step(self) -> float:
        """One put (plus the fixture's writes); returns the seconds the put took."""
        step = len(self.configs)
        touched = (
            range(len(self.names))
            if step == 0
            else rng.sample(range(len(self.names)), self.changed)
        )
        new_versions = {}
        for i in touched:
            ch = self.names[i]
            self.versions[ch] = self.saver.get_next_version(self.versions.get(ch), None)
            self.values[ch] = self.value(i)
            new_versions[ch] = self.versions[ch]
        cp = make_checkpoint(dict(self.values), dict(self.versions), step)
        md = {"source": "loop", "step": step, "parents": {}, **self.metadata}
        t0 = time.perf_counter()
        self.config = self.saver.put(self.config, cp, md, new_versions)
        elapsed = time.perf_counter() - t0
        self.configs.append(self.config)
        for w in range(self.writes):
            self.saver.put_writes(self.config, three_writes(), f"task-{w}")
        return elapsed


def put_chain(saver: Any, thread: str, n: int, **kwargs: Any) -> list[Any]:
    """n checkpoints on one thread (see Chain); returns their configs."""
    chain = Chain(saver, thread, **kwargs)
    for _ in range(n):
        chain.step()
    return chain.configs


# ---------------------------------------------------------------------------- graphs


class Wide(TypedDict, total=False):
    k0: Any
    k1: Any
    k2: Any
    k3: Any
    k4: Any
    k5: Any
    k6: Any
    k7: Any
    k8: Any
    k9: Any
    k10: Any
    k11: Any
    messages: Annotated[list[AnyMessage], operator.add]


GRAPH_SUPERSTEPS = 9  # an invoke of eight_nodes: the input, then eight nodes


def eight_nodes() -> Any:
    """Eight nodes in a row over twelve value channels and a message history: node i replaces a
    message list and a dict (channels i and i+3) and appends one message to the history."""
    g: Any = StateGraph(Wide)
    prev = START
    for i in range(8):

        def node(state: Wide, i: int = i) -> dict[str, Any]:
            j = (i + 3) % 12
            return {f"k{i}": channel_value(i), f"k{j}": channel_value(j), "messages": [message()]}

        g.add_node(f"n{i}", node)
        g.add_edge(prev, f"n{i}")
        prev = f"n{i}"
    g.add_edge(prev, END)
    return g


def graph_input() -> dict[str, Any]:
    return {"messages": [HumanMessage(content=text(300), id=_id())]}


def extend(state: list[Any], writes: Sequence[list[Any]]) -> list[Any]:
    """The DeltaChannel reducer: append every write's messages."""
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class Chat(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], DeltaChannel(extend)]
    turns: int
    goal: int


def delta_loop() -> Any:
    """One invoke runs ``goal`` supersteps, each appending a ~200-character AI message to a
    DeltaChannel."""
    g: Any = StateGraph(Chat)

    def talk(state: Chat) -> dict[str, Any]:
        return {"messages": [short_message()], "turns": state.get("turns", 0) + 1}

    g.add_node("talk", talk)
    g.add_edge(START, "talk")
    g.add_conditional_edges("talk", lambda s: "talk" if s["turns"] < s["goal"] else END)
    return g


def delta_input(steps: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(content="hi", id=_id())], "goal": steps, "turns": 0}
