"""The one hook runner: every host's hook (Claude Code's fast and full paths, Codex, Gemini CLI, Copilot CLI) runs
its work through :func:`guarded`, so each exits 0 within its deadline, logs why to ``<home>/logs/hooks.log``,
records the last error for ``pps hooks status`` and, where memory should have been injected, tells the user in
one line in the host's own shape. Standard library only (the Claude Code fast path imports it).
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .logbook import DEFAULT_HOST, failure_text, log, record


def system_message(text: str) -> dict[str, Any]:
    """The user-visible line of Claude Code, Codex and Gemini CLI: ``systemMessage``."""
    return {"systemMessage": text}


def emitter(stdout) -> Callable[[dict[str, Any] | None], None]:
    def emit(obj: dict[str, Any] | None) -> None:
        if obj:
            stdout.write(json.dumps(obj) + "\n")
            stdout.flush()
    return emit


def guarded(work: Callable[[], dict[str, Any] | None], *, home: Path, event: str, session: str, started: float,
            timeout: float, injecting: bool, stdout, where: str = DEFAULT_HOST,
            notice: Callable[[str], dict[str, Any] | None] = system_message,
            on_hang: Callable[[], None] | None = None, after: Callable[[], None] | None = None) -> None:
    """Run ``work`` (returns the JSON to print, or None) within ``started + timeout``; never raises.

    A failure is logged, recorded and shown (:func:`pps_hooks.logbook.failure_text`, in ``notice``'s shape); a
    worker still running at the deadline is abandoned: ``on_hang`` and ``after`` run, then the process exits 0
    at once (a stuck store must not hold the host). ``after`` also runs once the answer is out."""
    emit = emitter(stdout)
    result: dict[str, Any] = {}

    def run() -> None:
        try:
            result["out"] = work()
        except BaseException as exc:  # noqa: BLE001 - everything is logged, nothing reaches the host
            reason = str(getattr(exc, "message", None) or exc)
            result["error"] = f"{type(exc).__name__}: {reason}"
            result["reason"] = reason

    def shown(reason: str) -> None:
        text = failure_text(home, event, session, reason, injecting=injecting, where=where)
        emit(notice(text) if text else None)

    worker = threading.Thread(target=run, name="pps-hook", daemon=True)
    worker.start()
    worker.join(max(0.0, started + timeout - time.monotonic()))
    if worker.is_alive():
        waited = started + timeout - started
        reason = f"PPS did not answer within {waited:g}s"
        log(home, f"{event}: gave up after {waited:g}s (PPS slow or stuck); nothing injected")
        record(home, "error", where=where, event=event, message=reason)
        if on_hang is not None:
            on_hang()
        shown(reason)
        if after is not None:
            after()
        stdout.flush()
        os._exit(0)  # the stuck worker must not hold the host
    if "error" in result:
        log(home, f"{event}: failed: {result['error']}")
        record(home, "error", where=where, event=event, message=result["reason"])
        shown(result["reason"])
    else:
        emit(result.get("out"))
    if after is not None:
        after()
