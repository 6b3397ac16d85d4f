"""The offline recap names people as the entity knows them (issue 39 item 9): the user by `user_name`, each prompt
apart from the next, and "Where I left off" says what was asked as well as the agent's last words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from pps_recap.logs import Turn
from pps_recap.pipeline import generate
from pps_recap.summarize import ExtractiveSummarizer, make_summarizer, user_name_of

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def turns() -> list[Turn]:
    said = [("User", "Please rename the config loader."), ("User", "Also add a test for the empty file."),
            ("Assistant", "I renamed the loader to read_config and added the empty-file test."),
            ("User", "Now wire the loader into the server start."),
            ("Assistant", "The server start calls read_config now.")]
    return [Turn(role, text, T0 + timedelta(minutes=i)) for i, (role, text) in enumerate(said)]


def test_the_offline_recap_names_the_user_and_keeps_prompts_apart():
    recap = generate(turns(), budget=1000, summarizer=ExtractiveSummarizer(user_name="Jeff"), tz=ZoneInfo("UTC"))
    text = recap.text
    assert "User:" not in text and "Jeff" in text, text
    assert 'Jeff asked: "Please rename the config loader."' in text, text
    assert '"Please rename the config loader. Also add' not in text  # two prompts, never glued into one
    left = next(line for line in text.splitlines() if line.startswith("- **Where I left off**"))
    assert 'Jeff had asked: "Now wire the loader into the server start."' in left, left
    assert "The server start calls read_config now." in left


def test_the_name_comes_from_the_entitys_settings():
    class Settings:
        model_extra = {"user_name": "Jeff"}

        def section(self, name):
            return {}

    assert user_name_of(Settings()) == "Jeff"
    assert make_summarizer(None, "extractive", user_name="Jeff").user_name == "Jeff"
