"""The ``pps`` pytest plugin (entry point ``pytest11``): fixtures every PPS test suite can use.

The async fixture runs under pytest-asyncio in its default (strict) mode as well as in ``auto`` mode, so a
plugin's tests need no pytest configuration of their own. pytest runs this module whenever pps-core is
installed, so it must import without pytest-asyncio (``pip install "pps-core[testing]"`` brings it).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from pps_core.memory import Memory

try:
    from pytest_asyncio import fixture as async_fixture
except ImportError:  # pragma: no cover - the async fixtures need pytest-asyncio; the rest still works
    async_fixture = pytest.fixture  # type: ignore[assignment]  # same use, different overloads

MakeMemory = Callable[..., Awaitable["Memory"]]


@pytest.fixture
def pps_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty entity home, with PPS_* variables from the developer's shell cleared."""
    for key in list(os.environ):
        if key.startswith("PPS_"):
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "entity"
    home.mkdir()
    monkeypatch.setenv("PPS_ROOT", str(tmp_path / "root"))
    return home


@pytest.fixture
def cpu_load() -> Any:
    """Two processes that keep a core busy each for the length of the test (a laptop compiling, a test suite
    running): what a cold start must survive (issue 39). Killed after the test."""
    import subprocess
    import sys

    procs = [subprocess.Popen([sys.executable, "-I", "-c", "while 1: pass"]) for _ in range(2)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


@pytest.fixture
def suite_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """The suites' own plugins (``ledger``) installed in this process too, for a test that runs ``pps``
    in-process (``pps_core.testing.server.SUITE_PLUGINS``; subprocesses get them from ``pps_env``)."""
    from pps_core.testing.server import suite_plugins_path

    monkeypatch.syspath_prepend(str(suite_plugins_path()))


@async_fixture
async def make_memory(pps_home: Path) -> AsyncIterator[MakeMemory]:
    """``memory = await make_memory(plugins=[...], extra_plugins=[...], **settings)``: open, closed after."""
    from pps_core import Memory
    from pps_core.settings import load_settings

    opened: list[Memory] = []

    async def factory(entity: str = "testentity", home: Path | None = None, extra_plugins: Sequence[Any] = (),
                      own: bool = True, **settings: Any) -> Memory:
        settings.setdefault("timezone", "UTC")
        memory = Memory(load_settings(entity, home or pps_home / entity, **settings),
                        extra_plugins=list(extra_plugins), own=own)
        await memory.open()
        opened.append(memory)
        return memory

    yield factory
    for memory in reversed(opened):
        await memory.close()
