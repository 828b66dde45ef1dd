"""The plumbing both products stand on: the driver twins and their policy, SQL loading and
rendering, migrations, retries, pools and connection settings, and the step protocol
(:class:`~langgraph_pg_saver.db.steps.Step`, :class:`~langgraph_pg_saver.db.steps.Report`).

Nothing here knows what a checkpoint or a store item is."""
