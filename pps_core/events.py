"""Typed event helpers: plugins fire ``memory.events.message_stored(msg)``, never a hook name as a string.

A listener that raises is logged and the event goes on (an observer must not fail a write);
a :class:`~pps_core.errors.PPSError` from a listener is meant for the caller and propagates.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .errors import PPSError
from .lineage import ForgottenTurns
from .models import Message, Summary

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

log = logging.getLogger("pps")


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

    async def messages_forgotten(self, ids: list[int], texts: Sequence[str] = (), message_ids: Sequence[str] = (),
                                 requested_by: str = "unspecified") -> list[str]:
        """Turns were forgotten by the store that captured them: every declared copy (``memory.lineage``) and
        every ``pps_messages_forgotten`` listener deletes what it derived from them. ``texts`` (the turns'
        contents, in memory only) let copies that keep text rather than ids find it. Awaits what listeners
        return; answers the failures (``"plugin: error"``, never content), so the caller can say what is
        incomplete."""
        pm = self._pm()
        if pm is None or not ids:
            return []
        lineage = getattr(self._memory, "lineage", None)
        problems: list[str] = []
        if lineage is not None:
            problems += await lineage.forget(ForgottenTurns(tuple(ids), tuple(texts), tuple(message_ids),
                                                            requested_by))
        results = []
        hook = "pps_messages_forgotten"
        given = {"memory": self._memory, "ids": list(ids)}
        for impl in reversed(getattr(pm.hook, hook).get_hookimpls()):  # each on its own, in pluggy's order
            try:
                results.append((impl.plugin_name, impl.function(**{n: given[n] for n in impl.argnames})))
            except PPSError:
                raise
            except Exception as exc:
                problems.append(f"{impl.plugin_name}: {type(exc).__name__}: {exc}")
        for name, result in results:
            if inspect.isawaitable(result):
                try:
                    await result
                except Exception as exc:
                    problems.append(f"{name}: {type(exc).__name__}: {exc}")
        for problem in problems:
            log.warning("forgetting turns: a plugin failed: %s", problem)
        return problems

    def summary_stored(self, summary: Summary) -> None:
        """A summary is stored and its turns are marked."""
        self._fire("pps_summary_stored", summary=summary)

    def operation_called(self, name: str, params: dict[str, Any], ok: bool, ms: float, status: int | None = None) -> None:
        self._fire("pps_operation_called", name=name, params=params, ok=ok, ms=ms,
                   status=status if status is not None else (200 if ok else 500))
