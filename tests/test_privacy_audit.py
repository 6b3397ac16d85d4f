"""The privacy audit (issue 22): "forgotten" and "<private>" hold in every copy PPS keeps.

Canaries (unique words) go in through every capture path of an entity with every default plugin, served by a
real `pps serve http`: REST, MCP over HTTP, `pps call`, the Claude Code hooks, both importers, `texture_add`,
a summary, a word-photo, a crystal and a recap. The forgettable ones are then forgotten through every forget
path (forget_turns, forget_range, forget_search confirmed from another process, anchor_delete(forget),
crystal_forget, texture_delete) and the importers are run again (tombstones: nothing comes back). The
`<private>` ones are never forgotten: they must never have been stored.

Then every byte is searched: every file under the PPS root (homes, stores, indexes, logs, the hooks' folder),
and every file of a fresh `pps backup`, extracted. Zero hits.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import tarfile
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from pps_core.testing.scripted_llm import ScriptedLLM, minimal_instance
from pps_core.testing.server import init_entity, pps, pps_env, start_server

pytest.importorskip("pps_graphiti")
pytest.importorskip("pps_chroma")
pytest.importorskip("pps_claude_code")
pytest.importorskip("pps_codex")

PLUGINS = "sqlite,crystals,chroma,embeddings,graphiti,recap,upkeep,mcp,http"
SESSION = "7a1c2b3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"
RUN = secrets.token_hex(3)


def canary(kind: str, name: str) -> str:
    """One word nothing else contains: ``zqf<name><run>`` (forgotten) or ``zqp...`` (private)."""
    return f"zq{kind}{name}{RUN}"


class GraphLLM(ScriptedLLM):
    """Answers graphiti's structured requests (entities = capitalised words, one fact linking the first two, the
    fact's text the message itself) and any other request (summaries, recaps) by echoing what it was sent: the
    worst case, a model that quotes everything."""

    def respond(self, body):
        import re

        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        if not fmt:
            return "Summary: " + text[-2000:]
        current = re.search(r"<CURRENT[_ ]MESSAGE>(.*?)</CURRENT[_ ]MESSAGE>", text, re.S)
        said = re.sub(r"^\s*[\w ]+:\s", "", (current.group(1) if current else "").strip())
        names = list(dict.fromkeys(re.findall(r"\b[A-Z][a-z]+\b", said)))
        name = fmt.get("name")
        if name == "ExtractedEntities":
            return json.dumps({"extracted_entities": [{"name": n, "entity_type_id": 0} for n in names]})
        if name == "ExtractedEdges":
            edges = [] if len(names) < 2 else [{"source_entity_name": names[0], "target_entity_name": names[1],
                                                "relation_type": "MENTIONS", "fact": said}]
            return json.dumps({"edges": edges})
        return json.dumps(minimal_instance(fmt.get("schema", {})))


def transcript_line(role: str, text: str, n: int, minute: int) -> dict:
    content = text if role == "user" else [{"type": "text", "text": text}]
    return {"type": role, "sessionId": SESSION, "uuid": f"00000000-0000-4000-8000-{n:012d}",
            "timestamp": f"2026-03-14T09:{minute:02d}:00Z", "message": {"role": role, "content": content}}


def hits(root: Path, words: list[str]) -> dict[str, list[str]]:
    """Every file under ``root`` holding any of ``words`` (bytes, utf-8 and utf-16), by word."""
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


#: Plugins of the default set that keep copies of turns outside the turn store (non-origin ``TurnCopy``s).
KEEPERS = ("graphiti", "recap")

#: Loaded by every ``python`` the test starts without -I (the server, ``pps call``, the importers): with
#: PPS_AUDIT_ABLATE=<plugin>, that plugin's declared copies are left out of the lineage, as if its forget
#: handler had been removed.
ABLATE = """
import os
name = os.environ.get("PPS_AUDIT_ABLATE")
if name:
    import pps_core.lineage as lineage
    collect = lineage.Lineage.collect.__func__

    def ablated(cls, pm, memory):
        kept = collect(cls, pm, memory)
        kept.copies = [c for c in kept.copies if c.plugin != name]
        return kept

    lineage.Lineage.collect = classmethod(ablated)
