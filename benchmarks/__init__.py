"""The side-by-side benchmark of langgraph-pg-saver and the official langgraph-checkpoint-postgres.

Run it as a module from the repository root: ``python -m benchmarks.bench --help``.

- ``bench``: the entry point (options, the server, the rounds);
- ``configs``: the three ways both savers are connected (same pool, defaults, pooler mode);
- ``payloads``: what the workloads store (message lists and dicts, as LangGraph stores them) and
  the graphs;
- ``workloads``: the fixtures and the timed workloads, interleaved with their floors;
- ``floors``: what no Postgres saver on psycopg can beat, measured in the same rounds;
- ``report``: medians and ratios, the Markdown tables, the results files, and comparing two of them.

It uses only the public API of ``langgraph_pg_saver``, so it can measure an older checkout (see
``benchmarks/results/README.md``).
"""
