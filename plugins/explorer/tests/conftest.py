"""One real `pps serve http` for the explorer's tests: 'lyra' with every default layer, 'orion' with crystals
only (pages whose operations are missing), 'nova' without a token (loopback rules). Seeded through REST."""

from __future__ import annotations

import httpx
import pytest

from pps_core.testing.server import init_entity, start_server

FULL = "sqlite,crystals,chroma,embeddings,graphiti,http,explorer"
XSS = '<script>window.__pwned=1;alert("xss")</script><img src=x onerror="window.__pwned=2;alert(2)"> tea?'


def _seed(srv) -> dict:
    def call(op, params, entity="lyra"):
        r = srv.call(op, params, entity=entity, timeout=120)
        assert r.status_code == 200, (op, r.text)
        return r.json()

    turns = [{"content": f"Morning {i}: we talked about the harbour and the first snow", "author_name": "Jeff",
              "channel": "terminal:abc", "created_at": f"2026-03-02T08:{i:02d}:00Z"} for i in range(30)]
    turns += [{"content": f"Evening {i} on discord, owls outside", "author_name": "Lyra", "channel": "discord:home",
               "created_at": f"2026-03-02T20:{i:02d}:00Z"} for i in range(8)]
    turns.append({"content": XSS, "author_name": "Mallory<b>", "channel": "discord:home",
                  "created_at": "2026-03-03T09:00:00Z"})
    stored = call("store_messages", {"messages": turns})
    call("store_summary", {"summary_text": "Jeff and Lyra talked about the harbour and the first snow.",
                           "message_ids": stored["ids"][:20]})
    call("crystallize", {"content": "# Crystal one\n\nWe began."})
    call("crystallize", {"content": "Crystal two: the harbour <script>alert(3)</script>"})
    call("anchor_save", {"title": "First snow", "content": "We watched the **first snow** over the harbour.",
                         "tags": ["winter"], "location": "balcony"})
    call("anchor_save", {"title": "Hostile", "content": "<img src=x onerror=alert(4)> [click](javascript:alert(5))"})
    facts = [call("texture_add_triplet", {"source": s, "relationship": r, "target": t})
             for s, r, t in (("Lyra", "LOVES", "Jeff"), ("Jeff", "LIVES_IN", "Chicago"), ("Lyra", "WATCHES", "Snow"),
                             ("Lyra", "WRITES_IN", "Journal"), ("Brandi", "VISITS", "Lyra"),
                             ("Jeff", "REPAIRS", "Kitchen lamp"), ("Brandi", "PAINTS", "Harbour"))]
    call("ambient_recall", {"context": "the first snow"})
    return {"turn_ids": stored["ids"], "facts": facts}


@pytest.fixture(scope="module")
def explorer_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("explorer")
    init_entity(root, "lyra", FULL)
    init_entity(root, "orion", "crystals,http,explorer")
    toml = root / "orion" / "pps.toml"  # orion lives in Chicago: its pages show times in that zone
    toml.write_text(toml.read_text().replace('timezone = "UTC"', 'timezone = "America/Chicago"'))
    init_entity(root, "nova", "crystals,http,explorer")
    (root / "nova" / "token").unlink()
    srv = start_server(root, "--entity", "lyra", "--entities", "orion,nova", timeout=120)
    srv.seeded = _seed(srv)
    yield srv
    srv.stop()
    log = srv.log.read_text()
    assert "Traceback" not in log, log[-3000:]


@pytest.fixture
def ui(explorer_server):
    """An httpx client for lyra's pages with the bearer token (no cookie, no CSRF needed)."""
    with httpx.Client(base_url=f"{explorer_server.url}/ui/lyra", headers=explorer_server.headers("lyra"),
                      timeout=30) as client:
        yield client