"""


def test_forgotten_and_private_canaries_leave_no_byte_anywhere(tmp_path):
    found = audit(tmp_path)
    assert found["root"] == {}, "PPS's files keep forgotten or private text"
    assert found["backup"] == {}, "the backup keeps forgotten or private text"
    assert found["llm"] == [], "private text was sent to the LLM"
    keepers = sorted({c["plugin"] for c in found["copies"] if not c["origin"]})
    assert keepers == sorted(KEEPERS), "a plugin declares copies of turns: add it to KEEPERS (the ablation below)"


@pytest.mark.parametrize("plugin", KEEPERS)
def test_the_audit_fails_when_one_plugins_forget_is_removed(tmp_path, plugin):
    found = audit(tmp_path, ablate=plugin)
    assert found["root"], f"without {plugin}'s forget, forgotten text should have stayed in its copy"


def audit(tmp_path: Path, ablate: str | None = None) -> dict:
    root = tmp_path / "root"
    claude = tmp_path / "claude-project"  # the user's transcripts: their files, not PPS's copies
    claude.mkdir()
    F = {k: canary("f", k) for k in ("rest", "mcp", "cli", "hook", "ccimport", "jsonl", "texture", "summary",
                                     "anchor", "crystal", "recap", "graph", "codex")}
    P = {k: canary("p", k) for k in ("rest", "meta", "metakey", "nested", "mcp", "cli", "hook", "ccimport",
                                     "jsonl", "texture", "recap", "codex")}
    with GraphLLM() as llm:
        home = init_entity(root, "lyra", PLUGINS, "[llm]", f'base_url = "{llm.base_url}"', 'model = "scripted"',
                           'api_key = "test"')
        env = pps_env(root, PPS_CLAUDE_CODE_USER_NAME="ana", PPS_CLAUDE_CODE_AUTOSTART="false")
        if ablate:
            site = tmp_path / "ablate"
            site.mkdir()
            (site / "sitecustomize.py").write_text(ABLATE)
            env.update(PPS_AUDIT_ABLATE=ablate, PYTHONPATH=str(site))
        server = start_server(root, "--entity", "lyra", env=env)
        try:
            call = lambda op, params: _ok(server.call(op, params, timeout=120))  # noqa: E731

            # -- capture: REST (content, metadata value and key, nested tags) --------------------------------
            rest = call("store_message", {"content": f"Jeff told Lyra about {F['rest']} and <private>{P['rest']}"
                                                     "</private> today", "author_name": "Jeff", "channel": "web",
                                          })
            call("store_message", {"content": f"a <private>b <private>c</private> {P['nested']} </private> e",
                                   "author_name": "Jeff", "channel": "web",
                                   "metadata": {"note": f"<private>{P['meta']}</private>",
                                                f"<private>{P['metakey']}</private>k": 1}})
            graph_turn = call("store_message", {"content": f"Jeff met Orla near {F['graph']}",
                                                "author_name": "Jeff", "channel": "web"})
            call("store_message", {"content": "Jeff met Orla again for tea", "author_name": "Jeff",
                                   "channel": "web"})  # Jeff and Orla survive the forgetting
            summary_turn = call("store_message", {"content": f"the plan called {F['summary']}",
                                                  "author_name": "Jeff", "channel": "web"})
            call("store_summary", {"summary_text": f"They discussed {F['summary']}.",
                                   "message_ids": [summary_turn["id"]], "channels": ["web"]})

            # -- capture: MCP over HTTP ------------------------------------------------------------------------
            async def over_mcp():
                http = httpx2.AsyncClient(headers=server.auth(), timeout=60)
                async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
                    saved = await client.call_tool("store_message", {
                        "content": f"over mcp {F['mcp']} <private>{P['mcp']}</private>", "author_name": "Jeff",
                        "channel": "mcpchan", "created_at": "2026-03-10T10:00:00Z"})
                    assert not saved.is_error, saved.content

            asyncio.run(over_mcp())

            # -- capture: pps call (a process of its own, forwarded to the server) ---------------------------
            _run(root, env, "call", "--entity", "lyra", "store_message", json.dumps(
                {"content": f"from the shell {F['cli']} <private>{P['cli']}</private>", "author_name": "Jeff",
                 "channel": "terminal:cli"}))

            # -- capture: Claude Code hooks (Stop captures the transcript; SessionEnd writes the recap) ------
            transcript = claude / f"{SESSION}.jsonl"
            lines = [transcript_line("user", f"remember {F['hook']} and <private>{P['hook']}</private>", 1, 1),
                     transcript_line("assistant", "Noted.", 2, 2),
                     transcript_line("user", f"recap this {F['recap']} please <private>{P['recap']}</private>", 3, 3),
                     transcript_line("assistant", f"Will do: {F['recap']}.", 4, 4)]
            transcript.write_text("".join(json.dumps(line) + "\n" for line in lines))
            for event in ("SessionStart", "UserPromptSubmit", "Stop", "SessionEnd"):
                _hook(root, env, claude, event, transcript)
            _run(root, env, "recap", "--entity", "lyra", str(transcript), "--save", "--quiet")

            # -- capture: another agent host through the hook core (Codex: the prompt, then the reply) -------
            _codex_hooks(root, env, claude, f"remember {F['codex']} <private>{P['codex']}</private>",
                         f"Remembered {F['codex']}.")

            # -- capture: both importers ---------------------------------------------------------------------
            imported = claude / "imported"
            imported.mkdir()
            other = imported / "11111111-2222-4333-8444-555555555555.jsonl"
            other.write_text(json.dumps({**transcript_line(
                "user", f"old session {F['ccimport']} <private>{P['ccimport']}</private>", 9, 9),
                "sessionId": "11111111-2222-4333-8444-555555555555"}) + "\n")
            chats = claude / "chats.jsonl"
            chats.write_text(json.dumps({"content": f"old chat {F['jsonl']} <private>{P['jsonl']}</private>",
                                         "author_name": "Jeff", "channel": "discord:home",
                                         "created_at": "2025-12-01T10:00:00Z"}) + "\n")
            reimport = [("import", "--entity", "lyra", "claude-code", str(imported)),
                        ("import", "--entity", "lyra", "jsonl", str(chats))]
            for args in reimport:
                _run(root, env, *args)

            # -- capture: the graph, word-photos, crystals ---------------------------------------------------
            texture = call("texture_add", {"content": f"Mira saw Tomas at {F['texture']} "
                                                      f"<private>{P['texture']}</private>", "channel": "web"})
            anchor = call("anchor_save", {"content": f"A word-photo of {F['anchor']}", "title": "canary photo"})
            crystal = call("crystallize", {"content": f"Crystal: {F['crystal']}"})
            call("ingest_batch_to_graphiti", {"batch_size": 50})

            # -- forget, through every path -------------------------------------------------------------------
            ids = lambda word: [t["id"] for t in call("raw_search", {"query": word, "limit": 50})["results"]  # noqa: E731
                                if word in t.get("content", "")]
            assert len(ids(F["codex"])) == 2, "the Codex hooks stored the prompt and the reply"
            forgotten = call("forget_turns", {"ids": [rest["id"], graph_turn["id"], summary_turn["id"],
                                                      *ids(F["ccimport"]), *ids(F["jsonl"]), *ids(F["codex"])],
                                              "requested_by": "audit"})
            assert not forgotten.get("incomplete"), forgotten

            async def forget_over_mcp():
                http = httpx2.AsyncClient(headers=server.auth(), timeout=60)
                async with Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client:
                    out = await client.call_tool("forget_range", {"channel": "mcpchan", "since": "2026-03-10T00:00:00Z",
                                                                  "until": "2026-03-11T00:00:00Z"})
                    assert not out.is_error and out.structured_content["count"] == 1, out.content

            asyncio.run(forget_over_mcp())
            first = json.loads(_run(root, env, "call", "--entity", "lyra", "forget_search",
                                    json.dumps({"query": F["cli"]})).stdout)
            assert [m["content"] for m in first["matches"]] == [f"from the shell {F['cli']}"], first
            confirmed = json.loads(_run(root, env, "call", "--entity", "lyra", "forget_search", json.dumps(
                {"query": F["cli"], "confirm": first["confirm"]})).stdout)
            assert confirmed["count"] == 1
            session_turns = call("forget_range", {"channel": "terminal", "since": "2026-03-14T00:00:00Z",
                                                  "until": "2026-03-15T00:00:00Z"})
            assert session_turns["count"] >= 4, session_turns
            call("anchor_delete", {"filename": anchor["saved"], "forget": True})
            call("crystal_forget", {"name": crystal["created"]})
            call("texture_delete", {"uuid": texture["episode"]})

            copies = call("turn_copies", {})["copies"]

            # -- nothing comes back: the importers again -----------------------------------------------------
            for args in reimport:
                _run(root, env, *args)
            for word in (F["ccimport"], F["jsonl"]):
                assert ids(word) == [], f"{word} was imported again after it was forgotten"
        finally:
            server.stop()

        # -- a fresh backup, extracted ---------------------------------------------------------------------------
        _run(root, env, "backup", "--entity", "lyra", str(tmp_path / "lyra.tar.gz"))
        extracted = tmp_path / "extracted"
        with tarfile.open(tmp_path / "lyra.tar.gz") as tar:
            tar.extractall(extracted, filter="data")
        sent_to_llm = json.dumps(llm.requests)

    words = [*F.values(), *P.values()]
    assert (home / "pps.db").exists()
    return {"root": hits(root, words), "backup": hits(extracted, words), "copies": copies,
            "llm": [w for w in P.values() if w in sent_to_llm]}


def _ok(response: httpx.Response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def _run(root: Path, env: dict, *args: str):
    out = pps(root, *args, env=env, check=False, timeout=180)
    assert out.returncode == 0, (args, out.stdout[-2000:], out.stderr[-3000:])
    return out


def _hook(root: Path, env: dict, cwd: Path, event: str, transcript: Path):
    import subprocess

    from pps_claude_code.install import hooks_config

    command = hooks_config("lyra", root / "lyra")[event][0]["hooks"][0]["command"]
    payload = {"session_id": SESSION, "transcript_path": str(transcript), "cwd": str(cwd),
               "hook_event_name": event, "source": "startup", "reason": "exit", "prompt": "hello",
               "stop_hook_active": False}
    out = subprocess.run(command, shell=True, input=json.dumps(payload), capture_output=True, text=True, env=env,
                         cwd=cwd, timeout=60)
    assert out.returncode == 0, (event, out.stderr)


def _codex_hooks(root: Path, env: dict, cwd: Path, prompt: str, reply: str):
    """Codex CLI's UserPromptSubmit and Stop, through the command line `pps setup codex` installs (the hook core's
    state and log are PPS's files too)."""
    import subprocess

    from pps_codex.host import CodexHost
    from pps_hooks.host import hook_command

    base = {"session_id": "019d036d-7a10-7c3e-9b2f-5e8d4c1a2b3f", "turn_id": "019d036d-c7fa-72d2-b6fd-78878bfe34e4",
            "transcript_path": str(cwd / "rollout.jsonl"), "cwd": str(cwd), "model": "gpt-5.3-codex",
            "permission_mode": "default"}
    for event, extra in (("UserPromptSubmit", {"prompt": prompt}),
                         ("Stop", {"stop_hook_active": False, "last_assistant_message": reply})):
        command = hook_command(CodexHost(), event, "lyra", root / "lyra")
        out = subprocess.run(command, shell=True, input=json.dumps({**base, "hook_event_name": event, **extra}),
                             capture_output=True, text=True, env=env, cwd=cwd, timeout=60)
        assert out.returncode == 0, (event, out.stderr)


