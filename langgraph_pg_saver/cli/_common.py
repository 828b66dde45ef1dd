"""What the commands share: the context (DSN, schema, the saver), options, output (JSON, tables,
the progress bar, reports), the plan-and-ask protocol of destructive commands, and how a failure
is printed."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any, NoReturn, TypeVar

import click
import psycopg
from langgraph.checkpoint.serde.base import SerializerProtocol

from langgraph_pg_saver.checkpoint.saver import PostgresSaver
from langgraph_pg_saver.codec.crypto import KeyringSerializer
from langgraph_pg_saver.db.pool import mask_dsn
from langgraph_pg_saver.db.steps import Report
from langgraph_pg_saver.errors import PgSaverError
from langgraph_pg_saver.ops import ThreadRow, one_line
from langgraph_pg_saver.ops.reports import human_bytes

F = TypeVar("F", bound=Callable[..., Any])

#: how long a value ``show`` prints may be, in characters (``--width``)
SHOW_WIDTH = 160
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class Failure(Exception):
    """A failure to report on one line (exit code 1)."""


# --------------------------------------------------------------------------- options and context


class Ctx:
    def __init__(self, dsn: str | None, schema: str, verbose: bool) -> None:
        self.dsn = dsn if dsn is not None else os.environ.get("LANGGRAPH_PG_DSN", "")
        self.schema = schema
        self.verbose = verbose
        self.serde: SerializerProtocol | None = None
        self.named = False  # the database reached by libpq's defaults was named on stderr

    @contextmanager
    def saver(self, *, check: bool = True, **kw: Any) -> Iterator[PostgresSaver]:
        """The saver every command works through; ``check``: the schema must be current (the
        saver's own check, which names a missing or outdated schema before anything else)."""
        # a bare connection first, closed at once: a bad DSN or password fails now, with the
        # server's words, rather than after the pool's timeout
        kwargs: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self.dsn and "PGCONNECT_TIMEOUT" not in os.environ:
            kwargs["connect_timeout"] = 10
        with psycopg.connect(self.dsn, **kwargs) as probe:
            if not self.dsn and not self.named:
                # no --dsn nor $LANGGRAPH_PG_DSN: say which database libpq's defaults reached
                info = probe.info
                where = info.host if info.host.startswith("/") else f"{info.host}:{info.port}"
                click.echo(
                    f"no --dsn or $LANGGRAPH_PG_DSN: using {where} database {info.dbname!r} as "
                    f"{info.user!r} (libpq's defaults and PG* variables)",
                    err=True,
                )
                self.named = True
        with PostgresSaver.from_conn_string(
            self.dsn, schema=self.schema, serde=self.serde, min_size=1, max_size=2, **kw
        ) as saver:
            if check:
                saver.setup(check=True)
            yield saver


pass_ctx = click.make_pass_decorator(Ctx)


def duration(value: str) -> timedelta:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w``."""
    m = _DURATION_RE.match(value)
    if m is None:
        raise click.BadParameter(f"{value!r} is not a duration like 30d, 12h, 90m, 45s or 2w")
    return timedelta(**{_UNITS[m.group(2)]: float(m.group(1))})


def parse_duration(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> timedelta | None:
    return None if value is None else duration(value)


def parse_filters(
    ctx: click.Context, param: click.Parameter, values: Sequence[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{item!r} is not key=value")
        if key in out:
            raise click.BadParameter(f"key {key!r} is given twice (each key takes one value)")
        try:
            out[key] = json.loads(raw)  # 3, true, null, "quoted", [..]
        except ValueError:
            out[key] = raw  # a bare word is a string
    return out


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(f)


def yes_option(f: F) -> F:
    """``--yes``: a destructive command does not ask first (see :func:`asks`)."""
    return click.option(
        "--yes", "-y", is_flag=True, help="Do not ask for confirmation on a terminal."
    )(f)


def missing_ok_option(others: str) -> Callable[[F], F]:
    return click.option(
        "--missing-ok",
        is_flag=True,
        help="A given thread id that has no checkpoints is named in a warning and the command "
        f"goes on to {others}; without it, such an id fails the command (exit 1) and nothing "
        "changes.",
    )


def keys_options(f: F) -> F:
    """The KeyringSerializer of the commands that decode or reseal values."""
    f = click.option(
        "--keys-file",
        type=click.Path(exists=True, dir_okay=False),
        help="JSON {key_id: key} of a KeyringSerializer (keys as hex, or base64:...); "
        "else $LANGGRAPH_PG_KEYS holds the same JSON. The first is the current key.",
    )(f)
    f = click.option("--current", help="The key id new values are sealed with.")(f)
    f = click.option(
        "--no-strict", is_flag=True, help="Read values stored unencrypted (while converting)."
    )(f)
    return f


def _key_bytes(key_id: str, text: object) -> bytes:
    if not isinstance(text, str):
        raise Failure(f"key {key_id!r}: expected a string of hex or base64:..., not {text!r}")
    try:
        if text.startswith("base64:"):
            return base64.b64decode(text[7:], validate=True)
        return bytes.fromhex(text.removeprefix("hex:"))
    except (ValueError, binascii.Error):
        raise Failure(f"key {key_id!r} is neither hex nor base64:...") from None


def load_serde(
    keys_file: str | None, current: str | None, no_strict: bool
) -> KeyringSerializer | None:
    text: str | None
    if keys_file is not None:
        with open(keys_file, encoding="utf-8") as fh:
            text, where = fh.read(), keys_file
    else:
        text, where = os.environ.get("LANGGRAPH_PG_KEYS"), "$LANGGRAPH_PG_KEYS"
    if not text:
        return None
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise Failure(f"{where} is not JSON ({exc})") from None
    if not isinstance(raw, dict) or not raw:
        raise Failure(f"{where} must be a JSON object of key ids to keys")
    keys = [(str(k), _key_bytes(str(k), v)) for k, v in raw.items()]
    try:
        return KeyringSerializer(keys, current=current, strict=not no_strict)
    except (TypeError, ValueError) as exc:
        raise Failure(f"{where}: {exc}") from None


# --------------------------------------------------------------------------- output


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, default=_json_default, ensure_ascii=False))


def _json_default(obj: Any) -> Any:
    if isinstance(obj, datetime):
        return obj.isoformat()
    if isinstance(obj, (bytes, bytearray)):
        return {"bytes": len(obj)}
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump()
    return repr(obj)


def when(value: datetime | None) -> str:
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S%z")


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=title, show_lines=False)
    for i, c in enumerate(columns):
        t.add_column(c, justify="right" if i and _numeric(rows, i) else "left", overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    # a terminal's width; piped or redirected, wide enough that ids do not wrap
    Console(soft_wrap=False, width=None if sys.stdout.isatty() else 200).print(t)


def _numeric(rows: Sequence[Sequence[Any]], i: int) -> bool:
    return bool(rows) and all(isinstance(r[i], (int, float)) for r in rows if r[i] is not None)


def short_json(value: Any, width: int) -> str:
    text = json.dumps(value, default=_json_default, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def short(value: Any, width: int) -> str:
    text = repr(value)
    if width and len(text) > width:
        return text[: width - 1] + f"… ({len(text)} chars)"
    return text


# --------------------------------------------------------------------------- stopping


class Terminated(KeyboardInterrupt):
    """SIGTERM (what Kubernetes and systemd send before they kill): the command stops as on
    Ctrl-C (the batch in flight rolled back, the resume hint printed), exit 143."""


def _terminate(signum: int, frame: object) -> None:
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise Terminated


def stop_on_sigterm() -> Any:
    """SIGTERM raises ``Terminated`` in the main thread (where the command runs); returns the
    handler it replaced (None outside the main thread, where nothing is installed)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, _terminate)


