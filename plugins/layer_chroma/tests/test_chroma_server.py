"""Word-photos with Chroma in client/server mode: a real `chroma run` server on 127.0.0.1, started here."""

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from pps_core.errors import Unavailable
from pps_core.testing import LayerContract

PLUGINS = ["chroma", "embeddings"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_port(tmp_path_factory):
    """`chroma run` (the server the chromadb package ships) on a free loopback port, data in a temp dir."""
    exe = shutil.which("chroma", path=str(Path(sys.executable).parent)) or shutil.which("chroma")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    log = open(data / "server.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([exe, "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not start: {(data / 'server.log').read_text()[-2000:]}")
            time.sleep(0.1)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def server_settings(port: int, **extra) -> dict:
    return {"chroma": {"mode": "http", "host": "127.0.0.1", "port": port, **extra}}


class TestChromaServerContract(LayerContract):
    plugins = PLUGINS
    layer_name = "core_anchors"

    @pytest.fixture
    async def memory(self, make_memory, chroma_port, request):
        name = "contract_" + request.node.name.split("[")[0][-40:]
        return await make_memory(name, plugins=PLUGINS, **server_settings(chroma_port))

    async def add_items(self, memory, texts):
        for i, text in enumerate(texts):
            await memory.call("anchor_save", {"title": f"item {i}", "content": text})


async def test_the_index_lives_on_the_server_one_collection_per_entity(make_memory, chroma_port, pps_home):
    import chromadb
    from chromadb.config import Settings

    lyra = await make_memory("lyra", plugins=PLUGINS, **server_settings(chroma_port))
    nexus = await make_memory("nexus", plugins=PLUGINS, **server_settings(chroma_port))
    await lyra.call("anchor_save", {"title": "First snow", "content": "We watched the first snow over the harbour."})
    await nexus.call("anchor_save", {"title": "Taxes", "content": "Quarterly tax forms, dull but done."})
    found = await lyra.call("anchor_search", {"query": "winter weather by the sea", "limit": 5})
    assert [r["source"] for r in found["results"]] == ["first-snow.md"]  # nothing of nexus's
    client = chromadb.HttpClient(host="127.0.0.1", port=chroma_port, settings=Settings(anonymized_telemetry=False))
    names = {c.name for c in client.list_collections()}
    assert {"word_photos_lyra", "word_photos_nexus"} <= names
    assert client.get_collection("word_photos_lyra").count() == 1
    assert not list((pps_home / "lyra").rglob("chroma.sqlite3"))  # no embedded index in the home


async def test_a_token_is_sent_as_a_bearer_header(make_memory, chroma_port):
    """`chroma run` itself checks no token; a proxy in front of it may. The header goes out with each call."""
    m = await make_memory("tokened", plugins=PLUGINS, **server_settings(chroma_port, token="s3cret"))
    await m.call("anchor_save", {"title": "Pixel", "content": "We adopted a grey kitten and named her Pixel."})
    assert (await m.call("anchor_search", {"query": "kitten", "limit": 1}))["results"]


async def test_a_server_that_is_down_is_reported_not_a_crash(make_memory):
    port = _free_port()
    m = await make_memory("down", plugins=PLUGINS, **server_settings(port))
    health = await m.layer("core_anchors").health()
    assert not health.available and f"Chroma server at 127.0.0.1:{port}" in health.detail
    with pytest.raises(Unavailable):
        await m.call("anchor_search", {"query": "anything"})
