"""Read a statement as the server receives it: ``python -m langgraph_pg_saver.db.render NAME``.

A named query of ``sql/queries.sql`` is stored with its fragments and slots apart; reviewing a
change to a fragment means reading every statement that includes it. This prints the statement
whole, for one schema, with the slots a call would fill::

    python -m langgraph_pg_saver.db.render --list                     # every name, and its slots
    python -m langgraph_pg_saver.db.render get_tuple                  # a statement without slots
    python -m langgraph_pg_saver.db.render put where= blob_rows=2     # slots as NAME=VALUE
    python -m langgraph_pg_saver.db.render read_tuples where=thread,ns --schema tenant_a
    python -m langgraph_pg_saver.db.render --migration 6              # a migration's script

Slot values: ``where``/``scan`` a comma-separated list of predicates (empty: none), ``blob_rows``/
``write_rows`` a count of rows (0: arrays), ``walk`` a number, ``claim``/``parts`` true or false, ``status`` pending, idle or none, ``vtype``/
``vop``/``vdist`` a word. Parameters stay as psycopg writes them (``%(name)s``, ``%(name)b``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from langgraph_pg_saver.db.sql import (
    DEFAULT_SCHEMA,
    LIST_CAPS,
    ROW_SLOTS,
    VECTOR_SLOTS,
    WALKS,
    WHERE_FRAGMENTS,
    migrations,
    queries_for,
)
from langgraph_pg_saver.errors import InvalidSchemaNameError

_ACCEPTS = {
    "where": f"predicates among {','.join(WHERE_FRAGMENTS)} (comma-separated, may be empty)",
    "scan": f"predicates among {','.join(WHERE_FRAGMENTS)} (comma-separated, may be empty)",
    "walk": f"one of {', '.join(map(str, WALKS))}",
    "claim": "true or false",
    "parts": "true or false",
    "status": "pending, idle or none",
    "cap": f"one of {', '.join(map(str, LIST_CAPS))}",
    **{slot: "a count of rows (0: arrays)" for slot in ROW_SLOTS},
    **{slot: " or ".join(values) for slot, values in VECTOR_SLOTS.items()},
}


def slot_value(slot: str, text: str) -> Any:
    """A slot's value as ``Queries.render`` takes it, from its command-line text."""
    if slot in ("where", "scan"):
        return tuple(p for p in text.split(",") if p)
    if slot in ROW_SLOTS or slot in ("walk", "cap"):
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{slot} takes {_ACCEPTS[slot]}, not {text!r}") from None
    if slot in ("claim", "parts"):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{slot} takes true or false, not {text!r}")
        return text.lower() == "true"
    if slot == "status":
        if text.lower() not in ("pending", "idle", "none"):
            raise ValueError(f"status takes {_ACCEPTS[slot]}, not {text!r}")
        return None if text.lower() == "none" else text.lower()
    return text


def render(name: str, assignments: Sequence[str], schema: str = DEFAULT_SCHEMA) -> str:
    """Statement ``name`` for ``schema`` with its slots filled from ``NAME=VALUE`` texts."""
    q = queries_for(schema)
    if name not in q.names():
        raise KeyError(f"no statement named {name!r} in queries.sql (--list names them)")
    wanted = q.slots(name)
    given: dict[str, Any] = {}
    for item in assignments:
        slot, sep, text = item.partition("=")
        if not sep or slot not in wanted:
            raise ValueError(
                f"{name} takes the slots {wanted or 'none'}; {item!r} is not one of them"
            )
        given[slot] = slot_value(slot, text)
    missing = [s for s in wanted if s not in given]
    if missing:
        raise ValueError(
            f"{name} has slots to fill: "
            + "; ".join(f"{s}=<{_ACCEPTS.get(s, 'a value')}>" for s in missing)
        )
    return (q.render(name, **given) if wanted else q[name]).decode()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m langgraph_pg_saver.db.render",
        description="Print a statement of sql/queries.sql as the server receives it.",
    )
    parser.add_argument("name", nargs="?", help="the named query")
    parser.add_argument("slots", nargs="*", help="slot values, NAME=VALUE")
    parser.add_argument("--schema", default=DEFAULT_SCHEMA, help="the schema (default: public)")
    parser.add_argument("--list", action="store_true", help="list every statement and its slots")
    parser.add_argument("--migration", type=int, metavar="N", help="print migration N instead")
    args = parser.parse_args(argv)
    try:
        q = queries_for(args.schema)
        if args.list:
            for name in sorted(q.names()):
                slots = q.slots(name)
                print(f"{name}  {' '.join(f'{s}=' for s in slots)}".rstrip())
            return 0
        if args.migration is not None:
            found = [m for m in migrations() if m.version == args.migration]
            if not found:
                raise KeyError(f"no migration {args.migration} (there are 1..{len(migrations())})")
            print(q.migration(found[0]).decode())
            return 0
        if not args.name:
            parser.error("name a statement, or use --list or --migration N")
        print(render(args.name, args.slots, args.schema))
    except (KeyError, ValueError, InvalidSchemaNameError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