def test_a_forget_the_graph_could_not_do_is_owed_and_finished_later_leaving_no_byte(tmp_path):
    """Issue 35 item 2: a canary ingested into the graph is forgotten while the graph refuses writes (its disk under
    ``min_free_mb``): the answer names the graph as pending and ``pps health`` shows the forget owed. The server
    is restarted with the graph writable: the open finishes the forget. Then no byte of the canary is anywhere:
    the home (the owed record in pps.db included), the graph's files, the logs, a fresh backup."""
    root = tmp_path / "root"
    word = canary("f", "owedgraph")
    with GraphLLM() as llm:
        init_entity(root, "lyra", "sqlite,embeddings,graphiti,recap,upkeep,http", "[llm]", f'base_url = "{llm.base_url}"', 'model = "scripted"',
                    'api_key = "test"')
        env = pps_env(root, PPS_CLAUDE_CODE_AUTOSTART="false")
        server = start_server(root, "--entity", "lyra", env=env)
        try:
            call = lambda op, params: _ok(server.call(op, params, timeout=120))  # noqa: E731
            turn = call("store_message", {"content": f"Jeff met Orla near {word}", "author_name": "Jeff",
                                          "channel": "web"})
            call("store_message", {"content": "Jeff met Orla again for tea", "author_name": "Jeff", "channel": "web"})
            call("ingest_batch_to_graphiti", {"batch_size": 50})
        finally:
            server.stop()

        full = {**env, "PPS_GRAPHITI_MIN_FREE_MB": str(10**9)}  # the graph's disk "full": its writes are refused
        server = start_server(root, "--entity", "lyra", env=full, log_name="server-full.log")
        try:
            out = _ok(server.call("forget_turns", {"ids": [turn["id"]], "requested_by": "audit"}, timeout=120))
            assert out["forgotten"] == [turn["id"]] and "graphiti/graph episodes, facts and entity summaries" in \
                out["pending"], out
            health = json.loads(pps(root, "health", "--entity", "lyra", "--json", env=full, check=False).stdout)
            assert health["owed_forgets"]["count"] == 1, health
            text = pps(root, "health", "--entity", "lyra", env=full, check=False).stdout
            assert "forgets owed: 1" in text and "graphiti/graph episodes" in text, text
            assert hits(root, [word]), "the graph should still hold the canary while its forget is owed"
        finally:
            server.stop()

        server = start_server(root, "--entity", "lyra", env=env, log_name="server-back.log")
        try:
            for _ in range(300):  # the open retries what is owed, in the background
                health = _ok(server.call("pps_health", {}))
                if health["owed_forgets"]["count"] == 0:
                    break
                import time

                time.sleep(0.2)
            assert health["owed_forgets"]["count"] == 0, health["owed_forgets"]
            assert _ok(server.call("turn_copies", {}))["owed"] == []
        finally:
            server.stop()
        _run(root, env, "backup", "--entity", "lyra", str(tmp_path / "lyra.tar.gz"))
        extracted = tmp_path / "extracted"
        with tarfile.open(tmp_path / "lyra.tar.gz") as tar:
            tar.extractall(extracted, filter="data")
    assert hits(root, [word]) == {}, "a forget once owed left forgotten text behind"
    assert hits(extracted, [word]) == {}, "the backup keeps text of a forget once owed"


