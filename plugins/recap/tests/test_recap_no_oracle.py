"""session_recap's errors do not tell a caller whether a path outside the entity's logs exists (issue 14
item 11): a file, a folder, a missing name, a wrong suffix, a name too long, another user's home all give
the same refusal, naming the parameter."""

import pytest

from pps_core.errors import InvalidParams


async def test_a_path_outside_the_entitys_logs_is_refused_the_same_whether_it_exists_or_not(make_memory, tmp_path):
    other = tmp_path / "other-entity"
    other.mkdir()
    (other / "secret.jsonl").write_text('{"type": "user", "message": {"content": "hi"}}\n')
    (other / "notes.txt").write_text("x")
    memory = await make_memory(plugins=["sqlite", "recap"])
    probes = [other / "secret.jsonl", other / "missing.jsonl", other / "notes.txt", other, "/etc/passwd",
              "/etc", "/nonexistent/x.jsonl", "/" + "a" * 300 + ".jsonl", "/a" * 1900 + ".jsonl", "~root/.bashrc",
              "~no-such-user-zz/x.jsonl", "relative/missing.jsonl", f"{other}/../other-entity/secret.jsonl"]
    answers = {}
    for probe in probes:
        with pytest.raises(InvalidParams) as err:
            await memory.call("session_recap", {"log": str(probe), "write": False})
        assert err.value.param == "log", probe
        answers[str(probe)[:200]] = err.value.message
    assert len(set(answers.values())) == 1, answers
    assert "not one of this entity's session logs" in next(iter(answers.values()))


async def test_inside_the_home_a_missing_log_is_still_named(make_memory):
    memory = await make_memory(plugins=["sqlite", "recap"])
    with pytest.raises(InvalidParams, match="no such file") as err:
        await memory.call("session_recap", {"log": str(memory.home / "missing.jsonl")})
    assert err.value.param == "log"
