"""Real LangGraph graphs the tests compile with our savers (and with InMemorySaver as the reference)."""

from __future__ import annotations

import operator
import threading
from collections.abc import Sequence
from typing import Annotated, Any

from langgraph.channels.delta import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    foo: str
    bar: Annotated[list[str], operator.add]


def node_a(state: State) -> dict[str, Any]:
    return {"foo": "a", "bar": ["a"]}


def node_b(state: State) -> dict[str, Any]:
    return {"foo": "b", "bar": ["b"]}


def two_nodes() -> StateGraph[Any]:
    """The node_a → node_b example of LangGraph's persistence docs."""
    g: StateGraph[Any] = StateGraph(State)
    g.add_node(node_a)
    g.add_node(node_b)
    g.add_edge(START, "node_a")
    g.add_edge("node_a", "node_b")
    g.add_edge("node_b", END)
    return g


class ApprovalState(TypedDict):
    request: str
    answer: str


def ask(state: ApprovalState) -> dict[str, Any]:
    answer = interrupt({"question": f"approve {state['request']}?"})
    return {"answer": answer}


def approval() -> StateGraph[Any]:
    g: StateGraph[Any] = StateGraph(ApprovalState)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g


class FanState(TypedDict):
    log: Annotated[list[str], operator.add]


class Flaky:
    """Two sibling nodes in one superstep: ``good`` counts its runs, ``bad`` fails until fixed."""

    def __init__(self) -> None:
        self.good_runs = 0
        self.bad_fails = True
        self.good_done = threading.Event()

    def good(self, state: FanState) -> dict[str, Any]:
        self.good_runs += 1
        self.good_done.set()
        return {"log": ["good"]}

    def bad(self, state: FanState) -> dict[str, Any]:
        if self.bad_fails:
            # fail only once the sibling has finished, so its write is what the test is about
            self.good_done.wait(timeout=30)
            raise RuntimeError("bad node failed")
        return {"log": ["bad"]}

    def graph(self) -> StateGraph[Any]:
        g: StateGraph[Any] = StateGraph(FanState)
        g.add_node("good", self.good)
        g.add_node("bad", self.bad)
        g.add_edge(START, "good")
        g.add_edge(START, "bad")
        g.add_edge("good", END)
        g.add_edge("bad", END)
        return g


class Inner(TypedDict):
    foo: str
    inner_log: Annotated[list[str], operator.add]


def inner_step(state: Inner) -> dict[str, Any]:
    return {"foo": state["foo"] + "|inner", "inner_log": ["ran"]}


def _in_subgraph(state: type, name: str, node: Any) -> StateGraph[Any]:
    """A one-node graph run as the node "child" of an outer graph of the same state."""
    inner: StateGraph[Any] = StateGraph(state)
    inner.add_node(name, node)
    inner.add_edge(START, name)
    inner.add_edge(name, END)
    outer: StateGraph[Any] = StateGraph(state)
    outer.add_node("child", inner.compile())
    outer.add_edge(START, "child")
    outer.add_edge("child", END)
    return outer


def approval_in_subgraph() -> StateGraph[Any]:
    """The approval graph as a subgraph node: its interrupt lives in the child namespace."""
    return _in_subgraph(ApprovalState, "ask", ask)


def with_subgraph() -> StateGraph[Any]:
    return _in_subgraph(Inner, "inner_step", inner_step)


def _extend(state: list[str], writes: Sequence[list[str]]) -> list[str]:
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class DeltaState(TypedDict):
    messages: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]
    turns: int


def chat_turn(state: DeltaState) -> dict[str, Any]:
    n = state.get("turns", 0) + 1
    return {"messages": [f"reply {n}"], "turns": n}


def delta_chat() -> StateGraph[Any]:
    g: StateGraph[Any] = StateGraph(DeltaState)
    g.add_node("chat", chat_turn)
    g.add_edge(START, "chat")
    g.add_edge("chat", END)
    return g


class TwoDeltaState(TypedDict):
    a: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=3)]
    b: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=5)]
    n: int


def bump(state: TwoDeltaState) -> dict[str, Any]:
    n = state.get("n", 0) + 1
    out: dict[str, Any] = {"a": [f"a{n}"], "n": n}
    if n % 2 == 0:  # b is written every other turn: its snapshots fall at other steps than a's
        out["b"] = [f"b{n}"]
    return out


def echo(state: TwoDeltaState) -> dict[str, Any]:
    return {"a": [f"echo{state['n']}"]}


def two_delta() -> StateGraph[Any]:
    """Two DeltaChannels with different snapshot frequencies, written at different rates."""
    g: StateGraph[Any] = StateGraph(TwoDeltaState)
    g.add_node("bump", bump)
    g.add_node("echo", echo)
    g.add_edge(START, "bump")
    g.add_edge("bump", "echo")
    g.add_edge("echo", END)
    return g


class ResearchState(TypedDict):
    messages: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=4)]
    summary: str
    turn: int


class ResearchInner(TypedDict):
    findings: Annotated[list[str], DeltaChannel(_extend, snapshot_frequency=2)]
    summary: str
    turn: int


def _plan(state: ResearchState) -> dict[str, Any]:
    turn = state.get("turn", 0) + 1
    return {"messages": [f"plan {turn}"], "turn": turn}


def _search(state: ResearchInner) -> dict[str, Any]:
    return {"findings": [f"found {state['turn']}.{len(state.get('findings', []))}"]}


def _summarize(state: ResearchInner) -> dict[str, Any]:
    turn = state["turn"]
    approved = interrupt({"approve": turn}) if turn % 5 == 0 else "auto"
    return {"summary": f"summary {turn} ({approved}): {len(state.get('findings', []))}"}


def _reply(state: ResearchState) -> dict[str, Any]:
    return {"messages": [f"{state['summary']}; reply after {len(state['messages'])}"]}


def research_chat() -> StateGraph[Any]:
    """A chat whose every turn runs a subgraph ("research": two steps, its own DeltaChannel, an
    interrupt every fifth turn), between two root nodes; DeltaChannels with snapshots at both
    levels. Each turn leaves root checkpoints and a subgraph namespace of its own."""
    inner: StateGraph[Any] = StateGraph(ResearchInner)
    inner.add_node("search", _search)
    inner.add_node("summarize", _summarize)
    inner.add_edge(START, "search")
    inner.add_edge("search", "summarize")
    inner.add_edge("summarize", END)
    g: StateGraph[Any] = StateGraph(ResearchState)
    g.add_node("plan", _plan)
    g.add_node("research", inner.compile())
    g.add_node("reply", _reply)
    g.add_edge(START, "plan")
    g.add_edge("plan", "research")
    g.add_edge("research", "reply")
    g.add_edge("reply", END)
    return g


class MemoryState(TypedDict):
    log: Annotated[list[str], operator.add]


def _remember(state: MemoryState) -> dict[str, Any]:
    return {"log": [f"seen {len(state['log'])}"]}


def persistent_subgraph() -> StateGraph[Any]:
    """A subgraph compiled with checkpointer=True: one namespace ("child") across calls, whose
    state (the log it has seen) lives on from call to call."""
    inner: StateGraph[Any] = StateGraph(MemoryState)
    inner.add_node("remember", _remember)
    inner.add_edge(START, "remember")
    inner.add_edge("remember", END)
    outer: StateGraph[Any] = StateGraph(MemoryState)
    outer.add_node("child", inner.compile(checkpointer=True))
    outer.add_edge(START, "child")
    outer.add_edge("child", END)
    return outer
