"""Hooks of the HTTP transport, added to each entity's plugin manager through ``pps_addhooks``.

A plugin that serves pages or routes beside the REST API (the memory explorer) implements them; the
transport calls them once per hosted entity, after the entity's memory is open.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from fastapi import FastAPI

    from pps_core import Memory

    from .oauth import EntityOAuth
    from .security import EntityAuth

hookspec = pluggy.HookspecMarker("pps")


@hookspec
def pps_http_mount(app: FastAPI, memory: Memory, auth: EntityAuth, oauth: EntityOAuth | None) -> None:
    """Add routes for one hosted entity to the HTTP app (e.g. pages under ``/ui/<entity>``).

    Called for every hosted entity whose plugins implement it, in the server's lifespan once the memory is
    open (its catalog is known). ``auth`` is the entity's token check: ``auth.check(authorization,
    origin=...)`` raises ``Unauthorized``/``Forbidden`` and follows the tokenless-entity rules. Call the
    entity's operations with ``await memory.call(name, params)``. Mark the implementation
    ``@hookimpl(optionalhook=True)`` so the plugin also loads for an entity that does not list ``http``.
    ``oauth``: the entity's OAuth authorization server (None without one): a page with a login of its own may
    approve MCP clients there (``oauth.offer_approval``, ``oauth.waiting``, ``oauth.approve``, ``oauth.deny``).
    All implementations are called, in plugin order; results are ignored.
    """