# -- issue 35: the edges where a second copy, a failure or another field is involved (items 4 to 7) -------------------


def _scan(root: Path, words: list[str], backup_from: Path | None = None, env: dict | None = None) -> dict:
    """Every canary byte under ``root``, and in a fresh backup of lyra (extracted) when ``backup_from`` is given."""
    found = {"root": hits(root, words)}
    if backup_from is not None:
        _run(root, env or pps_env(root), "backup", "--entity", "lyra", str(backup_from / "lyra.tar.gz"))
        extracted = backup_from / "extracted"
        with tarfile.open(backup_from / "lyra.tar.gz") as tar:
            tar.extractall(extracted, filter="data")
        found["backup"] = hits(extracted, words)
    return found


def _call(root: Path, env: dict, op: str, params: dict) -> dict:
    return json.loads(_run(root, env, "call", "--entity", "lyra", op, json.dumps(params)).stdout)


def test_an_export_taken_before_the_forget_brings_nothing_back(tmp_path):
    """Item 4: turns stored by plain store_message (no message_id) are exported, forgotten, and the old export is
    imported again, by `pps import jsonl` and by `pps import pps`: nothing comes back, nothing is stored twice."""
    root = tmp_path / "root"
    init_entity(root, "lyra", "sqlite,crystals")
    env = pps_env(root)
    F = [canary("f", f"export{i}") for i in range(2)]
    for i, word in enumerate(["a kept turn", *F]):
        _call(root, env, "store_message", {"content": f"said {word}", "author_name": "Jeff", "channel": "web",
                                           "created_at": f"2026-03-01T0{i}:00:00Z"})
    export = tmp_path / "export"  # the user's copy, outside PPS: theirs to delete
    _run(root, env, "export", "--entity", "lyra", str(export))
    ids = [t["id"] for t in _call(root, env, "list_turns", {"limit": 10})["turns"]]
    _call(root, env, "forget_turns", {"ids": ids[1:], "requested_by": "audit"})
    again = _run(root, env, "import", "--entity", "lyra", "jsonl", str(export / "turns.jsonl"))
    assert "2 forgotten earlier" in again.stdout, again.stdout
    assert [t["content"] for t in _call(root, env, "list_turns", {"limit": 10})["turns"]] == ["said a kept turn"]
    _call(root, env, "forget_turns", {"ids": ids[:1], "requested_by": "audit"})
    _run(root, env, "import", "--entity", "lyra", "pps", str(export))  # a fresh-looking entity: still nothing
    assert _call(root, env, "list_turns", {"limit": 10})["turns"] == []
    found = _scan(root, F, tmp_path, env)
    assert found == {"root": {}, "backup": {}}


