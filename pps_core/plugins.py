"""Plugin loading: stevedore imports exactly the names an entity lists; pluggy carries the hook calls."""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import hookspecs
from .errors import ConfigError
from .hookspecs import default_plugins as default_plugins  # what a new entity loads (re-exported)

GROUP = hookspecs.GROUP
log = logging.getLogger("pps")

#: Hooks whose listeners are each on their own: one that raises is logged and the others still run (pluggy's own
#: call stops at the first exception); a :class:`~pps_core.errors.PPSError` is meant for the caller and propagates.
EVENT_HOOKS = frozenset({"pps_memory_opened", "pps_memory_closing", "pps_message_stored", "pps_summary_stored",
                         "pps_operation_called"})
#: Hooks whose answers the kernel needs by plugin (:func:`answers`): layers and operations name their plugin,
#: copies are keyed by it, a forget listener that fails stays owed to it.
ATTRIBUTED_HOOKS = frozenset({"pps_layers", "pps_operations", "pps_turn_copies", "pps_messages_forgotten",
                              "pps_entity_plugin"})
#: Hooks whose failing implementation is recorded (:attr:`Answer.error`) rather than raised, so the others answer.
_CAUGHT = frozenset({"pps_messages_forgotten"})
_WRAPPED = EVENT_HOOKS | ATTRIBUTED_HOOKS | _CAUGHT
#: A plugin registers the per-entity object it made (``pps_entity_plugin``) under ``"<plugin>" + ENTITY_PART``.
ENTITY_PART = ":entity"


class Answer(tuple[str, Any, BaseException | None]):
    """One implementation's answer to a hook call: ``(plugin, value, error)``; ``error`` only for hooks whose
    failures are recorded (``pps_messages_forgotten``)."""

    @property
    def plugin(self) -> str:
        return str(self[0])

    @property
    def value(self) -> Any:
        return self[1]

    @property
    def error(self) -> BaseException | None:
        return self[2]


#: The hook being collected by :func:`answers` in this context, and what its implementations answered.
_ANSWERS: contextvars.ContextVar[tuple[str, list[Answer]] | None] = contextvars.ContextVar("pps_answers",
                                                                                        default=None)


def owner(plugin_name: str | None) -> str:
    """The plugin a registered name belongs to: a per-entity object's name (``"turns:entity"``) is its plugin's."""
    name = plugin_name or ""
    return name[:-len(ENTITY_PART)] if name.endswith(ENTITY_PART) else name


