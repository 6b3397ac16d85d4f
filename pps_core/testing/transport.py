"""The transport contract: what every transport, ours or a third party's, must show over its real wire.

    from pps_core.testing import TransportContract

    class TestMyTransport(TransportContract):
        transport = "mine"                      # pps serve mine
        async def connect(self, entity, token):
            return MyClient(entity.home / "mine.sock")   # tools(), call(op, params), close()

The suite runs ``pps serve <transport>`` as a user would (a subprocess, entities made with ``pps init``, the
``ledger`` plugin of pps-core as the store), connects through the transport's own client, and checks that
every catalog operation is listed and reachable, bad parameters come back as the catalog's errors (the same
code and parameter), auth and tenancy hold, the request limit applies, and a stop (SIGTERM) loses nothing it
acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest
import pytest_asyncio

from pps_core import errors
from pps_core.forward import error_from_answer
from pps_core.owner import read_owner
from pps_core.testing.server import init_entity, pps, pps_env

LIMIT = 4096


class ContractClient(Protocol):
    """One connection to one entity over the transport's wire."""

    async def tools(self) -> list[str]:
        """The names of the operations the transport lists."""
        ...

    async def call(self, operation: str, params: Any) -> Any:
        """The operation's JSON result; raise the PPSError the wire carried (``error_from(payload)`` rebuilds it
        from the catalog's error body ``{"error", "message", "param"}``)."""
        ...

    async def close(self) -> None: ...


def error_from(payload: Any) -> errors.PPSError:
    """The PPSError a catalog error body (``{"error": code, "message", "param"}``) stands for."""
    return error_from_answer(500, payload)


@dataclass
class ServedEntity:
    """An entity of the suite: its name, home and token; ``proc`` is the ``pps serve`` process serving it."""

    name: str
    home: Path
    root: Path
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def token(self) -> str:
        return (self.home / "token").read_text().strip()


