"""Warming up is not failing (issue 39, item 1): a process that is still loading its model and index waits for
itself within ``[recall] warmup_timeout_s`` and says so; ``[recall] layer_timeout_s`` is for a layer that is
really stuck (it has answered before, in this process).

The command-line tests run under a CPU load of two busy processes, as on a laptop compiling something; their
``layer_timeout_s`` is far below what a cold start takes anywhere, so they fail if a cold layer gets it."""

import asyncio
import json

from pps_core import LayerHealth
from pps_core.testing import ScriptedLayer, layer_plugin
from pps_core.testing.server import pps, pps_env


def run(tmp_path, *args, stdin=None):
    root = tmp_path / "root"
    return pps(root, *args, check=False, env=pps_env(root, HOME=str(tmp_path)), input=stdin, timeout=300)


def test_a_cold_process_under_load_answers_health_and_recall_from_every_layer(tmp_path, cpu_load):
    out = run(tmp_path, "init", "--entity", "lyra", "--plugins", "sqlite,crystals,chroma,embeddings,graphiti,recap",
              "--timezone", "UTC")
    assert out.returncode == 0, out.stderr
    with open(tmp_path / "root" / "lyra" / "pps.toml", "a") as fh:  # the stuck-layer timeout, far below a cold start
        fh.write("\n[recall]\nlayer_timeout_s = 0.05\n")
    saved = run(tmp_path, "call", "-e", "lyra", "anchor_save", '{"title": "Sea", "content": "the grey sea at dawn"}')
    assert saved.returncode == 0, saved.stderr
    stored = run(tmp_path, "call", "-e", "lyra", "store_message",
                 '{"content": "we walked by the grey sea", "author_name": "Jeff", "channel": "terminal"}')
    assert stored.returncode == 0, stored.stderr

    health = run(tmp_path, "health", "-e", "lyra")
    assert health.returncode == 0, health.stdout + health.stderr
    assert "UNAVAILABLE" not in health.stdout and "TimeoutError" not in health.stdout, health.stdout
    assert "word photos 1" in health.stdout

    recall = run(tmp_path, "call", "-e", "lyra", "ambient_recall", '{"context": "the grey sea"}')
    assert recall.returncode == 0, recall.stderr
    answer = json.loads(recall.stdout)
    assert {s["layer"]: s["status"] for s in answer["layers"]} == {
        "core_anchors": "ok", "crystallization": "ok", "message_summaries": "ok", "raw_capture": "ok",
        "rich_texture": "ok", "session_recap": "ok"}, answer["layers"]
    assert "Unavailable" not in answer["text"] and "the grey sea at dawn" in answer["text"]


class Stuck(ScriptedLayer):
    """Answers ``warm_calls`` times, then hangs: a layer that is really stuck (not warming up)."""

    def __init__(self, name, texts, warm_calls):
        super().__init__(name, texts)
        self.calls = warm_calls

    async def _maybe(self):
        self.calls -= 1
        if self.calls < 0:
            await asyncio.sleep(3600)


async def test_a_stuck_layer_times_out_with_a_reason_and_a_warming_one_is_named_as_warming(make_memory):
    stuck = Stuck("stuck", ["kettle"], warm_calls=2)  # its first health and search answer: it is warm
    cold = Stuck("cold", ["kettle"], warm_calls=0)    # never answers: still warming when its budget ends
    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(ScriptedLayer("docs", ["the kettle"]), stuck,
                                                                  cold)],
                          recall={"layer_timeout_s": 0.1, "warmup_timeout_s": 0.5})
    first = await m.call("ambient_recall", {"context": "kettle"})
    assert {s["layer"]: s["status"] for s in first["layers"]} == {"docs": "ok", "stuck": "ok", "cold": "warming"}
    assert "still warming up" in first["text"] and "kettle" in first["text"]

    health = await m.call("pps_health", {})
    assert health["layers"]["stuck"]["available"] is False
    assert health["layers"]["stuck"]["detail"] == "TimeoutError: no answer within 0.1s", health["layers"]["stuck"]
    assert health["layers"]["cold"]["warming"] is True
    assert health["layers"]["cold"]["detail"].startswith("warming up: no first answer within 0.5s")
    assert health["ok"] is False and health["warming"] == ["cold"]  # stuck is a failure; cold alone would not be

    second = await m.call("ambient_recall", {"context": "kettle"})
    assert {s["layer"]: s["status"] for s in second["layers"]} == {"docs": "ok", "stuck": "timeout", "cold": "warming"}


async def test_a_layer_only_warming_is_not_a_failing_health(make_memory):
    class Slow(ScriptedLayer):
        async def health(self):
            await asyncio.sleep(3600)
            return LayerHealth(layer=self.name, available=True)

    m = await make_memory(plugins=[], extra_plugins=[layer_plugin(ScriptedLayer("docs", ["x"]), Slow("index"))],
                          recall={"warmup_timeout_s": 0.2})
    health = await m.call("pps_health", {})
    assert health["ok"] is True and health["warming"] == ["index"]
    from pps_core.cli_text import health_text

    text = health_text(health)
    assert "index                WARMING UP" in text and "TimeoutError" not in text
    assert text.startswith("entity 'testentity': 1 of 2 layers still warming up (index)")
