"""The ``pps`` pytest plugin (entry point ``pytest11``): fixtures every PPS test suite can use."""

from __future__ import annotations

import pytest


@pytest.fixture
def pps_home(tmp_path, monkeypatch):
    """An empty entity home, with PPS_* variables from the developer's shell cleared."""
    import os

    for key in list(os.environ):
        if key.startswith("PPS_"):
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "entity"
    home.mkdir()
    monkeypatch.setenv("PPS_ROOT", str(tmp_path / "root"))
    return home


@pytest.fixture
async def make_memory(pps_home):
    """``memory = await make_memory(plugins=[...], extra_plugins=[...], **settings)``: open, closed after."""
    from pps_core import Memory
    from pps_core.settings import load_settings

    opened = []

    async def factory(entity: str = "testentity", home=None, extra_plugins=(), own: bool = True, **settings):
        settings.setdefault("timezone", "UTC")
        memory = Memory(load_settings(entity, home or pps_home / entity, **settings),
                        extra_plugins=list(extra_plugins), own=own)
        await memory.open()
        opened.append(memory)
        return memory

    yield factory
    for memory in reversed(opened):
        await memory.close()
