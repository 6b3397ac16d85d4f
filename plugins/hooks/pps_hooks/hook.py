"""``python -I -m pps_hooks.hook --host NAME EVENT --entity NAME --home DIR``: what a host runs (``pps setup``
writes it into the host's config). Reads the event's JSON on stdin, always exits 0 (:mod:`pps_hooks.work`)."""

from __future__ import annotations

import sys


def parse(argv: list[str]) -> dict[str, str | None]:
    found: dict[str, str | None] = {"host": None, "event": "", "entity": None, "home": None}
    args = list(argv)
    while args:
        arg = args.pop(0)
        if arg in ("--host", "--entity", "--home") and args:
            found[arg[2:]] = args.pop(0)
        elif arg.startswith(("--host=", "--entity=", "--home=")):
            key, _, value = arg.partition("=")
            found[key[2:]] = value
        elif arg in ("-h", "--help"):
            print(__doc__.strip())
            raise SystemExit(0)
        elif not arg.startswith("-") and not found["event"]:
            found["event"] = arg
    return found


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    from .work import run

    return run(str(args["host"] or ""), str(args["event"] or ""), args["entity"], args["home"],
               stdin=sys.stdin, stdout=sys.stdout)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
