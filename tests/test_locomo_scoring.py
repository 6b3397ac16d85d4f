"""bench/locomo.py: parsing, evidence normalisation and scoring, pinned on a tiny hand-made conversation."""

import importlib.util
import json
from datetime import datetime
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "locomo.py"


@pytest.fixture(scope="module")
def locomo():
    spec = importlib.util.spec_from_file_location("bench_locomo", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TINY = [{
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Pixel."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "Lovely! I started learning the cello."},
            {"speaker": "Ann", "dia_id": "D1:3", "text": "Pixel sleeps on my keyboard.",
             "blip_caption": "a photo of a grey cat on a laptop"},
        ],
        "session_2_date_time": "10:05 am on 12 June, 2023",
        "session_2": [
            {"speaker": "Bob", "dia_id": "D2:1", "text": "My cello teacher moved to Lisbon."},
            {"speaker": "Ann", "dia_id": "D2:2", "text": "Pixel turned one today."},
        ],
    },
    "qa": [
        {"question": "What is the name of Ann's cat?", "answer": "Pixel", "evidence": ["D1:1"], "category": 4},
        {"question": "Which cello lessons is Bob learning?", "answer": "cello", "evidence": ["D1:2; D2:1"], "category": 1},
        {"question": "When did Pixel turn one?", "answer": "12 June 2023", "evidence": ["D:2:2"], "category": 2},
        {"question": "Odd one", "answer": "?", "evidence": ["D"], "category": 3},
        {"question": "What instrument does Ann play?", "adversarial_answer": "cello", "evidence": ["D1:2"],
         "category": 5},
    ],
}]


def test_session_times_parse(locomo):
    assert locomo.parse_when("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert locomo.parse_when("10:05 am on 12 June, 2023") == datetime(2023, 6, 12, 10, 5)


def test_malformed_evidence_is_normalised(locomo):
    assert locomo.normalise_evidence(["D8:6; D9:17"]) == ["D8:6", "D9:17"]
    assert locomo.normalise_evidence(["D:11:26", "D11:26"]) == ["D11:26"]
    assert locomo.normalise_evidence(["D"]) == []
    assert locomo.normalise_evidence(["D10:03"]) == ["D10:3"]


def test_load_keeps_order_time_ids_and_drops_category_5(locomo, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    [conv] = locomo.load(path)
    assert [t["metadata"]["dia_id"] for t in conv["turns"]] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert [t["created_at"] for t in conv["turns"][:3]] == [
        "2023-05-08T13:56:00", "2023-05-08T13:56:01", "2023-05-08T13:56:02"]
    assert conv["turns"][2]["content"].endswith("[shared a photo: a photo of a grey cat on a laptop]")
    assert [q["evidence"] for q in conv["questions"]] == [["D1:1"], ["D1:2", "D2:1"], ["D2:2"], []]


def test_scores_of_known_rankings(locomo):
    s = locomo.score(["D1:1", "D2:2"], ["D1:1"])
    assert s == {"r@5": 1.0, "r@10": 1.0, "mrr": 1.0, "s@5": 1.0, "s@10": 1.0,
                 "any@5": 1.0, "any@10": 1.0, "all@5": 1.0, "all@10": 1.0}
    ranked = ["D3:1", "D3:2", "D1:9", "D4:4", "D5:5", "D2:1", "D1:2"]  # evidence at ranks 6 and 7
    s = locomo.score(ranked, ["D1:2", "D2:1"])
    assert s["r@5"] == 0.0 and s["r@10"] == 1.0 and s["mrr"] == pytest.approx(1 / 6)
    assert s["s@5"] == 0.5 and s["s@10"] == 1.0  # D1:9 puts session 1 in the top 5
    # the field's session-level numbers: any evidence session among the top k's sessions, or all of them
    assert (s["any@5"], s["all@5"], s["any@10"], s["all@10"]) == (1.0, 0.0, 1.0, 1.0)
    s = locomo.score([f"D9:{i}" for i in range(10)] + ["D1:1"], ["D1:1"])  # past 10 counts nothing
    assert s["r@10"] == 0.0 and s["mrr"] == 0.0
    agg = locomo.aggregate([{"r@5": 1, "r@10": 1, "mrr": 1, "s@5": 1, "s@10": 1},
                            {"r@5": 0, "r@10": 0.5, "mrr": 0.25, "s@5": 0, "s@10": 1}])
    assert agg == {"r@5": 0.5, "r@10": 0.75, "mrr": 0.625, "s@5": 0.5, "s@10": 1.0}
    assert locomo.percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0


async def test_a_tiny_conversation_end_to_end(locomo, tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    [conv] = locomo.load(path)
    result = await locomo.run_conversation(conv, ["sqlite"], False, None)
    assert result["turns"] == 5 and result["skipped"] == 1 and len(result["latency"]) == 3
    ours = [s for _c, s in result["scores"]["PPS fused (default)"]]
    assert ours[0]["r@10"] == 1.0 and ours[0]["mrr"] == 1.0  # "Pixel" is in the cat turn
    assert ours[1]["r@10"] == 1.0  # both cello turns
    assert set(result["scores"]) == {"PPS fused (default)", "PPS fused before (no floor)", "PPS calibrated, no floor",
                                     "BM25 alone"}  # the floor's trade-off is measured in the same run
    text, summary = locomo.table([result])
    assert "BM25 alone" in text and summary["latency_ms"]["p95"] >= summary["latency_ms"]["p50"]