def test_a_forgotten_session_does_not_come_back_from_a_moved_log(tmp_path):
    """Item 5: a session log is recapped, a turn is forgotten (the recap goes), and the log's entries come back at
    a new path (rotated, or repeated by a resumed session): no recap, nor the startup package, holds them again."""
    root = tmp_path / "root"
    logs = tmp_path / "logs"
    logs.mkdir()
    init_entity(root, "lyra", "sqlite,recap", "[recap]", f'logs = ["{logs}/*.jsonl"]')
    env = pps_env(root)
    word = canary("f", "movedlog")
    log = logs / f"{SESSION}.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in [
        transcript_line("user", f"please remember {word} for the launch", 1, 1),
        transcript_line("assistant", f"I will remember {word}.", 2, 2)]))
    _run(root, env, "recap", "--entity", "lyra", "--save", "--quiet")
    assert word in (root / "lyra" / "_recap.md").read_text()
    turn = _call(root, env, "store_message", {"content": "a turn to forget", "author_name": "Jeff", "channel": "web"})
    _call(root, env, "forget_turns", {"ids": [turn["id"]], "requested_by": "audit"})
    moved = logs / "rotated-1.jsonl"
    moved.write_text(log.read_text().replace(SESSION, "0f0f0f0f-1111-4222-8333-444444444444")
                     + json.dumps(transcript_line("user", "and now the weather", 3, 3)) + "\n")
    log.unlink()
    _run(root, env, "recap", "--entity", "lyra", str(moved), "--save", "--quiet")
    startup = _call(root, env, "ambient_recall", {"context": "startup"})
    assert word not in json.dumps(startup)
    assert _scan(root, [word]) == {"root": {}}


