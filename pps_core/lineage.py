"""The forget lineage: every copy of text derived from a turn is declared, and forgetting reaches each one.

A plugin that keeps anything derived from turns (an index, a vector, a summary, a recap, a graph node, a cache,
a file) declares each such place as a :class:`TurnCopy` from its ``pps_turn_copies`` hook, with the function
that removes the forgotten turns from it. When turns are forgotten, the store that captured them deletes them
(and logs ids, time and who asked, never content), then calls :meth:`Lineage.forget`, which runs every declared
copy's ``forget`` and reports the ones that failed. The ``turn_copies`` operation lists them.

The kernel enforces the declaration: a plugin that observes turns (implements ``pps_message_stored``,
``pps_summary_stored`` or ``pps_messages_forgotten``) but does not implement ``pps_turn_copies`` is refused when
the entity opens. The byte-level audit test (``tests/test_privacy_audit.py``) is the proof: canaries go in
through every capture path, are forgotten, and no byte of them is left in the home, the stores, a backup or the
logs; removing any one declared ``forget`` makes it fail.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
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
    file, a node summary) to find what to remove. They live only in memory for this call: never log them."""

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

    def describe(self) -> dict[str, Any]:
        return {"plugin": self.plugin, "name": self.name, "where": self.where, "how": self.how,
                "origin": self.origin}


class Lineage:
    """The copies an entity's plugins declared, collected once when the memory opens."""

    def __init__(self, copies: Sequence[TurnCopy] = ()) -> None:
        self.copies: list[TurnCopy] = list(copies)

    @classmethod
    def collect(cls, pm: pluggy.PluginManager, memory: Any) -> Lineage:
        copies: list[TurnCopy] = []
        for impl in reversed(getattr(pm.hook, DECLARING_HOOK).get_hookimpls()):
            declared = cast("list[TurnCopy] | None", impl.function(**{n: {"memory": memory}[n] for n in impl.argnames}))
            for copy in declared or []:
                copies.append(TurnCopy(copy.name, copy.where, copy.how, copy.forget, copy.origin,
                                       plugin=impl.plugin_name))
        return cls(copies)

    def describe(self) -> list[dict[str, Any]]:
        return [c.describe() for c in self.copies]

    async def forget(self, turns: ForgottenTurns) -> list[str]:
        """Run every copy's ``forget``; answers the failures (``"plugin/copy: error"``, never content)."""
        if not turns.ids:
            return []
        problems: list[str] = []
        for copy in self.copies:
            try:
                result = copy.forget(turns)
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:
                problems.append(f"{copy.plugin}/{copy.name}: {type(exc).__name__}: {exc}")
        return problems


def undeclared_observers(pm: pluggy.PluginManager) -> list[str]:
    """Plugins that observe turns but declare no copies (``pps_turn_copies``), by name."""
    declared = {impl.plugin_name for impl in getattr(pm.hook, DECLARING_HOOK).get_hookimpls()}
    observers: set[str] = set()
    for hook in OBSERVING_HOOKS:
        observers.update(impl.plugin_name for impl in getattr(pm.hook, hook).get_hookimpls())
    return sorted(observers - declared)
