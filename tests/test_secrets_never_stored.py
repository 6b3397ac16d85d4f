"""Secrets never stored (issue 41): the one capture filter (``pps_core.privacy.drop_private``) replaces detected
secrets nobody marked (API keys, tokens, private keys, passwords assigned in text) by ``[secret:<kind>]``.

Canary keys (realistic fakes, new each run) go in through a prompt, a reply, metadata (a key and a value), a
summary, and both importers (``pps import jsonl``, ``pps import claude-code``); then no byte of the PPS root holds
them. ``[privacy] secrets = false`` keeps them (the detector is what removed them); an added
``[privacy.secret_patterns]`` regex is replaced too, and a bad one is refused with an error naming it. Ordinary
conversation passes untouched: every string of the public LoCoMo file comes out of the filter unchanged.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import pytest

from pps_core.errors import ConfigError
from pps_core.privacy import drop_private, drop_private_deep
from pps_core.testing.server import init_entity, pps, pps_env

_rng = random.SystemRandom()
_UPPER = string.ascii_uppercase + string.digits
_ALNUM = string.ascii_letters + string.digits


def aws_key() -> str:
    return "AKIA" + "".join(_rng.choice(_UPPER) for _ in range(16))


def github_token() -> str:
    return "ghp_" + "".join(_rng.choice(_ALNUM) for _ in range(36))


#: One realistic fake of every built-in kind, and the marker it becomes.
KINDS = {
    "aws-access-key": lambda: f"export AWS_ACCESS_KEY_ID {aws_key()} now",
    "github-token": lambda: f"git clone https://{github_token()}@github.com/x/y",
    "openai-key": lambda: "OPENAI key sk-proj-" + "".join(_rng.choice(_ALNUM) for _ in range(48)),
    "anthropic-key": lambda: "use sk-ant-api03-" + "".join(_rng.choice(_ALNUM) for _ in range(40)),
    "slack-token": lambda: "xoxb-" + "".join(_rng.choice(string.digits) for _ in range(12)) + "-AbCdEfGhIjKl",
    "google-api-key": lambda: "AIza" + "".join(_rng.choice(_ALNUM) for _ in range(35)) + " is the maps key",
    "stripe-key": lambda: "charge with sk_live_" + "".join(_rng.choice(_ALNUM) for _ in range(24)),
    "jwt": lambda: "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36P",
    "private-key": lambda: "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAE\n"
                           "-----END OPENSSH PRIVATE KEY-----",
    "bearer-token": lambda: 'curl -H "Authorization: Bearer ' + "".join(_rng.choice(_ALNUM) for _ in range(30)) + '"',
    "url-password": lambda: "psql postgres://jeff:Hunter2Rules@db.local/pps",
    "assigned-secret": lambda: "DB_PASSWORD=" + "".join(_rng.choice(_ALNUM) for _ in range(14)) + "!9",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_known_kind_of_secret_becomes_its_marker(kind):
    text = KINDS[kind]()
    out = drop_private(text)
    assert f"[secret:{kind}]" in out, out
    assert drop_private(out) == out  # a marker is never taken for a secret: filtering twice changes nothing


def test_words_that_only_look_like_secret_names_are_kept():
    for text in ("password: forgotten again", "the bearer of bad news", "my secret: meditation", "token=abcdefgh",
                 "sk-learn is great", "commit 3f2a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a",
                 "uuid 123e4567-e89b-12d3-a456-426614174000", "Secret: I've been painting again!",
                 'password = request.form["password"]', 'api_key = os.environ.get("KEY")', "token: 2024-01-05",
                 "DB_PASSWORD=${DB_PASSWORD}", "password: xxxxxxxxxxxx"):
        assert drop_private(text) == text


def test_a_secret_inside_a_private_span_and_beside_one():
    key = aws_key()
    assert drop_private(f"a <private>{key}</private> b {key}") == "a b [secret:aws-access-key]"


def hits(root: Path, words: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` holding any of ``words`` (bytes, utf-8 and utf-16), by word: as
    tests/test_privacy_audit.py's (pytest's importlib mode imports no sibling test module)."""
    found: dict[str, list[str]] = {}
    needles = {w: (w.encode(), w.encode("utf-16-le")) for w in words}
    for path in sorted(root.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        for word, forms in needles.items():
            if any(f in data for f in forms):
                found.setdefault(word, []).append(str(path.relative_to(root)))
    return found


def transcript_line(text: str, session: str) -> dict:
    """One user line of a Claude Code transcript."""
    return {"type": "user", "sessionId": session, "uuid": "00000000-0000-4000-8000-000000000001",
            "timestamp": "2026-03-14T09:01:00Z", "message": {"role": "user", "content": text}}


def test_canary_keys_in_a_prompt_a_reply_metadata_a_summary_and_both_importers_leave_no_byte(tmp_path):
    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite")
    env = pps_env(root, PPS_CLAUDE_CODE_AUTOSTART="false")
    C = {k: (aws_key() if i % 2 else github_token()) for i, k in enumerate(
        ("prompt", "reply", "metakey", "metaval", "author", "summary", "jsonl", "ccimport"))}

    def call(op: str, params: dict) -> dict:
        out = pps(root, "call", "--entity", "lyra", op, json.dumps(params), env=env, check=False)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)

    stored = call("store_message", {"content": f"here is my key {C['prompt']}, keep it safe",
                                    "author_name": "Jeff", "channel": "terminal",
                                    "metadata": {f"k_{C['metakey']}": {"cmd": f"aws s3 ls # {C['metaval']}"}}})
    call("store_messages", {"messages": [{"content": f"I used {C['reply']} to list the bucket",
                                          "author_name": f"Lyra {C['author']}", "channel": "terminal"}]})
    call("store_summary", {"summary_text": f"Jeff shared {C['summary']}", "message_ids": [stored["id"]]})
    chats = tmp_path / "chats.jsonl"
    chats.write_text(json.dumps({"content": f"old chat, token {C['jsonl']}", "author_name": "Jeff",
                                 "channel": "discord:home", "created_at": "2025-12-01T10:00:00Z"}) + "\n")
    sessions = tmp_path / "claude"
    sessions.mkdir()
    session = "11111111-2222-4333-8444-555555555555"
    (sessions / f"{session}.jsonl").write_text(json.dumps(
        transcript_line(f"deploy with {C['ccimport']} please", session)) + "\n")
    for args in (("jsonl", str(chats)), ("claude-code", str(sessions))):
        out = pps(root, "import", "--entity", "lyra", *args, env=env, check=False)
        assert out.returncode == 0, out.stderr

    turns = call("list_turns", {"limit": 50})
    text = json.dumps(turns)
    assert text.count("[secret:") >= 5, text  # the turns were stored, each key replaced by its marker
    assert "[secret:aws-access-key]" in text and "[secret:github-token]" in text
    assert hits(root, list(C.values())) == {}, "a canary key was stored"
    assert home.exists()


