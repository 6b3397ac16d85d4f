"""Hook specifications: everything a PPS plugin can provide or observe.

A plugin is a module (or object) with functions marked ``@pps_core.hookimpl`` whose names match
the stubs below. Each stub documents what it receives, what it returns and how the results of
several plugins combine. A plugin that keeps anything per entity returns an object from
:func:`pps_entity_plugin` whose methods implement the hooks for that entity (pytest's instance plugins).
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:  # pragma: no cover
    from .catalog import Operation
    from .chat import ChatModel
    from .cli import CommandRegistry
    from .embedding import Embedder
    from .layer import Layer
    from .lineage import TurnCopy
    from .memory import Memory
    from .models import Message, Summary
    from .publish import Prompt, Resources
    from .ranking import Ranker
    from .settings import EntitySettings
    from .transport import Transport

hookspec = pluggy.HookspecMarker("pps")
hookimpl = pluggy.HookimplMarker("pps")

#: The entry-point group a plugin distribution registers its module in (``name = "module"``).
GROUP = "pps.plugins"


def default_plugins() -> list[str]:
    """The plugins a new entity loads (``pps init`` without ``--plugins``, a pps.toml that names none): every
    installed plugin whose module sets ``PPS_DEFAULT`` (an int, its place: lower first, then by name). The plugins
    decide, not the kernel; a plugin that cannot be imported is left out (``pps plugins`` shows why)."""
    ranked: list[tuple[int, str]] = []
    for ep in entry_points(group=GROUP):
        try:
            module = ep.load()
        except Exception:  # noqa: BLE001, S112 - a broken plugin is reported where it is named, not here
            continue
        rank = getattr(module, "PPS_DEFAULT", None)
        if isinstance(rank, int) and not isinstance(rank, bool):
            ranked.append((rank, ep.name))
    return [name for _, name in sorted(ranked)]


# --- Plugin machinery ------------------------------------------------------------------------


@hookspec(historic=True)
def pps_addhooks(pluginmanager: pluggy.PluginManager) -> None:
    """Add hook specifications of a plugin's own (pytest's ``pytest_addhooks``).

    Called when the plugin registers, before ``check_pending``, so another plugin can implement the
    new hooks: the HTTP transport declares the hook by which pages are mounted on its app this way.
    Call ``pluginmanager.add_hookspecs(module_or_class)``.
    """


@hookspec
def pps_register_commands(cli: CommandRegistry) -> None:
    """Add ``pps`` subcommands (llm's ``register_commands``).

    Called with every *installed* plugin (not only an entity's), when ``pps`` builds its parser, so a
    command exists exactly when its plugin is installed. ``cli.add(name, handler, help=...)`` returns the
    argparse parser to add arguments to; ``cli.entity_args(parser)`` adds ``--entity``/``--home``.
    ``handler(args) -> int`` is the exit code. Keep it cheap: import heavy libraries inside the handler.
    """


# --- The per-entity object --------------------------------------------------------------------


@hookspec
def pps_entity_plugin(memory: Memory) -> object | None:
    """Return this plugin's object for the entity ``memory`` serves, or None. All results: each object returned
    is registered (one per plugin).

    Its methods marked ``@hookimpl`` implement hooks for that entity only (pytest's instance plugins): the
    memory registers it with the entity's plugin manager as ``"<plugin>:entity"`` before it collects operations
    and layers, so it owns its layers, operations, rankers and state, and finds its own layers through the
    objects it made. A method may leave out ``memory`` (the object knows it). Called once per memory, before any
    store opens; answers of ``pps_layers`` and the other hooks are attributed to the plugin that returned it.
    """


# --- Layers -----------------------------------------------------------------------------------


@hookspec
def pps_init_hints() -> list[str]:
    """Return lines ``pps init`` appends to a new entity's pps.toml: a commented example of this plugin's own
    settings section (``# [llm]`` ...), so a user sees what can be set without reading the docs.

    All results, in the order of the plugins the new entity loads, each block after a blank line; each line
    should start with ``#`` (the hint is a comment: the file must load as written). Cheap: no store is open.
    """


@hookspec
def pps_layers(memory: Memory) -> list[Layer]:
    """Return the memory layers this plugin stores and searches.

    Called once when the entity's memory opens. A layer answers ``search``, ``recent``,
    ``startup`` and ``health`` (see :class:`pps_core.layer.Layer`). All results, in plugin order,
    flattened; layer names must be unique across plugins.
    """


@hookspec
def pps_operations(memory: Memory) -> list[Operation]:
    """Return the operations (tools) this plugin adds to the entity's catalog.

    Every transport (MCP, HTTP, CLI) is generated from the catalog. All results, flattened;
    operation names must be unique. Called before any layer opens: the list must not depend on the stores.
    """


@hookspec(firstresult=True)
def pps_embedder(memory: Memory) -> Embedder | None:
    """Return the text embedder the entity's layers share, or None.

    First non-None wins, so only one embedding plugin should be listed in the entity's config.
    """


@hookspec(firstresult=True)
def pps_chat_model(settings: EntitySettings, model: str | None) -> ChatModel | None:
    """Return the chat model (an LLM) the entity's plugins share, or None (``model``: a model name a caller
    asks for instead of the configured one, or None).

    First non-None wins. Called with the settings, not the memory, so a command can ask before any store
    opens; ``memory.chat_model()`` and :func:`pps_core.chat.chat_model` call it.
    """


@hookspec
def pps_rankers(memory: Memory) -> list[Ranker]:
    """Return rankers: post-processors that reorder a layer's search results.

    Which rankers run, and in what order, is configured per layer (``[rankers]`` in pps.toml).
    All results, flattened; ranker names must be unique.
    """


# --- Transports -------------------------------------------------------------------------------


@hookspec
def pps_transports() -> list[Transport]:
    """Return transports (ways to serve the catalog), selected by ``pps serve <name>``.

    All results, flattened.
    """


# --- Resources and prompts --------------------------------------------------------------------


@hookspec
def pps_resources(settings: EntitySettings) -> list[Resources]:
    """Families of documents a client can attach without a tool call (MCP resources): the startup package,
    each crystal, each word-photo, ... Each is read through the entity's operations (``pps_core.publish``), so
    a transport serves them whether it owns the stores or forwards. All results, flattened; family names unique.
    Called without opening the stores: return descriptions, do the work in their ``items``/``read``."""


@hookspec
def pps_prompts(settings: EntitySettings) -> list[Prompt]:
    """Prompt templates a client offers its user (MCP prompts; a slash command): waking up, summarizing the
    backlog, ... rendered through the entity's operations when asked for. All results, flattened; names
    unique."""


# --- Lifecycle and events ---------------------------------------------------------------------


@hookspec
def pps_memory_opened(memory: Memory) -> None:
    """Called after every layer of the entity is open. Start background work here."""


@hookspec
def pps_memory_closing(memory: Memory) -> None:
    """Called before the layers close. Stop background work here; exceptions are logged."""


@hookspec
def pps_message_stored(memory: Memory, message: Message) -> None:
    """Called after a turn is durably stored (not called for an idempotent repeat)."""


@hookspec
def pps_messages_forgotten(memory: Memory, ids: list[int]) -> Any:
    """Called after turns were forgotten (deleted for good) from the store that captured them. For third parties:
    PPS's own plugins declare their copies instead (``pps_turn_copies``); the turn store fires it.

    A plugin that keeps anything derived from those turns (graph episodes and the facts extracted only from
    them, an index) deletes it here. It may return an awaitable: all results that are awaitable are awaited
    before the forget operation answers, so what it reports is complete. Log nothing of the turns' content.
    Raise (or return an awaitable that raises) when it could not delete: the forget stays owed to this plugin
    and it is called again with the same ids until it returns (:mod:`pps_core.lineage`).
    """


@hookspec
def pps_turn_copies(memory: Memory) -> list[TurnCopy]:
    """Declare every place this plugin keeps text derived from turns, each with the function that forgets.

    Called once when the entity opens. All results, flattened (see :mod:`pps_core.lineage`). A plugin that
    implements ``pps_message_stored``, ``pps_summary_stored`` or ``pps_messages_forgotten`` must implement this
    hook too (return ``[]`` if it truly keeps nothing), or the entity refuses to open: no copy is kept silently.
    Each copy's ``forget`` receives :class:`~pps_core.lineage.ForgottenTurns` (ids, message ids and texts) after
    the capturing store deleted the turns; it may be async; it logs nothing of the content. It **raises** when
    it could not forget (its layer is not open, a server is down, a disk under its floor): the forget stays
    owed and is retried (at open, by upkeep, at the next forget) until ``forget`` returns; so it is idempotent.
    """


@hookspec
def pps_summary_stored(memory: Memory, summary: Summary) -> None:
    """Called after a summary is stored and its turns are marked (the turn store fires it). For third parties: no
    plugin of PPS listens."""


@hookspec
def pps_operation_called(memory: Memory, name: str, params: dict[str, Any], ok: bool, ms: float,
                         status: int) -> None:
    """Called after every call of a catalog operation (for metrics or tracing), successful or not: ``status`` is
    200, the error's HTTP status (422 for parameters refused before the handler, with ``params`` empty) or 500.
    Must be cheap and never raise."""
