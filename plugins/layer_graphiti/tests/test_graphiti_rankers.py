"""The rankers on their own: exact weights and orderings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pps_graphiti.rankers import Diversity, Freshness, Novelty

from pps_core import SearchResult
from pps_core.ranking import Ranker
from pps_core.timeutil import now_utc, to_storage


def fact(source, score=1.0, days=None, pair=("a", "b")):
    ts = to_storage(now_utc() - timedelta(days=days)) if days is not None else None
    return SearchResult(layer="rich_texture", content=source, source=source, score=score, timestamp=ts,
                        metadata={"kind": "edge", "source_node_uuid": pair[0], "target_node_uuid": pair[1]})


def test_rankers_follow_the_core_protocol(tmp_path):
    for r in (Freshness(), Diversity(), Novelty(tmp_path / "n.sqlite3")):
        assert isinstance(r, Ranker)


def test_freshness_is_a_true_half_life():
    f = Freshness()
    assert f.weight(to_storage(now_utc())) == pytest.approx(1.0, abs=1e-3)
    assert f.weight(to_storage(now_utc() - timedelta(days=14))) == pytest.approx(0.5, abs=1e-3)
    assert f.weight(to_storage(now_utc() - timedelta(days=28))) == pytest.approx(0.25, abs=1e-3)
    assert f.weight(None) == 0.5
    ranked = f.rerank("q", [fact("old", 1.0, days=30), fact("undated", 0.9), fact("new", 0.8, days=0)], 3)
    assert [r.source for r in ranked] == ["new", "undated", "old"]


def test_diversity_keeps_one_per_unordered_pair_then_backfills():
    results = [fact("ab1", pair=("a", "b")), fact("ba2", pair=("b", "a")), fact("ac", pair=("a", "c")),
               fact("ab3", pair=("a", "b"))]
    ranked = Diversity().rerank("q", results, 2)
    assert [r.source for r in ranked] == ["ab1", "ac", "ba2", "ab3"]
    assert ranked[2].metadata["diversity_overflow"]


def test_novelty_sinks_facts_surfaced_turn_after_turn_and_persists(tmp_path):
    clock = [1_000_000.0]
    path = tmp_path / "novelty.sqlite3"
    n = Novelty(path, half_count=5.0, settle_s=60, clock=lambda: clock[0])
    results = [fact("wallpaper", 1.0, pair=("a", "b")), fact("fresh", 0.8, pair=("c", "d"))]
    assert n.rerank("q", results, 1)[0].source == "wallpaper"
    assert n.rerank("q", results, 1)[0].source == "wallpaper"  # same moment: same answer, counted once
    orders = []
    for _turn in range(3):
        clock[0] += 120
        orders.append(n.rerank("q", results, 1)[0].source)
    assert orders[:2] == ["wallpaper", "fresh"]  # shown turn after turn, it sank below a weaker match
    n.flush()
    clock[0] += 120
    again = Novelty(path, half_count=5.0, settle_s=60, clock=lambda: clock[0])
    assert again.count("rich_texture", "wallpaper") == pytest.approx(n.count("rich_texture", "wallpaper"))
    clock[0] += 60 * 86_400  # weeks without being shown: the count decays and the fact recovers
    assert again.count("rich_texture", "wallpaper") < 0.01


def test_entities_whose_names_sanitise_alike_get_different_partitions():
    from pps_graphiti.settings import GraphitiSettings

    s = GraphitiSettings()
    assert s.resolved_group_id("lyra") == "lyra"
    assert s.resolved_group_id("lyra_x") == "lyra_x"
    dotted = s.resolved_group_id("lyra.x")
    assert dotted.startswith("lyra_x-") and dotted != "lyra_x"
    assert all(c.isalnum() or c in "-_" for c in dotted)