def test_a_backup_killed_half_way_leaves_no_copy_in_the_home(tmp_path):
    """Item 6: the entity's owner dies while pps_backup copies its database into <home>/backups; the next open
    removes what it left, and a forget then reaches every copy."""
    import subprocess
    import sys
    import time

    root = tmp_path / "root"
    home = init_entity(root, "lyra", "sqlite")
    env = pps_env(root)
    word = canary("f", "killedbackup")
    _call(root, env, "store_message", {"content": f"the {word} code", "author_name": "Jeff", "channel": "web"})
    marker = tmp_path / "copying"
    script = f"""
import asyncio, time
import pps_core.builtin.backup as backup
from pps_core.memory import Memory
from pps_core.settings import load_settings
original = backup._copy_sqlite
def slow(src, dest):
    original(src, dest)
    open({str(marker)!r}, "w").close()
    time.sleep(600)
backup._copy_sqlite = slow
async def go():
    async with Memory(load_settings(None, {str(home)!r}, must_exist=True)) as memory:
        await memory.call("pps_backup", {{"path": "nightly.tar.gz"}})
asyncio.run(go())
"""
    proc = subprocess.Popen([sys.executable, "-P", "-c", script], env=env)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert marker.exists(), "the backup never reached its copy"
    finally:
        proc.kill()  # kill -9, half-way
        proc.wait()
    assert hits(root, [word])  # the database, and the half-made copy beside the archive
    ids = [r["id"] for r in _call(root, env, "raw_search", {"query": word})["results"]]
    _call(root, env, "forget_turns", {"ids": ids, "requested_by": "audit"})
    assert _scan(root, [word], tmp_path, env) == {"root": {}, "backup": {}}


