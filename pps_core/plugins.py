"""Plugin loading: stevedore imports exactly the names an entity lists; pluggy carries the hook calls."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator, Sequence
from importlib.metadata import entry_points
from typing import Any

import pluggy

from . import hookspecs
from .errors import ConfigError
from .hookspecs import default_plugins as default_plugins  # what a new entity loads (re-exported)

GROUP = hookspecs.GROUP

#: PPS's own behaviour, registered like any plugin before the entity's (pytest's default plugins):
#: ambient_recall, health and token, backup/restore/reindex, metrics, the startup resource and wake-up prompt.
#: Each implements the public hookspecs.
BUILTIN_PLUGINS = ("pps_core.builtin.recall", "pps_core.builtin.health", "pps_core.builtin.maintenance",
                   "pps_core.builtin.metrics", "pps_core.builtin.published")


def installed_plugins() -> dict[str, str]:
    """Installed plugin names -> 'module' (nothing is imported)."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def build_plugin_manager(names: list[str], extra: Sequence[Any] = ()) -> pluggy.PluginManager:
    """A fresh manager with the named entry-point plugins and any ``extra`` plugin objects.

    A missing or broken name is an error naming it and the cause; misspelled hookimpls fail
    loudly through ``check_pending``.
    """
    pm = pluggy.PluginManager("pps")
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
        if ":" in name and not (builtins and name.startswith("builtin:")):
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
