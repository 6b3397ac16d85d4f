"""Per-prompt recall (issue 40): times in the entity's zone, as everything else shows them, and a floor on every
layer: a word-photo only loosely like the prompt is not injected into it."""

from __future__ import annotations

from pps_claude_code.recall_view import relevant_memories

from pps_core import SearchResult
from pps_core.testing import ScriptedLayer, layer_plugin


class Photos(ScriptedLayer):
    """Word-photos as a semantic layer scores them (a cosine): one close to the prompt, one loosely like it."""

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        return [SearchResult(layer=self.name, content=text, source=f"photo-{i}.md", score=score)
                for i, (text, score) in enumerate((("The lighthouse at dawn, the lamp still turning.", 0.62),
                                                   ("A grey morning on the pier, gulls everywhere.", 0.25)))]


async def test_prompt_recall_in_the_entitys_zone_and_under_a_floor(make_memory):
    m = await make_memory(plugins=["sqlite"], timezone="America/Chicago",
                          extra_plugins=[layer_plugin(Photos("core_anchors", []))])
    await m.call("store_message", {"content": "We repainted the lighthouse lamp red.", "author_name": "Jeff",
                                   "channel": "terminal:a", "created_at": "2026-11-26T01:30:00Z"})
    prompt = "what happened with the lighthouse lamp?"
    answer = await m.call("ambient_recall", {"context": prompt, "limit_per_layer": 3})
    text = relevant_memories(answer, prompt, {}, 2000)
    assert "[raw_capture, 2026-11-25 19:30, Jeff] We repainted the lighthouse lamp red." in text  # 19:30 in Chicago
    assert "lamp still turning" in text
    assert "gulls everywhere" not in text  # a cosine of 0.25: under the per-prompt floor of word-photos
    loose = relevant_memories(answer, prompt, {"core_anchors": 0.2}, 2000)
    assert "gulls everywhere" in loose  # the configured floor decides
