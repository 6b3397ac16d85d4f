"""``python -m pps_claude_code.hook <Event> [--entity NAME] [--home DIR] [--recall]``: what Claude Code runs.

Lean on purpose (no ``pps`` parser, no plugin discovery): the host waits on every hook.
"""

from __future__ import annotations

import os
import sys

CHOICE_FILE = "claude-code.json"


def parse(argv: list[str]) -> tuple[str, str | None, str | None, bool]:
    """``EVENT [--entity NAME] [--home DIR] [--recall]`` (by hand: argparse costs a warm hook ~20 ms)."""
    event, entity, home, recall = "", None, None, False
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--entity", "-e", "--home") and args:
            value = args.pop(0)
            entity, home = (value, home) if arg != "--home" else (entity, value)
        elif arg.startswith(("--entity=", "--home=")):
            key, _, value = arg.partition("=")
            entity, home = (value, home) if key == "--entity" else (entity, value)
        elif arg == "--recall":
            recall = True
        elif arg in ("-h", "--help"):
            print(__doc__.strip())
            raise SystemExit(0)
        elif not arg.startswith("-") and not event:
            event = arg
    return event, entity, home, recall


def main(argv: list[str] | None = None) -> int:
    event, entity, home, recall = parse(sys.argv[1:] if argv is None else argv)
    if not (entity or home or os.environ.get("PPS_ENTITY") or os.environ.get("PPS_HOME")):
        entity = default_entity()  # the Claude Code plugin's hooks name no entity: `pps setup` chose one
    raw = sys.stdin.read()
    from .fastpath import try_run

    if try_run(event, entity, home, raw, recall=recall, stdout=sys.stdout):
        return 0  # a server owns the entity: done without importing the kernel
    import io

    if sys.flags.no_site:  # started with -S for speed: the full path needs the installed packages
        import site

        site.main()
    from .hooks import run

    return run(event, entity, home, recall=recall, stdin=io.StringIO(raw))


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
