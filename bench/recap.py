"""Recap of a 2,000-line session log: time and peak memory, per stage and end to end.

    .venv/bin/python bench/recap.py [--lines 2000] [--onnx]

The log is synthetic but shaped like a real agent session (Claude Code transcript format): prompts,
replies, and tool calls with bulky results (file reads of 40-200 lines, test output), deterministic.
Ours = the full pipeline (collapse, chunk, merge, extractive summaries, select) with lexical merge, and
with the all-MiniLM-L6-v2 ONNX embedder when --onnx is given and the embeddings plugin is installed.
Baselines, measured in the same run: reading + JSON-parsing the log alone (the floor any recap pays),
and the recap without the collapse step (raw tool results left in the narrative).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pps_recap import logs
from pps_recap.pipeline import generate
from pps_recap.summarize import ExtractiveSummarizer

TOPICS = ["the CSV importer", "the export path", "the retry queue", "the auth middleware", "the cache layer",
          "the migration script", "the report builder", "the rate limiter"]


def make_log(path: Path, lines: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    t = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
    n = 0
    out = []

    def add(kind: str, content, minutes: float = 0.5) -> None:
        nonlocal t, n
        n += 1
        t += timedelta(minutes=minutes)
        out.append({"type": kind, "uuid": f"u{n}", "sessionId": "bench", "timestamp": t.isoformat(),
                    "message": {"role": kind, "content": content}})

    while len(out) < lines:
        topic = rng.choice(TOPICS)
        add("user", f"Next, look at {topic}: it fails when the input has {rng.randint(2, 9)} fields. Fix it.", 3)
        add("assistant", [{"type": "text", "text": f"I'll read {topic} and its tests first, then decide."}])
        for _ in range(rng.randint(2, 6)):
            tool_id = f"t{n}"
            name = rng.choice(["Read", "Read", "Grep", "Edit", "Bash", "Write"])
            path_name = f"src/{topic.split()[-1]}_{rng.randint(1, 30)}.py"
            args = {"file_path": path_name, "command": "pytest -q", "pattern": "def ", "content": "x\n" * 30}
            add("assistant", [{"type": "tool_use", "id": tool_id, "name": name, "input": args}])
            body = "\n".join(f"{i}\t    value = compute(row[{i}])  # {topic}" for i in range(rng.randint(40, 200)))
            add("user", [{"type": "tool_result", "tool_use_id": tool_id, "content": body}])
        add("assistant", [{"type": "text", "text": (
            f"The bug in {topic} was an off-by-one in the field count; I changed the parser and the tests pass. "
            f"Still open: {rng.choice(['a changelog entry', 'the docs', 'a review of the edge cases'])}.")}])
    path.write_text("\n".join(json.dumps(e) for e in out[:lines]) + "\n")


def measure(label: str, fn):
    tracemalloc.start()
    started = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - started
    _cur, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(f"{label:<46} {elapsed * 1000:>9.0f} ms {peak / 2**20:>9.1f} MiB")
    return result


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=2000)
    ap.add_argument("--budget", type=int, default=1000)
    ap.add_argument("--onnx", action="store_true", help="also run with the ONNX all-MiniLM-L6-v2 embedder")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "session.jsonl"
        make_log(log, args.lines)
        size = log.stat().st_size
        print(f"log: {args.lines} lines, {size / 2**20:.1f} MiB; budget {args.budget} tokens\n")
        print(f"{'measure':<46} {'time':>12} {'peak (py)':>13}")
        measure("baseline: read + parse JSON only", lambda: logs.read_lines(log))
        turns = measure("collapse (narrative)", lambda: logs.read_log(log))
        raw = [logs.Turn("Tool" if isinstance(e["message"]["content"], list) else "User",
                         json.dumps(e["message"]["content"])[:20_000], None) for e in logs.read_lines(log)]
        measure("baseline: recap without collapsing tools", lambda: generate(
            raw, budget=args.budget, summarizer=ExtractiveSummarizer()))
        recap = measure("ours: recap, lexical merge (end to end)", lambda: generate(
            log, budget=args.budget, summarizer=ExtractiveSummarizer()))
        print(f"\n  {len(turns)} narrative lines from {args.lines} log lines; {recap.stats['chunks']} chunks -> "
              f"{recap.stats['merged_chunks']} merged -> {recap.stats['selected']} selected, "
              f"~{recap.tokens} tokens")
        if args.onnx:
            try:
                from pps_embeddings.onnx import shared_embedder
                from pps_embeddings.settings import EmbeddingSettings
            except ImportError:
                print("  (--onnx: the embeddings plugin is not installed)")
            else:
                embedder = measure("load ONNX all-MiniLM-L6-v2", lambda: shared_embedder(EmbeddingSettings()))
                recap = measure("ours: recap, ONNX embeddings merge (end to end)", lambda: generate(
                    log, budget=args.budget, summarizer=ExtractiveSummarizer(), embedder=embedder))
                print(f"  embeddings: {recap.stats['chunks']} chunks -> {recap.stats['merged_chunks']} merged -> "
                      f"{recap.stats['selected']} selected, ~{recap.tokens} tokens")
    print(f"\nprocess peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
