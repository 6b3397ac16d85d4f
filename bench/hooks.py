"""Claude Code hook latency: what the host waits for at SessionStart and at every capture.

    .venv/bin/python bench/hooks.py [--runs 30] [--plugins sqlite,crystals,...]

Runs the hooks exactly as Claude Code does (the installed command line through a shell, the event's
JSON on stdin) against a throwaway entity with the default plugins:

- cold: the first SessionStart of a session when no server runs (the hook starts one, detached, and
  waits for it), measured a few times, the server stopped in between;
- warm: SessionStart and capture (a Stop whose transcript grew by one prompt and one reply) once that
  server runs;
- baselines in the same run: the interpreter starting and exiting, with and without ``site`` (the floor
  of any Python hook; ours runs ``python -S``), and the same hooks with the server autostart off (each
  hook opens the stores itself: the old behaviour).

Targets: warm SessionStart p95 < 500 ms, warm capture p95 < 300 ms; cold start reported.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--cold-runs", type=int, default=3)
    ap.add_argument("--plugins", help="comma list (default: the default plugins that are installed)")
    args = ap.parse_args()

    from pps_claude_code.install import hooks_config

    from pps_core.plugins import default_plugins

    plugins = args.plugins or ",".join(default_plugins())
    import compileall

    import pps_claude_code

    # bytecode as `pip install` leaves it (PYTHONDONTWRITEBYTECODE would otherwise recompile every run)
    compileall.compile_dir(str(Path(pps_claude_code.__file__).parent), quiet=1)
    root = Path(tempfile.mkdtemp(prefix="pps-bench-hooks-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PPS_")}
    env.update(PPS_ROOT=str(root), PPS_CLAUDE_CODE_USER_NAME="Jeff", PPS_CLAUDE_CODE_SERVER_START_S="120",
               PPS_CLAUDE_CODE_TIMEOUT_S="120")
    subprocess.run([sys.executable, "-m", "pps_core.cli", "init", "--entity", "bench", "--plugins", plugins,
                    "--timezone", "UTC"], env=env, check=True, capture_output=True)
    home = root / "bench"
    config = hooks_config("bench", home)
    transcript = root / "session.jsonl"
    session = "bench-session"

    def grow(n: int) -> None:
        with transcript.open("a") as fh:
            for i in range(n):
                for role, text in (("user", f"prompt {i}: how is the csv export going?"),
                                   ("assistant", f"reply {i}: the export writes quoted fields now.")):
                    fh.write(json.dumps({"type": role, "uuid": f"{role}-{time.time_ns()}", "sessionId": session,
                                         "timestamp": "2026-03-14T09:00:00Z",
                                         "message": {"role": role, "content": [{"type": "text", "text": text}]}})
                             + "\n")

    grow(20)

    def hook(event: str, extra_env: dict | None = None, **body) -> tuple[float, str]:
        data = {"session_id": session, "transcript_path": str(transcript), "hook_event_name": event, **body}
        started = time.perf_counter()
        done = subprocess.run(config[event][0]["hooks"][0]["command"], shell=True, input=json.dumps(data),
                              capture_output=True, text=True, env={**env, **(extra_env or {})}, timeout=300)
        took = (time.perf_counter() - started) * 1000
        if "systemMessage" in done.stdout:
            raise RuntimeError(done.stdout)
        return took, done.stdout

    def stop_server() -> None:
        from pps_core.owner import read_owner

        owner = read_owner(home)
        if owner and owner.get("pid"):
            os.kill(owner["pid"], signal.SIGTERM)
            deadline = time.monotonic() + 60
            while read_owner(home) is not None and time.monotonic() < deadline:
                time.sleep(0.05)

    rows = []
    for label, flags in (("baseline: python -c pass", []), ("baseline: python -S -c pass", ["-S"])):
        floor = []
        for _ in range(args.runs):
            started = time.perf_counter()
            subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
            floor.append((time.perf_counter() - started) * 1000)
        rows.append((label, floor))
    floor = rows[0][1]

    direct = {"PPS_CLAUDE_CODE_AUTOSTART": "false"}
    n_direct = max(3, args.runs // 6)
    rows.append(("baseline: SessionStart, no server", [hook("SessionStart", direct, source="startup")[0]
                                                        for _ in range(n_direct)]))
    caps = []
    for _ in range(n_direct):
        grow(1)
        caps.append(hook("Stop", direct)[0])
    rows.append(("baseline: capture (Stop), no server", caps))

    cold = []
    for _ in range(args.cold_runs):
        stop_server()
        took, out = hook("SessionStart", source="startup")
        assert "additionalContext" in out, out
        cold.append(took)
    rows.append(("ours: SessionStart, cold (starts server)", cold))
    warm = [hook("SessionStart", source="resume")[0] for _ in range(args.runs)]
    rows.append(("ours: SessionStart, warm", warm))
    caps = []
    for _ in range(args.runs):
        grow(1)
        caps.append(hook("Stop")[0])
    rows.append(("ours: capture (Stop), warm", caps))
    stop_server()

    print(f"plugins: {plugins}; {args.runs} runs (baselines without a server: {n_direct})")
    print(f"{'measure':<44}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}   target")
    targets = {"ours: SessionStart, warm": "p95 < 500", "ours: capture (Stop), warm": "p95 < 300"}
    for name, values in rows:
        print(f"{name:<44}{statistics.median(values):>9.0f}{pct(values, 0.95):>9.0f}{max(values):>9.0f}   "
              f"{targets.get(name, '')}")
    base = statistics.median(rows[2][1])
    print(f"\nwarm SessionStart is {base / statistics.median(warm):.1f}x faster than without a server (p50); "
          f"interpreter floor p50 {statistics.median(floor):.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