def stop_code(exc: BaseException) -> int:
    """The exit code of a command stopped by a signal: 143 for SIGTERM, 130 for Ctrl-C."""
    return 143 if isinstance(exc, Terminated) else 130


# --------------------------------------------------------------------------- progress and reports


def resume_hint(last: str | None) -> str:
    if last is None:
        return "Run the same command again."
    args = _masked(sys.argv[1:])
    for i, a in enumerate(args):
        if a == "--start-after" and i + 1 < len(args):
            del args[i : i + 2]
            break
        if a.startswith("--start-after="):
            del args[i]
            break
    quoted = " ".join(shlex.quote(a) for a in args)
    return (
        f"Resume with: langgraph-pg-saver {quoted} --start-after {shlex.quote(last)} "
        "(or run the same command again: what is done is found done)"
    )


def _masked(argv: Sequence[str]) -> list[str]:
    """The arguments with a --dsn's password hidden (the hint may go to a log)."""
    out = list(argv)
    for i, a in enumerate(out):
        if a == "--dsn" and i + 1 < len(out):
            out[i + 1] = _mask_dsn(out[i + 1])
        elif a.startswith("--dsn="):
            out[i] = "--dsn=" + _mask_dsn(a[6:])
    return out


def _mask_dsn(dsn: str) -> str:
    return mask_dsn(dsn, unreadable="'<the same DSN>'")


