"""Budgeted recall (hosts cut long hook output) and per-channel quotas: the kernel's logic, on fake layers.

The same over real turns (raw_capture's pointer paging back exactly what was cut) is in
plugins/layer_sqlite/tests/test_sqlite_recall_budget.py.
"""

import json

import pytest

from pps_core import Pointer, SearchResult, SectionConfig
from pps_core.testing import ScriptedLayer, layer_plugin


class Turns(ScriptedLayer):
    """Turns with a channel, an author and a time, oldest first (what a turn store hands a startup section)."""

    def __init__(self, name, turns, **kw):
        super().__init__(name, [content for _, _, content in turns], **kw)
        self.turns = turns

    async def recent(self, limit):
        items = [SearchResult(layer=self.name, content=content, source=str(i), kind="turn", channels=[channel],
                              author=author,
                     timestamp=f"2026-01-{1 + i // 1440:02d}T{i // 60 % 24:02d}:{i % 60:02d}:00+00:00")
                 for i, (channel, author, content) in enumerate(self.turns)]
        return items[-limit:] if limit else []


def busy(n_terminal=500, n_discord=50, n_email=0):
    """Discord and email first: the terminal turns are the newest."""
    return ([("discord:home", "Brandi", f"discord line {i}") for i in range(n_discord)]
            + [("email:inbox", "Bank", f"email line {i}") for i in range(n_email)]
            + [("terminal:a", "Jeff", f"terminal line {i} " + "words " * 20) for i in range(n_terminal)])


def docs(n=6, size=60):
    pointer = Pointer(operation="docs_page", params={"all": True})
    return ScriptedLayer("docs", [f"doc {i} " + "insight " * size for i in range(n)], title="Docs", pointer=pointer,
                         sections=[SectionConfig(name="Docs", layer="docs", count=None, position=10)])


@pytest.mark.parametrize("budget", [1_500, 4_000, 9_000])
async def test_budgeted_startup_fits_and_points_at_the_rest(make_memory, budget):
    turns = Turns("turns", busy(400, 0), sections=[SectionConfig(name="Recent turns", layer="turns", style="turns",
                                                                max_chars=1000, position=40)])
    m = await make_memory(plugins=[], identity="I am Lyra.", extra_plugins=[layer_plugin(docs(), turns)])
    out = await m.call("ambient_recall", {"context": "startup", "budget": budget})
    text = out["text"]
    assert len(text) <= budget
    assert text.startswith("I am Lyra.\n\n**Clock**:") and "=== AMBIENT RECALL MANIFEST ===" in text
    left = out["manifest"]["left_out"]
    assert left, "400 turns and six long documents cannot fit"
    for item in left:  # every pointer is in the text, verbatim
        assert f"call {item['operation']} {json.dumps(item['params'])}" in text
        assert item["left_out"] == item["total"] - item["shown"] > 0
    (doc_cut,) = [x for x in left if x["section"] == "Docs"] or [None]
    if doc_cut:  # the layer's own left_out_call, not a generic pointer
        assert (doc_cut["operation"], doc_cut["params"]) == ("docs_page", {"all": True})


async def test_without_budget_nothing_is_left_out(make_memory):
    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(docs())])
    out = await m.call("ambient_recall", {"context": "startup"})
    assert out["manifest"]["left_out"] == [] and all(f"doc {i} " in out["text"] for i in range(6))


async def test_budget_too_small_for_anything_but_the_header(make_memory):
    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(docs())])
    out = await m.call("ambient_recall", {"context": "startup", "budget": 400})
    assert len(out["text"]) <= 400 and out["text"].startswith("**Clock**")
    assert "doc 0" not in out["text"]


QUOTA_SECTION = SectionConfig(name="Recent turns", layer="turns", style="turns", max_chars=1000, count=30,
                              quotas={"terminal": 10, "discord": 10, "*": 5})


async def test_quotas_hold_with_a_ten_to_one_imbalance(make_memory):
    turns = Turns("turns", busy(n_terminal=500, n_discord=50, n_email=3), sections=[QUOTA_SECTION])
    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(turns)])
    text = (await m.call("ambient_recall", {"context": "startup"}))["text"]
    shown = [ln for ln in text.splitlines() if " line " in ln]
    assert len(shown) == 30
    assert sum("discord line" in ln for ln in shown) >= 10 and sum("email line" in ln for ln in shown) == 3
    kinds = ["terminal" if "terminal line" in ln else "other" for ln in shown]
    assert kinds == sorted(kinds)  # chronological: the older discord/email turns come first


async def test_quotas_survive_a_budget_cut(make_memory):
    section = QUOTA_SECTION.model_copy(update={"count": None})
    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(Turns("turns", busy(500, 50), sections=[section]))])
    out = await m.call("ambient_recall", {"context": "startup", "budget": 3_000})
    assert len(out["text"]) <= 3_000
    assert "discord line" in out["text"] and "terminal line" in out["text"]


async def test_non_startup_budget(make_memory):
    notes = ScriptedLayer("notes", [f"garden note {i} " + "cedar beds " * 50 for i in range(20)])
    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(notes)])
    out = await m.call("ambient_recall", {"context": "garden cedar", "limit_per_layer": 10, "budget": 2_000})
    assert len(out["text"]) <= 2_000 and out["manifest"]["left_out"]
