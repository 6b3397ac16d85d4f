"""Typed event helpers: plugins fire ``memory.events.message_stored(msg)``, never a hook name as a string.

A listener that raises is logged and the event goes on (an observer must not fail a write);
a :class:`~pps_core.errors.PPSError` from a listener is meant for the caller and propagates.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from .errors import PPSError
from .lineage import ForgottenTurns
from .models import Message, Summary

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

log = logging.getLogger("pps")
_LISTENER = "pps_messages_forgotten"


class Events:
    """The event hooks of one entity, as methods."""

    def __init__(self, memory: Any, pm: Callable[[], pluggy.PluginManager | None]) -> None:
        self._memory = memory
        self._pm = pm

    def _fire(self, hook: str, **kwargs: Any) -> None:
        pm = self._pm()
        if pm is None:
            return
        given = {"memory": self._memory, **kwargs}
        # Each listener on its own, in pluggy's call order: one that raises must not silence the others
        # (pluggy's own call stops at the first exception).
        for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):
            try:
                impl.function(**{name: given[name] for name in impl.argnames})
            except PPSError:
                raise
            except Exception as exc:  # an observer must not fail the write it observes
                log.warning("a plugin failed in %s: %s", hook, exc)

    def memory_opened(self) -> None:
        self._fire("pps_memory_opened")

    def memory_closing(self) -> None:
        self._fire("pps_memory_closing")

    def message_stored(self, message: Message) -> None:
        """A turn is durably stored (not for an idempotent repeat)."""
        self._fire("pps_message_stored", message=message)

    def owed_copies(self) -> list[str]:
        """What a forget owes until each confirms, by key: every declared copy but the origin's
        (:meth:`pps_core.lineage.Lineage.owed`) and every ``pps_messages_forgotten`` listener
        (``"<plugin>/pps_messages_forgotten"``). The capturing store records them with the deletion."""
        pm = self._pm()
        lineage = getattr(self._memory, "lineage", None)
        keys = list(lineage.owed()) if lineage is not None else []
        if pm is not None:
            keys += [f"{impl.plugin_name}/{_LISTENER}"
                     for impl in reversed(getattr(pm.hook, _LISTENER).get_hookimpls())]
        return keys

    async def forget_copies(self, turns: ForgottenTurns, only: Collection[str] | None = None) -> dict[str, str]:
        """Run the ``forget`` of every declared copy and every ``pps_messages_forgotten`` listener (or of those
        keyed in ``only``, as :meth:`owed_copies` keys them); answers the failures by key (``"key: error"``, never
        content). A listener gets the ids only."""
        pm = self._pm()
        if pm is None or not turns.ids:
            return {}
        lineage = getattr(self._memory, "lineage", None)
        failed: dict[str, str] = {}
        listeners = {f"{impl.plugin_name}/{_LISTENER}": impl
                     for impl in reversed(getattr(pm.hook, _LISTENER).get_hookimpls())}
        if lineage is not None:
            copies = None if only is None else [k for k in only if k not in listeners]
            failed.update(await lineage.run(turns, copies))
        elif only is not None:
            failed.update({k: f"{k}: not loaded" for k in only if k not in listeners})
        given = {"memory": self._memory, "ids": list(turns.ids)}
        for key, impl in listeners.items():  # each on its own, in pluggy's order
            if only is not None and key not in only:
                continue
            try:
                result = impl.function(**{n: given[n] for n in impl.argnames})
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # a PPSError too: the deletion is done, the listener stays owed
                failed[key] = f"{impl.plugin_name}: {type(exc).__name__}: {exc}"
        for problem in failed.values():
            log.warning("forgetting turns: a copy failed: %s", problem)
        return failed

    async def messages_forgotten(self, ids: list[int], texts: Sequence[str] = (), message_ids: Sequence[str] = (),
                                 requested_by: str = "unspecified") -> list[str]:
        """Turns were forgotten by the store that captured them: every declared copy (``memory.lineage``) and
        every ``pps_messages_forgotten`` listener deletes what it derived from them. ``texts`` (the turns'
        contents) let copies that keep text rather than ids find it. Awaits what listeners return; answers the
        failures (``"plugin/copy: error"``, never content), so the caller can say what is incomplete. (A turn
        store records what is owed first and calls :meth:`forget_copies`; see :mod:`pps_core.lineage`.)"""
        if not ids:
            return []
        failed = await self.forget_copies(ForgottenTurns(tuple(ids), tuple(texts), tuple(message_ids), requested_by))
        return list(failed.values())

    def summary_stored(self, summary: Summary) -> None:
        """A summary is stored and its turns are marked."""
        self._fire("pps_summary_stored", summary=summary)

    def operation_called(self, name: str, params: dict[str, Any], ok: bool, ms: float, status: int | None = None) -> None:
        self._fire("pps_operation_called", name=name, params=params, ok=ok, ms=ms,
                   status=status if status is not None else (200 if ok else 500))
