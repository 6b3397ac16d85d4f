"""``python -m pps_claude_code.hook <Event> [--entity NAME] [--home DIR] [--recall]``: what Claude Code runs.

Lean on purpose (no ``pps`` parser, no plugin discovery): the host waits on every hook.
"""

from __future__ import annotations

import argparse
import os
import sys

CHOICE_FILE = "claude-code.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pps_claude_code.hook")
    parser.add_argument("event", nargs="?", default="", help="SessionStart, UserPromptSubmit, Stop, PreCompact, "
                                                             "SessionEnd (default: the input's hook_event_name)")
    parser.add_argument("--entity", "-e")
    parser.add_argument("--home")
    parser.add_argument("--recall", action="store_true")
    args, _unknown = parser.parse_known_args(argv)
    entity = args.entity
    if not (entity or args.home or os.environ.get("PPS_ENTITY") or os.environ.get("PPS_HOME")):
        entity = default_entity()  # the Claude Code plugin's hooks name no entity: `pps setup` chose one
    raw = sys.stdin.read()
    from .fastpath import try_run

    if try_run(args.event, entity, args.home, raw, recall=args.recall, stdout=sys.stdout):
        return 0  # a server owns the entity: done without importing the kernel
    import io

    if sys.flags.no_site:  # started with -S for speed: the full path needs the installed packages
        import site

        site.main()
    from .hooks import run

    return run(args.event, entity, args.home, recall=args.recall, stdin=io.StringIO(raw))


def default_entity() -> str | None:
    """The entity ``pps setup claude-code`` chose (``$PPS_ROOT/claude-code.json``), or None."""
    import json
    from pathlib import Path

    root = Path(os.environ.get("PPS_ROOT") or Path.home() / ".pps").expanduser()
    try:
        value = json.loads((root / CHOICE_FILE).read_text()).get("entity")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) and value else None


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
