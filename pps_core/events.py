"""Typed event helpers: plugins fire ``memory.events.message_stored(msg)``, never a hook name as a string.

Every event is a pluggy hook call (``PPS_TRACE_PLUGINS=1`` shows it). A listener that raises is logged and the
event goes on to the others (an observer must not fail a write): the plugin manager calls each implementation
inside its own guard (:func:`pps_core.plugins._attributed`); a :class:`~pps_core.errors.PPSError` from a listener
is meant for the caller and propagates.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from .lineage import ForgottenTurns
from .models import Message, Summary
from .plugins import answers, owner

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

log = logging.getLogger("pps")
_LISTENER = "pps_messages_forgotten"


def _listeners(pm: pluggy.PluginManager) -> dict[str, Any]:
    """The ``pps_messages_forgotten`` listeners by owed key (``"<plugin>/pps_messages_forgotten"``) -> the
    registered object, in pluggy's call order."""
    return {f"{owner(impl.plugin_name)}/{_LISTENER}": impl.plugin
            for impl in reversed(getattr(pm.hook, _LISTENER).get_hookimpls())}


class Events:
    """The event hooks of one entity, as methods."""

    def __init__(self, memory: Any, pm: Callable[[], pluggy.PluginManager | None]) -> None:
        self._memory = memory
        self._pm = pm

    def _fire(self, hook: str, **kwargs: Any) -> None:
        pm = self._pm()
        if pm is None:
            return
        getattr(pm.hook, hook)(memory=self._memory, **kwargs)  # each listener guarded on its own

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
            keys += list(_listeners(pm))
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
        listeners = _listeners(pm)
        if lineage is not None:
            copies = None if only is None else [k for k in only if k not in listeners]
            failed.update(await lineage.run(turns, copies))
        elif only is not None:
            failed.update({k: f"{k}: not loaded" for k in only if k not in listeners})
        called = {key: plugin for key, plugin in listeners.items() if only is None or key in only}
        if called:
            hook = None
            if len(called) < len(listeners):  # only the listeners still owed (pluggy's subset call)
                hook = pm.subset_hook_caller(_LISTENER, [p for k, p in listeners.items() if k not in called])
            # one pluggy call; each listener answers on its own (a failure is recorded, the others still run)
            for answer in answers(pm, _LISTENER, hook, memory=self._memory, ids=list(turns.ids)):
                key = f"{answer.plugin}/{_LISTENER}"
                error = answer.error
                if error is None and inspect.isawaitable(answer.value):
                    try:
                        await answer.value
                    except Exception as exc:  # a PPSError too: the deletion is done, the listener stays owed
                        error = exc
                if error is not None:
                    failed[key] = f"{answer.plugin}: {type(error).__name__}: {error}"
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