class Progress:
    """A rich progress bar on a terminal; plain log lines on stderr otherwise."""

    def __init__(
        self,
        interactive: bool,
        total: int | None,
        thread_batch: int,
        label: str = "prune",
        verb: str = "removed",
    ) -> None:
        self.label, self.verb = label, verb
        self.last: Report | None = None
        self.thread_batch = thread_batch
        self.total = total
        self.calls = 0
        self.bar: Any = None
        if interactive:
            from rich.console import Console
            from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(
                TextColumn(f"[bold]{label}[/bold]"),
                BarColumn(),
                TextColumn("{task.completed:,.0f}/{task.total:,.0f} threads" if total else ""),
                TextColumn("{task.fields[info]}"),
                TimeElapsedColumn(),
                transient=False,
                console=Console(stderr=True),  # stdout is for the report (--json)
            )
            self.bar.start()
            self.task = self.bar.add_task("prune", total=total, info="")

    def update(self, report: Report) -> None:
        self.last = report
        self.calls += 1
        info = (
            f"so far {report.checkpoints:,} checkpoints, {report.writes:,} writes, "
            f"{report.blobs:,} blobs {self.verb}; last thread {report.last_thread_id!r}"
        )
        if self.bar is not None:
            walked = self.calls * self.thread_batch
            if self.total is not None:
                walked = min(walked, self.total)
            # short enough for an 80-column terminal beside the bar and the counts
            brief = f"{report.checkpoints:,} checkpoints {self.verb}"
            self.bar.update(self.task, completed=walked, info=brief)
        else:
            click.echo(f"{self.label}: thread batch {self.calls} done; {info}", err=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


def print_report(report: Report, as_json: bool, verb: str, *, err: bool = False) -> None:
    if as_json:
        emit_json(report.as_dict())
        return
    click.echo(
        f"{verb} {plural(report.checkpoints, 'checkpoint')}, {plural(report.writes, 'write')}, "
        f"{plural(report.blobs, 'blob')}"
        + (f" ({human_bytes(report.bytes)})" if report.bytes else "")
        + f" of {plural(report.threads, 'thread')}",
        err=err,
    )


# --------------------------------------------------------------------------- destructive commands
# The plan, the question and the refusal of unknown ids (the protocol: cli/lifecycle.py).

#: what a dry run adds after naming an unknown id (without --missing-ok, the run would refuse)
WOULD_REFUSE = ": the command would change nothing (or pass --missing-ok)"


def asks(yes: bool) -> bool:
    """Whether a destructive command asks before it acts: stdin is a terminal, and no --yes."""
    return not yes and sys.stdin.isatty()


def no_checkpoints(ids: Sequence[str]) -> str:
    names = ", ".join(repr(t) for t in ids)
    return (
        f"thread {names} has no checkpoints"
        if len(ids) == 1
        else f"threads {names} have no checkpoints"
    )


def name_missing(
    report: Report,
    missing_ok: bool,
    consequence: str,
    describe: Callable[[list[str]], str] = no_checkpoints,
) -> None:
    """Name on stderr the ids of ``report.missing`` (thread ids; run ids with ``describe=
    delete-runs's describer): a warning with ``missing_ok``, else an error (exit 1) followed by
    ``consequence``."""
    if not report.missing:
        return
    if missing_ok:
        click.echo(f"warning: {describe(report.missing)} (skipped)", err=True)
        return
    click.echo(f"error: {describe(report.missing)}{consequence}", err=True)
    sys.exit(1)


def refuse(plan: Report, as_json: bool, consequence: str) -> NoReturn:
    """Unknown ids, refused before anything changed: the plan (with --json), the ids named on
    stderr, exit 1."""
    if as_json:
        emit_json(plan.as_dict())
    click.echo(f"error: {no_checkpoints(plan.missing)}{consequence}", err=True)
    sys.exit(1)


#: what a refusal says where --missing-ok would go on
NOTHING_DELETED = ": nothing was {} (pass --missing-ok to go on with the others)"


def show_plan(plan: Report, verb: str) -> None:
    """The plan on stderr, before the question."""
    print_report(plan, False, verb, err=True)
    if plan.missing:
        click.echo(f"  {no_checkpoints(plan.missing)}: skipped", err=True)


# --------------------------------------------------------------------------- failures


def fail(exc: BaseException, verbose: bool) -> NoReturn:
    """The error on one line (our errors' hints in the command line's words), exit 1; with
    ``verbose``, its chain of causes."""
    text = " ".join(exc.cli_message().split()) if isinstance(exc, PgSaverError) else ""
    click.echo(f"error: {text or one_line(exc)}", err=True)
    if verbose:
        cause = exc.__cause__ or exc.__context__
        while cause is not None:
            click.echo(f"  caused by {type(cause).__name__}: {one_line(cause)}", err=True)
            cause = cause.__cause__ or cause.__context__
    sys.exit(1)


def thread_table(rows: Sequence[ThreadRow]) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The columns and rows of a table of threads (status, threads)."""
    return (
        ["thread", "checkpoints", "size", "last activity"],
        [(r.thread_id, r.checkpoints, human_bytes(r.bytes), when(r.last_activity)) for r in rows],
    )