def _attributed(hook: str, plugin: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` (a hook implementation) as pluggy calls it: an event listener on its own, an answer recorded
    with its plugin for :func:`answers`. Pluggy still makes the call (its tracing and monitoring see it)."""
    from .errors import PPSError

    isolated, caught, recorded = hook in EVENT_HOOKS, hook in _CAUGHT, hook in ATTRIBUTED_HOOKS

    @functools.wraps(function)
    def call(*args: Any) -> Any:
        collecting = _ANSWERS.get()
        mine = recorded and collecting is not None and collecting[0] == hook
        error: BaseException | None = None
        try:
            value = function(*args)
        except Exception as exc:
            if caught and mine:  # a PPSError too: the listener stays owed, the others still run
                value, error = None, exc
            elif isolated and not isinstance(exc, PPSError):  # an observer must not fail what it observes
                log.warning("a plugin failed in %s: %s", hook, exc)
                return None
            else:
                raise
        if mine and collecting is not None:
            collecting[1].append(Answer((plugin, value, error)))
        return value

    call.__pps_attributed__ = True  # type: ignore[attr-defined]
    return call


class PluginManager(pluggy.PluginManager):
    """pluggy's manager, with each registered hook implementation called as :func:`_attributed` says: every hook
    call, events and forget listeners included, goes through pluggy (``PPS_TRACE_PLUGINS=1`` shows them all)."""

    def register(self, plugin: Any, name: str | None = None) -> str | None:
        registered = super().register(plugin, name)
        if registered is not None:
            attribute(self, plugin)
        return registered


def attribute(pm: pluggy.PluginManager, plugin: Any = None) -> None:
    """Wrap the hook implementations of ``plugin`` (of every registered plugin when None) as :func:`_attributed`
    says, once; a hook wrapper is left as it is. :class:`PluginManager` does it at each registration; a manager
    built elsewhere gets it when a memory takes it."""
    plugins = [plugin] if plugin is not None else [p for _name, p in pm.list_name_plugin()]
    for each in plugins:
        for caller in pm.get_hookcallers(each) or []:
            if caller.name not in _WRAPPED:
                continue
            for impl in caller.get_hookimpls():
                if (impl.plugin is each and not (impl.hookwrapper or impl.wrapper)
                        and not getattr(impl.function, "__pps_attributed__", False)):
                    impl.function = _attributed(  # type: ignore[misc]  # pluggy marks it Final; set once here
                        caller.name, owner(impl.plugin_name), impl.function)


def answers(pm: pluggy.PluginManager, hook: str, caller: Any = None, **kwargs: Any) -> list[Answer]:
    """Call ``hook`` through pluggy (``caller``: a subset of ``pm.hook.<hook>``, else all of it) and answer what each
    implementation returned, with its plugin, in plugin order (the order plugins registered: the built-in ones,
    the entity's as configured, then extra objects; a plugin's entity object in its plugin's place), not pluggy's
    call order (the reverse). Only for :data:`ATTRIBUTED_HOOKS`."""
    collected: list[Answer] = []
    token = _ANSWERS.set((hook, collected))
    try:
        (caller or getattr(pm.hook, hook))(**kwargs)
    finally:
        _ANSWERS.reset(token)
    place: dict[str, int] = {}
    for name, _plugin in pm.list_name_plugin():
        place.setdefault(owner(name), len(place))
    return sorted(reversed(collected), key=lambda answer: place.get(answer.plugin, len(place)))

#: PPS's own behaviour, registered like any plugin before the entity's (pytest's default plugins):
#: ambient_recall, health and token, backup/restore/reindex, metrics, the startup resource and wake-up prompt.
#: Each implements the public hookspecs.
BUILTIN_PLUGINS = ("pps_core.builtin.recall", "pps_core.builtin.health", "pps_core.builtin.maintenance",
                   "pps_core.builtin.metrics", "pps_core.builtin.published")


def installed_plugins() -> dict[str, str]:
    """Installed plugin names -> 'module' (nothing is imported)."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def build_plugin_manager(names: list[str], extra: Sequence[Any] = ()) -> PluginManager:
    """A fresh manager with the named entry-point plugins and any ``extra`` plugin objects.

    A missing or broken name is an error naming it and the cause; misspelled hookimpls fail
    loudly through ``check_pending``.
    """
    pm = PluginManager("pps")
    pm.add_hookspecs(hookspecs)
    pm.hook.pps_addhooks.call_historic(kwargs={"pluginmanager": pm})
    register_builtins(pm)
    if names:
        _load_named(pm, names)
    for obj in extra:
        pm.register(obj, name=getattr(obj, "__pps_name__", None) or getattr(obj, "__name__", None))
    try:
        pm.check_pending()
    except pluggy.PluginValidationError as exc:
        raise ConfigError(f"plugin {exc.plugin!r} has a hook implementation PPS does not know: {exc}") from None
    if os.environ.get("PPS_TRACE_PLUGINS"):
        pm.trace.root.setwriter(lambda msg: sys.stderr.write(msg))
        pm.enable_tracing()
    return pm


def register_builtins(pm: pluggy.PluginManager) -> None:
    """Register the built-in plugins (``builtin:recall``, ...)."""
    import importlib

    for module in BUILTIN_PLUGINS:
        pm.register(importlib.import_module(module), name="builtin:" + module.rsplit(".", 1)[1])


def load_installed(pm: pluggy.PluginManager) -> list[tuple[str, str]]:
    """Register every installed plugin (for ``pps_register_commands``); returns (name, error) of failures."""
    failures: list[tuple[str, str]] = []
    for ep in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            pm.register(ep.load(), name=ep.name)
        except Exception as exc:  # a broken plugin must not take the whole CLI down
            failures.append((ep.name, f"{type(exc).__name__}: {exc}"))
    return failures


def _product_requires() -> list[str]:
    """The requirements of the installed ``pps`` distribution (its extras name the plugins it can add); [] in
    a checkout, where every plugin is installed on its own."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        return list(requires("pps") or [])
    except PackageNotFoundError:
        return []


def install_hint(name: str) -> str:
    """How to install the plugin ``name`` that is not installed: the ``pps`` extra that brings its distribution
    (``pps-<name>`` by convention), else that distribution."""
    import re

    dist = "pps-" + name.replace("_", "-").lower()
    extras = []
    for req in _product_requires():
        head, _, marker = req.partition(";")
        found = re.search(r"extra\s*==\s*[\"']([^\"']+)[\"']", marker)
        if found and re.split(r"[\s\[<>=!~;]", head.strip(), maxsplit=1)[0].lower() == dist:
            extras.append(found.group(1))
    extra = next((e for e in extras if e != "all"), extras[0] if extras else None)
    if extra:
        return f"; it comes with `pip install 'pps[{extra}]'` (or `uv tool install 'pps[{extra}]'`)"
    return f"; a plugin is a distribution of its own, usually {dist} (`pip install {dist}`)"


def _load_named(pm: pluggy.PluginManager, names: list[str]) -> None:
    from stevedore import NamedExtensionManager

    seen = set()
    for name in names:
        if name in seen:
            raise ConfigError(f"plugin {name!r} is listed twice in the entity's plugins")
        seen.add(name)
    available = installed_plugins()
    missing = [n for n in names if n not in available]
    if missing:
        installed = ", ".join(sorted(available)) or "none"
        from .errors import did_you_mean

        typo = did_you_mean(missing[0], list(available))  # a near name installed: a typo, not a missing install
        raise ConfigError(f"no plugin named {missing[0]!r} (installed: {installed})"
                          + (typo if typo else install_hint(missing[0])))
    failures: list[tuple[str, BaseException]] = []

    def on_failure(_manager: Any, entrypoint: Any, exc: BaseException) -> None:
        failures.append((entrypoint.name, exc))

    manager = NamedExtensionManager(GROUP, names=names, invoke_on_load=False, name_order=True,
                                    on_load_failure_callback=on_failure)
    if failures:
        name, exc = failures[0]
        raise ConfigError(f"plugin {name!r} could not be imported: {type(exc).__name__}: {exc}") from exc
    for ext in manager.extensions:
        try:
            pm.register(ext.plugin, name=ext.name)
        except (ValueError, pluggy.PluginValidationError) as exc:
            raise ConfigError(f"plugin {ext.name!r} could not be registered: {exc}") from exc
    # A plugin's module may name plugins it needs (``PPS_REQUIRES``, pytest's ``pytest_plugins``): those the
    # entity does not list are registered after its own, so an older pps.toml keeps working when a part of a
    # plugin becomes a plugin of its own (the chat model of ``[llm]``).
    required = [r for ext in manager.extensions for r in getattr(ext.plugin, "PPS_REQUIRES", ())
                if pm.get_plugin(r) is None]
    if required:
        _load_named(pm, list(dict.fromkeys(required)))


def describe(pm: pluggy.PluginManager, *, builtins: bool = False) -> list[dict[str, Any]]:
    """Loaded plugins with their distribution version and the hooks each implements (``pps plugins``).

    The built-in plugins are left out unless ``builtins``; so is a part a plugin registers at run time under
    ``"<plugin>:<part>"`` (a listener of the MCP transport: ``mcp:resources-…``), which belongs to that plugin."""
    dists = _distributions()
    out = []
    for plugin, dist_info in _plugin_dists(pm):
        name = pm.get_name(plugin) or ""
        if name.endswith(ENTITY_PART) or (":" in name and not (builtins and name.startswith("builtin:"))):
            continue
        hooks = sorted(h.name for h in pm.get_hookcallers(plugin) or [])
        module = getattr(plugin, "__name__", type(plugin).__module__).split(".")[0]
        dist = dist_info or next(iter(dists.get(module) or []), None)
        out.append({"name": name, "distribution": dist, "version": _version(dist) if dist else None, "hooks": hooks})
    return out


@functools.cache
def _distributions() -> dict[str, list[str]]:
    """Top-level module -> distributions (scanning every installed package's metadata: once per process)."""
    from importlib.metadata import packages_distributions

    return {k: list(v) for k, v in packages_distributions().items()}


@functools.cache
def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _plugin_dists(pm: pluggy.PluginManager) -> Iterator[tuple[Any, str | None]]:
    """Plugins in registration order: the entity's configured order, then extra plugin objects."""
    dist_by_plugin = {id(p): d for p, d in pm.list_plugin_distinfo()}
    for _name, plugin in pm.list_name_plugin():
        d = dist_by_plugin.get(id(plugin))
        yield plugin, (d.project_name if d is not None else None)
