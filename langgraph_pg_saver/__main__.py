"""``python -m langgraph_pg_saver`` and the ``langgraph-pg-saver`` console script."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from langgraph_pg_saver.cli import main as cli_main
    except ImportError as exc:  # the cli extra is not installed
        sys.stderr.write(
            f"error: the langgraph-pg-saver CLI needs its extra ({exc.name or exc} is missing): "
            "pip install 'langgraph-pg-saver[cli]'\n"
        )
        sys.exit(1)
    cli_main()


if __name__ == "__main__":
    main()
