"""``langgraph-pg-saver``: the ops command line (``pip install 'langgraph-pg-saver[cli]'``).

Built on the sync API (PostgresSaver) and the reports of :mod:`langgraph_pg_saver.ops`, which go
through the saver's driver. Exit codes: 0 success, 1 failure (the error on one line; ``-v`` adds
its causes), 2 usage error, 130 interrupted (Ctrl-C), 143 stopped by SIGTERM (as on Ctrl-C: the
batch in flight rolled back, the resume hint printed). ``--json`` on every reading command prints one JSON
document on stdout.

Here: the group, its options and the entry point. ``_common``: what the commands share;
``health`` (setup, status, doctor), ``reading`` (threads, history, show), ``lifecycle`` (prune,
copy-thread, delete-thread, delete-runs, reencrypt), ``importing`` (import-official).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import click
import psycopg

from langgraph_pg_saver.cli import health, importing, lifecycle, reading
from langgraph_pg_saver.cli._common import (
    Ctx,
    Failure,
    _masked,
    duration,
    fail,
    stop_code,
    stop_on_sigterm,
)
from langgraph_pg_saver.db.sql import DEFAULT_SCHEMA
from langgraph_pg_saver.errors import PgSaverError
from langgraph_pg_saver.ops import next_nodes

__all__ = ["Failure", "_masked", "duration", "main", "main_group", "next_nodes"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--dsn",
    help="Postgres connection string; default $LANGGRAPH_PG_DSN, else libpq's PG* variables.",
)
@click.option(
    "--schema",
    default=lambda: os.environ.get("LANGGRAPH_PG_SCHEMA", DEFAULT_SCHEMA),
    show_default="public, or $LANGGRAPH_PG_SCHEMA",
    help="The schema of the saver's tables.",
)
@click.option("-v", "--verbose", is_flag=True, help="On failure, print the chain of causes.")
@click.version_option(package_name="langgraph-pg-saver")
@click.pass_context
def main_group(ctx: click.Context, dsn: str | None, schema: str, verbose: bool) -> None:
    """Operate a langgraph-pg-saver database: schema, health, growth, threads, lifecycle.

    The options here (--dsn, --schema, -v) go before the command:
    langgraph-pg-saver --dsn postgresql://... status
    """
    ctx.obj = Ctx(dsn, schema, verbose)


for _command in (
    health.setup,
    health.doctor,
    health.status,
    reading.threads,
    reading.history,
    reading.show,
    lifecycle.prune,
    lifecycle.copy_thread,
    lifecycle.delete_thread,
    lifecycle.delete_runs,
    importing.import_official,
    lifecycle.reencrypt,
):
    main_group.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """The console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    verbose = "-v" in args or "--verbose" in args
    previous = stop_on_sigterm()
    try:
        main_group.main(args=args, prog_name="langgraph-pg-saver", standalone_mode=False)
    except click.exceptions.Abort as exc:
        # click turns a Ctrl-C (at a prompt, or anywhere its main sees it) into Abort
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, KeyboardInterrupt):
            click.echo("interrupted", err=True)
            sys.exit(stop_code(cause))
        click.echo("aborted", err=True)
        sys.exit(1)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:
        click.echo("interrupted", err=True)
        sys.exit(stop_code(exc))
    except (Failure, PgSaverError, psycopg.Error, OSError) as exc:
        fail(exc, verbose)
    finally:
        if previous is not None:  # main() called in a process of the caller's (the demo)
            import signal

            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    main()