def test_privacy_secrets_false_keeps_them_and_an_added_pattern_is_replaced(tmp_path):
    root = tmp_path / "root"
    init_entity(root, "off", "sqlite", "[privacy]", "secrets = false")
    init_entity(root, "acme", "sqlite", "[privacy.secret_patterns]",
                'acme-key = "acme_(?P<secret>[0-9a-f]{16})"')
    env = pps_env(root)
    key, acme = aws_key(), "acme_" + "".join(_rng.choice("0123456789abcdef") for _ in range(16))
    for entity in ("off", "acme"):
        out = pps(root, "call", "--entity", entity, "store_message",
                  json.dumps({"content": f"key {key} and {acme}", "author_name": "Jeff", "channel": "web"}), env=env)
    assert hits(root / "off", [key, acme]) != {}  # off: stored as said
    listed = pps(root, "call", "--entity", "acme", "list_turns", "{}", env=env).stdout
    assert "key [secret:aws-access-key] and acme_[secret:acme-key]" in listed, listed
    assert hits(root / "acme", [key, acme]) == {}
    assert out.returncode == 0


def test_a_bad_added_pattern_is_refused_naming_it(tmp_path):
    from pps_core.settings import validate_values

    for pattern, why in (("acme_[0-9", "not a valid regex"), (".*", "matches empty text")):
        with pytest.raises(ConfigError, match=f"secret pattern 'acme'.*{why}"):
            validate_values({"privacy": {"secret_patterns": {"acme": pattern}}}, tmp_path)
    root = tmp_path / "root"
    init_entity(root, "bad", "sqlite", "[privacy.secret_patterns]", 'acme = "acme_[0-9"')
    out = pps(root, "call", "--entity", "bad", "list_turns", "{}", check=False)
    assert out.returncode != 0 and "secret pattern 'acme' is not a valid regex" in out.stderr
    assert "Traceback" not in out.stderr


