"""`pps doctor` lines contributed by other plugins through the ``pps.checks`` entry points (the embeddings
plugin's model line comes this way, so the doctor names no plugin)."""

from __future__ import annotations

from importlib.metadata import EntryPoint

import pps_claude_code.doctor as doctor

from pps_core.settings import EntitySettings


def _settings(tmp_path, plugins):
    return EntitySettings(entity="lyra", home=tmp_path, plugins=plugins)


def test_the_model_line_comes_from_the_embeddings_plugin_and_says_where_the_file_is(tmp_path):
    lines = doctor.plugin_checks(_settings(tmp_path, ["sqlite", "embeddings"]))
    model = [line for line in lines if line[1] == "model"]
    assert model and model[0][0] == "ok" and ".onnx" in model[0][2]
    assert not [line for line in doctor.plugin_checks(_settings(tmp_path, ["sqlite"])) if line[1] == "model"]


def test_a_check_that_breaks_is_a_failed_line_and_the_others_still_run(tmp_path, monkeypatch):
    import importlib.metadata as md

    broken = EntryPoint("zz-broken", "json:no_such_function", doctor.CHECKS_GROUP)
    real = md.entry_points

    def fake(**kw):
        found = list(real(**kw))
        return [*found, broken] if kw.get("group") == doctor.CHECKS_GROUP else found

    monkeypatch.setattr(md, "entry_points", fake)
    lines = doctor.plugin_checks(_settings(tmp_path, ["sqlite", "embeddings"]))
    assert [line[1] for line in lines] == ["model", "zz-broken"]
    assert lines[-1][0] == "fail" and "json:no_such_function" in lines[-1][2]
