"""The forget lineage: every copy of text derived from a turn is declared, and forgetting reaches each one.

A plugin that keeps anything derived from turns (an index, a vector, a summary, a recap, a graph node, a cache,
a file) declares each such place as a :class:`TurnCopy` from its ``pps_turn_copies`` hook, with the function
that removes the forgotten turns from it. When turns are forgotten, the store that captured them deletes them
(and logs ids, time and who asked, never content) and, in the same transaction, records every copy that still
owes the forget (:meth:`Lineage.owed`: each copy that is not the ``origin``); then :meth:`Lineage.run` runs
every declared copy's ``forget`` and answers the ones that failed. A copy that failed stays owed: the store
keeps what its ``forget`` needs (ids, message ids, texts) until it confirms, and the forget is retried when the
entity opens, by upkeep and at the next forget. The ``turn_copies`` operation lists the copies and what is owed.

A copy's ``forget`` signals failure by raising (a layer that is not open, a server that is down, a disk under
its floor): returning means "confirmed, nothing of these turns is left here". It must be idempotent (it is run
again until it confirms, maybe after part of it ran) and must not need the turns' rows (they are gone).

The kernel enforces the declaration: a plugin that observes turns (implements ``pps_message_stored``,
``pps_summary_stored`` or ``pps_messages_forgotten``) but does not implement ``pps_turn_copies`` is refused when
the entity opens. The byte-level audit test (``tests/test_privacy_audit.py``) is the proof: canaries go in
through every capture path, are forgotten, and no byte of them is left in the home, the stores, a backup or the
logs; removing any one declared ``forget`` makes it fail.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pragma: no cover
    import pluggy

#: Hooks by which a plugin sees turn text; implementing one obliges the plugin to declare its copies.
DECLARING_HOOK = "pps_turn_copies"
OBSERVING_HOOKS = ("pps_message_stored", "pps_summary_stored", "pps_messages_forgotten")


@dataclass(frozen=True)
class ForgottenTurns:
    """Turns being forgotten, handed to every copy's ``forget``.

    ``texts`` are the turns' contents as they were stored, for copies that keep text rather than ids (a recap
    file, a node summary) to find what to remove. Never log them. The turn store keeps them (with the ids and
    message ids) in the owed forget only until every copy confirmed (docs/PRIVACY.md)."""

    ids: tuple[int, ...]
    texts: tuple[str, ...] = ()
    message_ids: tuple[str, ...] = ()
    requested_by: str = "unspecified"


ForgetFn = Callable[[ForgottenTurns], "Awaitable[Any] | Any"]


@dataclass(frozen=True)
class TurnCopy:
    """One place a plugin keeps text derived from turns, and how forgetting reaches it.

    ``name`` is short and stable ("graph episodes"), ``where`` says where the bytes are ("<home>/graph.kuzu"),
    ``how`` says in one sentence what forgetting does to it. ``forget`` is called with the forgotten turns after
    the capturing store deleted them; it may be async. ``origin`` marks the store that captured the turns (its
    own deletion happens in the forget operation itself, so its ``forget`` is usually a no-op that removes
    secondary structures)."""

    name: str
    where: str
    how: str
    forget: ForgetFn
    origin: bool = False
    plugin: str = field(default="", compare=False)

    @property
    def key(self) -> str:
        """``plugin/name``: how an owed forget names this copy (stable across processes)."""
        return f"{self.plugin}/{self.name}"

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "name": self.name, "where": self.where, "how": self.how,
                "origin": self.origin}


class Lineage:
    """The copies an entity's plugins declared, collected once when the memory opens."""

    def __init__(self, copies: Sequence[TurnCopy] = ()) -> None:
        self.copies: list[TurnCopy] = list(copies)

    @classmethod
    def collect(cls, pm: pluggy.PluginManager, memory: Any) -> Lineage:
        from .plugins import answers

        copies: list[TurnCopy] = []
        for answer in answers(pm, DECLARING_HOOK, memory=memory):  # through pluggy
            for copy in cast("list[TurnCopy] | None", answer.value) or []:
                copies.append(TurnCopy(copy.name, copy.where, copy.how, copy.forget, copy.origin,
                                       plugin=answer.plugin))
        return cls(copies)

    def describe(self) -> list[dict[str, Any]]:
        return [c.describe() for c in self.copies]

    def owed(self) -> list[str]:
        """The keys (``plugin/name``) of the copies a forget owes until each confirms: every copy but the
        origin's (the capturing store removes those in the deletion's own transaction)."""
        return [c.key for c in self.copies if not c.origin]

    async def run(self, turns: ForgottenTurns, only: Collection[str] | None = None) -> dict[str, str]:
        """Run the ``forget`` of every copy (or of the copies keyed in ``only``); answers the failures by key
        (``"plugin/copy: error"``, never content). A key of ``only`` that no loaded plugin declares fails too:
        its copy cannot be reached from here."""
        failed: dict[str, str] = {}
        if not turns.ids:
            return failed
        for copy in self.copies:
            if only is not None and copy.key not in only:
                continue
            try:
                result = copy.forget(turns)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                failed[copy.key] = f"{copy.key}: {type(exc).__name__}: {exc}"
        for key in only or ():
            if key not in failed and not any(c.key == key for c in self.copies):
                failed[key] = f"{key}: not loaded (its plugin is not among this entity's plugins now)"
        return failed

    async def forget(self, turns: ForgottenTurns) -> list[str]:
        """Run every copy's ``forget``; answers the failures (``"plugin/copy: error"``, never content)."""
        return list((await self.run(turns)).values())


def undeclared_observers(pm: pluggy.PluginManager) -> list[str]:
    """Plugins that observe turns but declare no copies (``pps_turn_copies``), by name."""
    from .plugins import owner

    declared = {owner(impl.plugin_name) for impl in getattr(pm.hook, DECLARING_HOOK).get_hookimpls()}
    observers: set[str] = set()
    for hook in OBSERVING_HOOKS:
        observers.update(owner(impl.plugin_name) for impl in getattr(pm.hook, hook).get_hookimpls())
    return sorted(observers - declared)