def test_private_spans_in_every_field_leave_no_byte_and_reach_no_llm(tmp_path):
    """Item 7: <private> spans in every text field a client writes (a turn's author, channel, session and message
    ids, metadata keys and values; a summary, its channels and type; a crystal; a word-photo's body, title, tags and
    location, saved and edited; a read cursor; who asked to forget; texture_add): never stored, never backed up,
    never sent to the LLM (graph ingestion sends the author's name)."""
    root = tmp_path / "root"
    fields = ("author", "channel", "session", "mid", "metakey", "metaval", "batchauthor", "summary", "sumchan",
              "sumtype", "crystal", "body", "title", "tag", "place", "editbody", "edittag", "editplace", "consumer",
              "who", "texture", "texchan")
    P = {k: canary("p", k) for k in fields}
    hide = {k: f"<private>{w}</private>" for k, w in P.items()}
    with GraphLLM() as llm:
        init_entity(root, "lyra", PLUGINS, "[llm]", f'base_url = "{llm.base_url}"', 'model = "scripted"',
                    'api_key = "test"')
        env = pps_env(root, PPS_CLAUDE_CODE_AUTOSTART="false")
        server = start_server(root, "--entity", "lyra", env=env)
        try:
            call = lambda op, params: _ok(server.call(op, params, timeout=120))  # noqa: E731
            stored = call("store_message", {"content": "Jeff met Orla at the pier", "author_name": f"Jeff {hide['author']}",
                                            "channel": f"web{hide['channel']}", "session_id": f"s{hide['session']}",
                                            "message_id": f"m1{hide['mid']}",
                                            "metadata": {f"k{hide['metakey']}": f"v{hide['metaval']}"}})
            call("store_messages", {"messages": [{"content": "Orla waved back", "author_name":
                                                  f"Orla {hide['batchauthor']}", "channel": "web"}]})
            call("store_summary", {"summary_text": f"They met. {hide['summary']}", "message_ids": [stored["id"]],
                                   "channels": [f"web{hide['sumchan']}"], "summary_type": f"work{hide['sumtype']}"})
            call("crystallize", {"content": f"Crystal: the pier {hide['crystal']}"})
            photo = call("anchor_save", {"content": f"The pier at dusk {hide['body']}",
                                         "title": f"Pier {hide['title']}", "tags": [f"dusk{hide['tag']}"],
                                         "location": f"harbor {hide['place']}"})
            call("anchor_edit", {"filename": photo["saved"], "content": f"The pier at dawn {hide['editbody']}",
                                 "tags": [f"dawn{hide['edittag']}"], "location": f"quay {hide['editplace']}"})
            call("poll_channels", {"consumer_key": f"reader{hide['consumer']}"})
            call("forget_turns", {"ids": [999_999], "requested_by": f"Jeff{hide['who']}"})
            call("texture_add", {"content": f"Mira saw Tomas {hide['texture']}", "channel": f"web{hide['texchan']}"})
            call("ingest_batch_to_graphiti", {"batch_size": 50})
            assert any("Jeff" in json.dumps(r) for r in llm.requests), "the graph did not ingest the turns"
        finally:
            server.stop()
        found = _scan(root, list(P.values()), tmp_path, env)
        sent = json.dumps(llm.requests)
    assert found == {"root": {}, "backup": {}}
    assert [w for w in P.values() if w in sent] == []


