"""bench/lifetime.py's buried LoCoMo (issue 26): a conversation buried in a long history keeps its channel in order,
as a real channel does (its sessions were shuffled into each other when two fell a few days apart)."""

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "lifetime.py"


@pytest.fixture(scope="module")
def lifetime():
    spec = importlib.util.spec_from_file_location("bench_lifetime", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(BENCH.parent))  # it imports bench/locomo.py
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCH.parent))
    return module


def conversation(cid: str, days: list[int], per_session: int = 30) -> dict:
    """Sessions ``days`` apart (days of May 2023), each of ``per_session`` turns a second apart."""
    turns = []
    for s, day in enumerate(days, start=1):
        for k in range(1, per_session + 1):
            turns.append({"content": f"{cid} session {s} turn {k}", "author_name": "Ann",
                          "created_at": f"2023-05-{day:02d}T13:00:{k:02d}", "metadata": {"dia_id": f"D{s}:{k}",
                                                                                      "session": s}})
    return {"id": cid, "turns": turns}


def test_a_buried_conversation_keeps_its_sessions_in_order(lifetime):
    convs = [conversation("a", [1, 2, 4, 4]), conversation("b", [1, 3])]
    plan = lifetime.Plan(12_000, [f"sentence {k}." for k in range(50)], convs)
    for conv in convs:
        slots = sorted(p for p, (cid, _dia) in plan.dia.items() if cid == conv["id"])
        placed = [plan.dia[p][1] for p in slots]
        assert placed == [t["metadata"]["dia_id"] for t in conv["turns"]], conv["id"]  # channel order = time order
    assert len(plan.buried) == sum(len(c["turns"]) for c in convs)
