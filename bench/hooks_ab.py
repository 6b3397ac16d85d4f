"""A/B of Claude Code's warm hooks, two source trees against one server in the same run.

    .venv/bin/python bench/hooks_ab.py --a /path/to/other/checkout [--runs 40]

Runs the fast path (a server owns the entity) as Claude Code does, the installed command line with the event's
JSON on stdin, alternating A (``--a``: another checkout, e.g. main's ``git worktree``) and B (this checkout), so
both see the same machine load: a warm SessionStart and a warm capture (Stop, nothing new in the transcript).
Prints p50/p95 per tree and B/A ratios, and ``python -S -c pass`` as the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def command(tree: Path, event: str, entity: str, home: Path) -> str:
    """The hook command of ``tree`` (its pps_core and its plugins' folders first on sys.path, as installed)."""
    paths = [str(tree / "plugins" / "claude_code"), str(tree / "plugins" / "hooks"), str(tree)]
    code = (f"import sys; sys.path[:0] = {paths!r}; from pps_claude_code.hook import main; sys.exit(main())")
    parts = [sys.executable, "-I", "-S", "-c", code, event, "--entity", entity, "--home", str(home)]
    return " ".join(shlex.quote(p) for p in parts)


def timed(cmd: str, body: dict, env: dict[str, str], cwd: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, shell=True, input=json.dumps(body), capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=60)
    took = (time.perf_counter() - started) * 1000
    if done.returncode != 0 or "systemMessage" in done.stdout:
        raise SystemExit(f"hook failed: {done.stdout} {done.stderr}")
    return took


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the other checkout (A); this one is B")
    ap.add_argument("--b", help="another tree for B (default: this checkout); a tree may also be one folder that holds "
                                "pps_core, pps_claude_code (and pps_hooks) side by side, as one site-packages does")
    ap.add_argument("--runs", type=int, default=40)
    args = ap.parse_args()
    a, b = Path(args.a).resolve(), Path(args.b).resolve() if args.b else HERE
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
        env.update(PPS_ROOT=str(root), HOME=str(root))
        from pps_core.testing.server import init_entity, start_server

        home = init_entity(root, "lyra", "sqlite,crystals,http")
        server = start_server(root, "--entity", "lyra", env=env)
        try:
            transcript = root / "t.jsonl"
            transcript.write_text("")
            body = {"session_id": "bench", "transcript_path": str(transcript), "cwd": str(root)}
            rows = {}
            for event in ("SessionStart", "Stop"):
                payload = {**body, "hook_event_name": event, **({"source": "startup"} if event == "SessionStart" else {})}
                cmds = {"A": command(a, event, "lyra", home), "B": command(b, event, "lyra", home)}
                for c in cmds.values():  # warm the page cache and the server's first answer
                    timed(c, payload, env, root)
                got: dict[str, list[float]] = {"A": [], "B": []}
                for _ in range(args.runs):
                    for side in ("A", "B"):
                        got[side].append(timed(cmds[side], payload, env, root))
                rows[event] = got
            floor = [timed(f"{shlex.quote(sys.executable)} -S -c pass", {}, env, root) for _ in range(args.runs)]
        finally:
            server.stop()

    def p(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]

    print(f"A = {a}\nB = {b}\n{args.runs} runs each, alternating; load average {os.getloadavg()[0]:.1f}")
    print(f"{'measure':34} {'A p50':>7} {'A p95':>7} {'B p50':>7} {'B p95':>7} {'B/A p50':>8}")
    print(f"{'python -S -c pass':34} {statistics.median(floor):7.0f} {p(floor, 95):7.0f}")
    for event, got in rows.items():
        name = "SessionStart, warm" if event == "SessionStart" else "capture (Stop), warm"
        ma, mb = statistics.median(got["A"]), statistics.median(got["B"])
        print(f"{name:34} {ma:7.0f} {p(got['A'], 95):7.0f} {mb:7.0f} {p(got['B'], 95):7.0f} {mb / ma:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
