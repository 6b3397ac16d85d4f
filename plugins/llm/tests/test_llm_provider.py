"""The llm plugin: the entity's chat model from [llm], any OpenAI-compatible endpoint (a scripted one on
loopback here), nothing without it."""

import pytest

from pps_core import ChatModel
from pps_core.errors import Unavailable
from pps_core.testing.scripted_llm import ScriptedLLM


async def test_without_an_llm_section_the_plugin_provides_nothing(make_memory):
    memory = await make_memory(plugins=["llm"])
    assert memory.pm.get_plugin("llm") is not None and memory.chat_model() is None
    assert (await memory.call("pps_health", {}))["llm_configured"] is False


async def test_the_llm_section_is_the_entitys_chat_model(make_memory):
    with ScriptedLLM(lambda messages: f"  seen: {messages[-1]['content']}  ") as llm:
        memory = await make_memory(plugins=["llm"], llm={"base_url": llm.base_url, "model": "m1", "api_key": "sk-x"})
        chat = memory.chat_model()
        assert isinstance(chat, ChatModel) and chat.name == f"m1 at {llm.base_url}"
        assert chat.complete("be brief", "hello") == "seen: hello"
        other = memory.chat_model("m2")
        other.complete("s", "u")
    first, second = llm.calls
    assert first["path"].endswith("/chat/completions") and first["auth"] == "Bearer sk-x"
    assert first["body"]["model"] == "m1" and second["body"]["model"] == "m2"
    assert first["body"]["messages"][0] == {"role": "system", "content": "be brief"}


async def test_a_failing_endpoint_is_unavailable_never_a_crash(make_memory):
    with ScriptedLLM(lambda messages: None) as llm:  # HTTP 500
        memory = await make_memory(plugins=["llm"], llm={"base_url": llm.base_url, "model": "m"})
        with pytest.raises(Unavailable, match="HTTP 500"):
            memory.chat_model().complete("s", "u")


async def test_the_environment_names_the_endpoint_as_before(make_memory, monkeypatch):
    with ScriptedLLM(lambda messages: "ok") as llm:
        monkeypatch.setenv("PPS_LLM__BASE_URL", llm.base_url)
        monkeypatch.setenv("PPS_LLM__MODEL", "env-model")
        memory = await make_memory(plugins=["llm"])
        assert memory.chat_model().complete("s", "u") == "ok"
    assert llm.calls[0]["body"]["model"] == "env-model"