class TransportContract:
    """Subclass as ``TestXTransport``; set ``transport``, implement ``connect``."""

    pytestmark = pytest.mark.asyncio

    #: ``pps serve <transport>``.
    transport: str = ""
    #: The entity's plugins beside ``ledger`` (default: the plugin named like the transport).
    plugins: list[str] = []
    #: Extra options of ``pps serve <transport>``.
    serve_args: list[str] = []
    #: Extra lines of the entity's pps.toml, e.g. a transport's own section (an MCP server lists its essential
    #: tool profile by default: ``['[mcp]', 'tools = "all"']`` lists every operation, as this contract checks).
    settings: list[str] = []
    #: How callers are told apart: ``"token"`` (a bearer token on the wire), ``"os"`` (the operating system: an
    #: endpoint file only the entity's user may open, see ``endpoints``) or ``"pipe"`` (stdio: the caller is the
    #: process that started the server, nothing is presented).
    gate: str = "token"
    #: Serves several entities in one process (``--entities``): tenancy is checked inside one process.
    multi_entity: bool = False
    #: A long-running server the suite starts; False for stdio, where ``connect`` starts ``pps serve`` itself.
    server: bool = True

    async def connect(self, entity: ServedEntity, token: str | None) -> ContractClient:  # pragma: no cover
        """A client of ``entity`` presenting ``token`` (gate ``"token"``; None: no token at all)."""
        raise NotImplementedError

    def ready(self, entity: ServedEntity) -> bool:
        """Whether the server accepts calls for ``entity`` (default: its owner lock publishes an address)."""
        return bool((read_owner(entity.home) or {}).get("address"))

    def endpoints(self, entity: ServedEntity) -> list[Path]:
        """Gate ``"os"``: the files that admit a caller (a Unix socket); only the entity's user may open them."""
        return []

    # -- harness -----------------------------------------------------------------------------------

    def _plugins(self) -> str:
        return ",".join(["ledger", *(self.plugins or [self.transport])])

    def _init(self, root: Path, name: str) -> ServedEntity:
        home = init_entity(root, name, self._plugins(), "[limits]", f"max_request_bytes = {LIMIT}", *self.settings)
        return ServedEntity(name=name, home=home, root=root)

    def start(self, entity: ServedEntity, *others: ServedEntity) -> None:
        """Run ``pps serve`` for ``entity`` (and ``others`` beside it when the transport is multi-entity)."""
        if not self.server:
            return
        args = ["serve", self.transport, "--entity", entity.name, *self.serve_args]
        if others:
            args += ["--entities", ",".join(o.name for o in others)]
        entity.log = entity.root / f"serve-{entity.name}.log"
        with open(entity.log, "ab") as fh:
            entity.proc = subprocess.Popen([sys.executable, "-P", "-m", "pps_core.cli", *args], env=pps_env(entity.root),
                                           stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while not all(self.ready(e) for e in (entity, *others)):
            if entity.proc.poll() is not None or time.monotonic() > deadline:
                self.stop(entity)
                raise AssertionError(f"pps serve {self.transport} did not start: {entity.log.read_text()[-3000:]}")
            time.sleep(0.05)
        for other in others:
            other.proc, other.log = entity.proc, entity.log

    def stop(self, entity: ServedEntity) -> int | None:
        proc = entity.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    @pytest.fixture
    def served(self, tmp_path: Path) -> Iterator[list[ServedEntity]]:
        """Two entities (``alpha``, ``beta``) each with a token, served (one process when multi-entity)."""
        alpha, beta = self._init(tmp_path, "alpha"), self._init(tmp_path, "beta")
        try:
            if self.multi_entity:
                self.start(alpha, beta)
            else:
                self.start(alpha)
                self.start(beta)
            yield [alpha, beta]
        finally:
            for e in (alpha, beta):
                self.stop(e)

    @pytest_asyncio.fixture
    async def client(self, served: list[ServedEntity]) -> AsyncIterator[ContractClient]:
        client = await self.connect(served[0], served[0].token)
        try:
            yield client
        finally:
            await client.close()

    # -- the contract ------------------------------------------------------------------------------

    async def test_every_catalog_operation_is_listed_and_reachable(self, served: list[ServedEntity],
                                                                  client: ContractClient) -> None:
        listed = pps(served[0].root, "operations", "--entity", served[0].name).stdout
        catalog = [line.split()[0] for line in listed.splitlines() if line.strip()]
        assert {"ledger_append", "ledger_list", "pps_health"} <= set(catalog)
        assert sorted(await client.tools()) == sorted(catalog)
        for name in catalog:  # an unknown parameter reaches each operation's own validation, and nothing runs
            with pytest.raises(errors.InvalidParams) as err:
                await client.call(name, {"contract_probe": 1})
            assert "contract_probe" in err.value.message, (name, err.value.message)

    async def test_a_write_is_acknowledged_then_read_back(self, client: ContractClient) -> None:
        text = "the lighthouse door is cobalt blue — ünïcödé ✓"
        assert (await client.call("ledger_append", {"text": text}))["count"] == 1
        assert (await client.call("ledger_list", {}))["entries"] == [text]
        health = await client.call("pps_health", {})
        assert health["layers"]["ledger"]["available"] is True

    async def test_bad_parameters_come_back_as_the_catalogs_errors(self, client: ContractClient) -> None:
        for bad in [{}, {"text": 5}, {"text": ""}, {"text": "a\x00b"}]:
            with pytest.raises(errors.InvalidParams) as err:
                await client.call("ledger_append", bad)
            assert err.value.param == "text" and err.value.code == "invalid_params", bad
        with pytest.raises(errors.UnknownOperation):
            await client.call("no_such_operation", {})
        assert (await client.call("ledger_list", {}))["entries"] == []  # nothing was written

    async def test_auth_and_tenancy_hold(self, served: list[ServedEntity], client: ContractClient) -> None:
        alpha, beta = served
        await client.call("ledger_append", {"text": "alpha's own"})
        if self.gate == "token":
            for token in (None, beta.token, "not-a-token"):
                stranger = await self.connect(alpha, token)
                try:
                    with pytest.raises(errors.Unauthorized):
                        await stranger.call("ledger_list", {})
                    with pytest.raises(errors.Unauthorized):  # the catalog is not shown either
                        await stranger.call("no_such_operation", {})
                finally:
                    await stranger.close()
        elif self.gate == "os":
            paths = self.endpoints(alpha)
            assert paths, "a transport gated by the OS names the files that admit callers (endpoints)"
            for path in paths:
                st = path.lstat()
                assert st.st_uid == os.getuid() and st.st_mode & 0o077 == 0, f"{path} is {oct(st.st_mode)}"
                assert path.parent.stat().st_mode & 0o077 == 0, f"{path.parent} is open to others"
        other = await self.connect(beta, beta.token)
        try:  # beta, served beside alpha, sees nothing of alpha's
            assert (await other.call("ledger_list", {}))["entries"] == []
        finally:
            await other.close()

    async def test_other_processes_reach_the_served_entity(self, served: list[ServedEntity],
                                                            client: ContractClient) -> None:
        """Whatever the transport, ``pps call`` (the Claude Code hooks, any other process) reaches the entity it
        serves through the kernel's local channel: the transport does nothing for it."""
        alpha = served[0]
        await client.call("ledger_append", {"text": "said on the transport"})
        out = await asyncio.to_thread(pps, alpha.root, "call", "--entity", alpha.name, "ledger_append",
                                      json.dumps({"text": "said from pps call"}), check=False)
        assert out.returncode == 0, out.stderr
        assert (await client.call("ledger_list", {}))["entries"] == ["said on the transport", "said from pps call"]

    async def test_the_request_limit_applies(self, client: ContractClient) -> None:
        with pytest.raises(errors.TooLarge):
            await client.call("ledger_append", {"text": "x" * (LIMIT * 3)})
        assert (await client.call("ledger_append", {"text": "small"}))["count"] == 1

    async def test_a_stop_loses_nothing_acknowledged(self, served: list[ServedEntity]) -> None:
        alpha = served[0]
        acked: list[str] = []

        async def writer(i: int, client: ContractClient) -> None:
            for j in range(200):
                text = f"w{i}-{j}"
                try:
                    await client.call("ledger_append", {"text": text})
                except Exception:  # the server went away: this one was not acknowledged
                    return
                acked.append(text)

        clients = [await self.connect(alpha, alpha.token) for _ in range(3)]
        tasks = [asyncio.ensure_future(writer(i, c)) for i, c in enumerate(clients)]
        while len(acked) < 20 and not all(t.done() for t in tasks):
            await asyncio.sleep(0.01)
        if self.server:
            code = await asyncio.to_thread(self.stop, alpha)
            assert code == 0, f"pps serve {self.transport} did not stop cleanly ({code}): " + (
                alpha.log.read_text()[-2000:] if alpha.log else "")
        else:
            for c in clients:  # a stdio server stops when its client goes
                await c.close()
        await asyncio.gather(*tasks)
        if self.server:
            for c in clients:
                await c.close()
        deadline = time.monotonic() + 30
        while read_owner(alpha.home) is not None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert read_owner(alpha.home) is None, "the owner lock outlived the server"
        kept = json.loads(pps(alpha.root, "call", "--entity", alpha.name, "--local", "ledger_list").stdout)["entries"]
        assert acked and set(acked) <= set(kept)
