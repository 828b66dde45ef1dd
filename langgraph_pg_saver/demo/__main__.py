"""``python -m langgraph_pg_saver.demo``: the demo's entry point."""

from langgraph_pg_saver.demo.tour import main

raise SystemExit(main())
