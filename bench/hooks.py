"""Claude Code hook latency: what the host waits for at SessionStart, at each prompt and at every capture.

    .venv/bin/python bench/hooks.py [--runs 30] [--cold-runs 8] [--load 4] [--plugins sqlite,crystals,...]

Runs the hooks exactly as Claude Code does (the installed command line through a shell, the event's
JSON on stdin) against a throwaway entity with the default plugins:

- cold: the first SessionStart of a session when no server runs (it answers from a glance: the layers that
  open at once, read-only; then starts the server, detached), and the first prompt right after it
  (UserPromptSubmit with the per-prompt recall, while that server warms up), the server stopped in between;
  the same cold SessionStart with ``[claude_code] glance = false`` (it waits for the server: the old behaviour)
  is the baseline;
- warm: SessionStart and capture (a Stop whose transcript grew by one prompt and one reply) once that
  server runs;
- baselines in the same run: the interpreter starting and exiting, with and without ``site`` (the floor
  of any Python hook; ours runs ``python -S``), and the same hooks with the server autostart off (each
  hook opens the stores itself: the old behaviour).

Each phase runs idle and, with ``--load N``, again with N busy processes of our own (the load average is
printed with each phase: the machine may be shared).

Targets: cold SessionStart and cold UserPromptSubmit p95 < 2 s (idle and loaded), warm SessionStart p95 < 500 ms,
warm capture p95 < 300 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
    ap.add_argument("--cold-runs", type=int, default=8)
    ap.add_argument("--baseline-runs", type=int, default=2, help="cold SessionStarts that wait for the server")
    ap.add_argument("--load", type=int, default=0, help="run every phase again with N busy processes")
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
    env.update(PPS_ROOT=str(root), PPS_CLAUDE_CODE_USER_NAME="Jeff", PPS_CLAUDE_CODE_SERVER_START_S="300",
               PPS_CLAUDE_CODE_TIMEOUT_S="300")
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

    cpu: dict[float, float] = {}  # wall ms of a hook run -> its CPU ms

    def hook(event: str, extra_env: dict | None = None, *flags: str, **body) -> tuple[float, str]:
        data = {"session_id": session, "transcript_path": str(transcript), "hook_event_name": event, **body}
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(" ".join([config[event][0]["hooks"][0]["command"], *flags]), shell=True,
                              input=json.dumps(data), capture_output=True, text=True,
                              env={**env, **(extra_env or {})}, timeout=600)
        took = (time.perf_counter() - started) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the shell and the hook (not the detached server)
        cpu[took] = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
        if "systemMessage" in done.stdout:
            raise RuntimeError(done.stdout)
        return took, done.stdout

    from pps_core.owner import read_owner

    def warm_up() -> None:
        deadline = time.monotonic() + 600
        while not (read_owner(home) or {}).get("address"):
            if time.monotonic() > deadline:
                raise RuntimeError("the hooks' server did not start")
            time.sleep(0.1)

    def stop_server() -> None:
        owner = read_owner(home)
        if owner and owner.get("pid"):
            if not owner.get("address"):
                warm_up()
            os.kill(owner["pid"], signal.SIGTERM)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                try:
                    state = Path(f"/proc/{owner['pid']}/stat").read_bytes().rpartition(b")")[2].split()[0]
                except OSError:
                    break
                if state in (b"Z", b"X"):
                    break
                time.sleep(0.05)

    # a history to recall: turns stored through the server, then a crystal
    grow(20)
    hook("Stop")
    warm_up()
    hook("Stop")
    subprocess.run([sys.executable, "-m", "pps_core.cli", "call", "--entity", "bench", "crystallize",
                    json.dumps({"content": "The csv export quotes every field since March."})], env=env, check=True,
                   capture_output=True)
    stop_server()

    rows: list[tuple[str, list[float]]] = []
    loads: list[str] = []

    def phase(label: str) -> None:
        loads.append(f"{label}: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on "
                     f"{os.cpu_count()} cores")
        for name, flags in (("python -c pass", []), ("python -S -c pass", ["-S"])):
            floor = []
            for _ in range(args.runs):
                started = time.perf_counter()
                subprocess.run([sys.executable, *flags, "-c", "pass"], check=True)
                floor.append((time.perf_counter() - started) * 1000)
            rows.append((f"{label} baseline: {name}", floor))
        waited = []
        for _ in range(args.baseline_runs):
            stop_server()
            took, out = hook("SessionStart", {"PPS_CLAUDE_CODE_GLANCE": "false"}, source="startup")
            assert "additionalContext" in out and "Partial: " not in out, out
            waited.append(took)
        rows.append((f"{label} baseline: SessionStart, cold, waits", waited))
        cold, prompt = [], []
        for _ in range(args.cold_runs):
            stop_server()
            took, out = hook("SessionStart", None, source="startup")
            assert "csv export quotes every field" in out, out
            cold.append(took)
            took, out = hook("UserPromptSubmit", None, "--recall", prompt="what about the csv export quoting?")
            assert "quoted fields" in out or "quotes every field" in out, out
            prompt.append(took)
        rows.append((f"{label} ours: SessionStart, cold (glance)", cold))
        rows.append((f"{label} ours: UserPromptSubmit, cold (glance)", prompt))
        warm_up()
        rows.append((f"{label} ours: SessionStart, warm", [hook("SessionStart", source="resume")[0]
                                                           for _ in range(args.runs)]))
        caps = []
        for _ in range(args.runs):
            grow(1)
            caps.append(hook("Stop")[0])
        rows.append((f"{label} ours: capture (Stop), warm", caps))
        stop_server()

    phase("idle")
    if args.load:
        busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
        try:
            time.sleep(5)  # let the load average feel them
            phase(f"load+{args.load}")
        finally:
            for proc in busy:
                proc.kill()
                proc.wait()

    print(f"plugins: {plugins}; {args.runs} runs, cold {args.cold_runs}, waiting baseline {args.baseline_runs}")
    for line in loads:
        print(line)
    print(f"{'measure':<52}{'p50 ms':>9}{'p95 ms':>9}{'max ms':>9}{'cpu p50':>9}{'cpu p95':>9}   target")
    targets = {"ours: SessionStart, cold (glance)": "p95 < 2000", "ours: UserPromptSubmit, cold (glance)": "p95 < 2000",
               "ours: SessionStart, warm": "p95 < 500", "ours: capture (Stop), warm": "p95 < 300"}
    by = dict(rows)
    for name, values in rows:
        target = next((t for k, t in targets.items() if name.endswith(k)), "")
        met = ""
        if target:
            met = "  met" if pct(values, 0.95) < float(target.split("<")[1]) else "  NOT met"
        cpus = [cpu[v] for v in values if v in cpu]
        cpu_cols = f"{statistics.median(cpus):>9.0f}{pct(cpus, 0.95):>9.0f}" if cpus else f"{'':>18}"
        print(f"{name:<52}{statistics.median(values):>9.0f}{pct(values, 0.95):>9.0f}{max(values):>9.0f}{cpu_cols}   "
              f"{target}{met}")
    print()
    for label in ["idle"] + ([f"load+{args.load}"] if args.load else []):
        waits = statistics.median(by[f"{label} baseline: SessionStart, cold, waits"])
        glance = statistics.median(by[f"{label} ours: SessionStart, cold (glance)"])
        floor = statistics.median(by[f"{label} baseline: python -c pass"])
        print(f"{label}: cold SessionStart {waits / glance:.1f}x faster than waiting for the server (p50); "
              f"cold glance / python -c pass p50 {glance / floor:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
