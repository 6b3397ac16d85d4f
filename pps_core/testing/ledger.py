"""``ledger``: the smallest store with writes, for contract suites (``TransportContract``).

An append-only JSON-lines file in the entity's home, each line fsynced before the write is acknowledged, so a
suite can tell what a transport acknowledged from what survived. Not an installed plugin: the suites register
it (``ledger``) for their own processes only (``pps_core.testing.server.SUITE_PLUGINS``), so a user never sees it.
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

from pydantic import Field

from pps_core import Layer, LayerHealth, Memory, Operation, Params, SearchResult, Text, hookimpl

FILE = "ledger.jsonl"


class LedgerLayer(Layer):
    name = "ledger"
    title = "Ledger"

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.path = memory.home / FILE
        self._lock = asyncio.Lock()

    def entries(self) -> list[str]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [json.loads(line)["text"] for line in lines if line.strip()]

    async def append(self, text: str) -> int:
        async with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            try:
                os.write(fd, (json.dumps({"text": text}) + "\n").encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            return len(self.entries())

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        found = [t for t in self.entries() if query.lower() in t.lower()]
        return [SearchResult(layer=self.name, source=f"ledger:{i}", content=t, score=1.0)
                for i, t in enumerate(found[offset:offset + limit])]

    async def health(self) -> LayerHealth:
        return LayerHealth(layer=self.name, available=True, counts={"entries": len(self.entries())})


class LedgerAppend(Params):
    text: Text = Field(..., max_length=1_000_000, description="the entry")


class LedgerList(Params):
    pass


def _layer(memory: Memory) -> LedgerLayer:
    layer = memory.layer("ledger")
    assert isinstance(layer, LedgerLayer)
    return layer


async def ledger_append(memory: Memory, p: LedgerAppend) -> dict[str, Any]:
    return {"count": await _layer(memory).append(p.text)}


async def ledger_list(memory: Memory, p: LedgerList) -> dict[str, Any]:
    return {"entries": _layer(memory).entries()}


@hookimpl
def pps_layers(memory: Memory) -> list[Layer]:
    return [LedgerLayer(memory)]


@hookimpl
def pps_operations(memory: Memory) -> list[Operation]:
    return [
        Operation("ledger_append", LedgerAppend, ledger_append, "Append an entry (fsynced before the answer).",
                  group="ledger"),
        Operation("ledger_list", LedgerList, ledger_list, "Every entry, oldest first.", group="ledger",
                  read_only=True, idempotent=True),
    ]
