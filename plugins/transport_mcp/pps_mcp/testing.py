"""A :class:`pps_core.testing.ContractClient` over MCP, for the transport contract (stdio and streamable HTTP)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from pps_core import errors
from pps_core.testing import error_from


class McpContractClient:
    """MCP tools as the contract's client: a tool error's structured content is the catalog's error body; an
    unknown tool is a JSON-RPC error carrying it as ``data``; an HTTP 401 before the session is Unauthorized."""

    def __init__(self, transport: Callable[[], Any], http_statuses: list[int] | None = None) -> None:
        self._transport = transport
        #: Statuses of the HTTP answers seen (an httpx event hook fills it): the SDK reports a 401 without one.
        self._statuses = http_statuses if http_statuses is not None else []
        self._client: Any = None
        self._runner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()

    async def _session(self) -> Any:
        """The session, held open by a task of its own (the SDK's task groups must be left by the task that
        entered them, and a test's fixtures set up and tear down in different tasks)."""
        if self._client is None:
            from mcp import Client

            ready: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

            async def hold() -> None:
                try:
                    async with Client(self._transport()) as client:
                        ready.set_result(client)
                        await self._closing.wait()
                except BaseException as exc:
                    if not ready.done():
                        ready.set_exception(exc)
                    elif not isinstance(exc, asyncio.CancelledError | Exception):
                        raise

            self._runner = asyncio.ensure_future(hold())
            try:
                self._client = await ready
            except BaseException as exc:
                status = _http_status(exc) or next((c for c in self._statuses if c in (401, 403)), None)
                if status in (401, 403):
                    raise (errors.Unauthorized if status == 401 else errors.Forbidden)(
                        f"HTTP {status} before the MCP session") from None
                raise
        return self._client

    async def tools(self) -> list[str]:
        return [t.name for t in (await (await self._session()).list_tools()).tools]

    async def call(self, operation: str, params: Any) -> Any:
        from mcp.shared.exceptions import MCPError

        session = await self._session()
        try:
            result = await session.call_tool(operation, params)
        except MCPError as exc:
            raise error_from(exc.data if isinstance(exc.data, dict) else {"error": "internal_error",
                                                                           "message": exc.message}) from None
        if result.is_error:
            raise error_from(result.structured_content)
        answer = dict(result.structured_content or {})
        if operation == "ambient_recall":  # its markdown is the text content, not repeated in the data
            answer["text"] = result.content[0].text
        return answer

    async def close(self) -> None:
        self._closing.set()
        if self._runner is not None:
            runner, self._runner, self._client = self._runner, None, None
            with contextlib.suppress(Exception):
                await runner


def _http_status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    if response is not None and isinstance(getattr(response, "status_code", None), int):
        return int(response.status_code)
    for inner in [*getattr(exc, "exceptions", ()), exc.__cause__, exc.__context__]:
        if inner is not None and inner is not exc:
            found = _http_status(inner)
            if found is not None:
                return found
    return None