class _DuplicatingGraphLLM(GraphLLM):
    """GraphLLM that calls every new fact a duplicate of the first existing one, as a real model does for a
    paraphrase: graphiti then merges the later turn's fact into the earlier edge, which keeps the earlier text."""

    def respond(self, body):
        import re

        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        if fmt.get("name") == "EdgeDuplicate":
            text = "\n".join(str(m.get("content")) for m in body.get("messages", []))
            existing = re.search(r"<EXISTING FACTS>(.*?)</EXISTING FACTS>", text, re.S)
            return json.dumps({"duplicate_facts": [0] if existing and "idx" in existing.group(1) else [],
                               "contradicted_facts": []})
        return super().respond(body)


def test_a_graph_fact_a_later_turn_duplicated_leaves_with_the_forgotten_turn(tmp_path):
    """Item 3: the forgotten turn wrote a graph fact, a later turn said it again and the LLM merged the two: the
    edge survives on the later turn's episode, but its text came from the forgotten one. After the forget no byte
    of the canary is in the home (graph files included) or a fresh backup."""
    root = tmp_path / "root"
    word = canary("f", "dupfact")
    with _DuplicatingGraphLLM() as llm:
        init_entity(root, "lyra", "sqlite,embeddings,graphiti", "[llm]", f'base_url = "{llm.base_url}"',
                    'model = "scripted"', 'api_key = "test"', "[graphiti]", "background_ingest = false")
        env = pps_env(root)
        first = _call(root, env, "store_message", {"content": f"Ada tends Lamp with the {word} oil",
                                                   "author_name": "Jeff", "channel": "web"})
        _call(root, env, "store_message", {"content": "Ada tends Lamp every night", "author_name": "Jeff",
                                           "channel": "web"})
        assert _call(root, env, "ingest_batch_to_graphiti", {"batch_size": 5})["ingested"] == 2
        facts = _call(root, env, "texture_facts", {"limit": 10})
        assert word in json.dumps(facts), "the merged fact should hold the first turn's text before the forget"
        out = _call(root, env, "forget_turns", {"ids": [first["id"]], "requested_by": "audit"})
        assert out["forgotten"] == [first["id"]] and not out.get("pending"), out
        assert word not in json.dumps(_call(root, env, "texture_facts", {"limit": 10}))
    assert _scan(root, [word], tmp_path, env) == {"root": {}, "backup": {}}