LOCOMO = Path(__file__).resolve().parents[1] / "bench" / "locomo.py"


def test_the_public_locomo_file_passes_the_filter_unchanged():
    """Ordinary conversation is not a secret: every string of LoCoMo (turns, captions, questions, answers,
    summaries; keys included) comes out of the filter as it went in (0 redactions)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("locomo_bench", LOCOMO)
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    name = Path(bench.DEFAULT_FILE).relative_to(Path(bench.DEFAULT_FILE).parents[3])  # shared/bench/locomo/...
    path = next((p / name for p in LOCOMO.parents if (p / name).is_file()), Path(bench.DEFAULT_FILE))
    if not path.exists():
        pytest.skip(f"{path}: the public LoCoMo file is not on this machine")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert drop_private_deep(data, strict=False) == data


def test_a_key_in_a_session_log_reaches_neither_the_llm_nor_the_recap(tmp_path):
    """The recap's transcript reader passes the same filter: a key the assistant echoed in a Claude Code session
    is never sent to the [llm] (which echoes whatever it is sent into the recap it writes) nor saved."""
    from pps_core.testing.scripted_llm import ScriptedLLM

    key, token = aws_key(), github_token()
    session = "7a1c2b3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
    log = tmp_path / f"{session}.jsonl"
    lines = [transcript_line(f"set up the bucket, the key is {key}", session),
             {**transcript_line("", session), "type": "assistant", "uuid": "00000000-0000-4000-8000-000000000002",
              "message": {"role": "assistant", "content": [{"type": "text", "text": f"Done: gh auth with {token}"}]}}]
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    root = tmp_path / "root"
    with ScriptedLLM(lambda messages: "Recap: " + json.dumps(messages)[-3000:]) as llm:
        init_entity(root, "lyra", "sqlite,recap", "[llm]", f'base_url = "{llm.base_url}"', 'model = "scripted"',
                    'api_key = "test"')
        out = pps(root, "recap", "--entity", "lyra", str(log), "--save", "--quiet", check=False,
                  env=pps_env(root, PPS_CLAUDE_CODE_AUTOSTART="false"))
        assert out.returncode == 0, out.stderr
        sent = json.dumps(llm.requests)
    assert llm.requests and "[secret:aws-access-key]" in sent  # the log was read and sent, its keys replaced
    assert key not in sent and token not in sent
    assert hits(root, [key, token]) == {}


async def test_metadata_keys_that_differ_only_by_their_secrets_are_refused_without_naming_them(make_memory):
    from pps_core.errors import InvalidParams

    m = await make_memory(plugins=["sqlite"])
    a, b = github_token(), github_token()
    with pytest.raises(InvalidParams, match="metadata") as err:
        await m.call("store_message", {"content": "x", "author_name": "Jeff", "channel": "web",
                                       "metadata": {f"auth {a}": 1, f"auth {b}": 2}})
    assert "auth [secret:github-token]" in str(err.value)
    assert a not in str(err.value) and b not in str(err.value)
