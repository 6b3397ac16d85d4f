"""``pps doctor``: the whole install, one line per check (entity, token, plugins, stores, model file,
server, hooks, MCP registration, what the hooks did last). Exit 1 when any check fails."""

from __future__ import annotations

import sys
from pathlib import Path

from .checks import (
    Check,
    activity_checks,
    entity_check,
    hooks_check,
    mcp_check,
    plugins_check,
    print_checks,
    server_check,
)


def stores_check(settings) -> Check:
    """Every layer's health, through the server when one owns the stores, else opened here; with ``[claude_code]
    server_url``, through that server (the hooks' stores are there: nothing is opened here)."""
    from pps_core.client import EntityClient

    from .config import cc_settings

    fleet = cc_settings(settings).server_url
    try:
        if fleet:
            from pps_core.auth import read_token
            from pps_core.forward import request

            health = request(fleet, "POST", "/tools/pps_health", read_token(Path(settings.home)), {})
            via = "fleet"
        else:
            with EntityClient(settings) as client:
                health = client.call("pps_health", {})
                via = client.mode
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        return "fail", "stores", f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"
    layers = health.get("layers") or {}
    down = [f"{n} ({h.get('detail') or 'unavailable'})" for n, h in layers.items()
            if not h.get("available") and not h.get("warming")]
    if down:
        return "fail", "stores", f"unavailable: {'; '.join(down)}"
    from pps_core.cli_text import named_counts

    warming = [n for n, h in layers.items() if not h.get("available")]
    if warming:  # a cold start (a server that just started loads its model and index): not a failure
        return "warn", "stores", (f"{', '.join(warming)} still warming up via {via}; the other layers are available "
                                  "(`pps doctor` again in a minute)")
    counts = "; ".join(f"{n}: {named_counts(h.get('counts') or {})}" for n, h in layers.items())
    return "ok", "stores", f"{len(layers)} layers available via {via} ({counts})"


#: Entry points of this group add lines to ``pps doctor``: each a callable taking the entity's settings and
#: answering ``(status, name, detail)`` ("ok" / "warn" / "fail") or None when it has nothing to say (the embeddings
#: plugin's model file, for one). A plugin adds a check without this plugin naming it.
CHECKS_GROUP = "pps.checks"


def plugin_checks(settings) -> list[Check]:
    """The lines installed plugins add (:data:`CHECKS_GROUP`), in name order; a check that raises is its own fail."""
    from importlib.metadata import entry_points

    lines: list[Check] = []
    for ep in sorted(entry_points(group=CHECKS_GROUP), key=lambda e: e.name):
        try:
            found = ep.load()(settings)
        except Exception as exc:  # noqa: BLE001 - a broken check is reported, doctor goes on
            found = ("fail", ep.name, f"the check of {ep.value} failed: {type(exc).__name__}: {exc}")
        if found:
            lines.append(found)
    return lines


def token_check(settings) -> Check:
    from pps_core import auth

    path = auth.token_path(settings.home)
    if not auth.read_token(settings.home):
        return "fail", "token", f"no token at {path}: run `pps init --entity {settings.entity}`"
    mode = path.stat().st_mode & 0o777
    return ("ok" if mode == 0o600 else "warn"), "token", f"{path} ({oct(mode)})"


def run_doctor(args) -> int:
    from .install import settings_file as find_settings

    settings_file = find_settings(getattr(args, "settings", None))
    print(f"pps doctor (python {sys.version.split()[0]} at {sys.executable})")
    entity, settings = entity_check(args)
    checks: list[Check] = [entity]
    if settings is not None:
        checks += [token_check(settings), plugins_check(settings)]
        if checks[-1][0] != "fail":
            checks.append(stores_check(settings))
        checks += plugin_checks(settings)
        claude_code = [hooks_check(settings, settings_file), mcp_check(settings, settings_file),
                       *activity_checks(settings)]
        checks += [server_check(settings)[0], *claude_code]
        from .status import with_other_hosts

        checks = with_other_hosts(checks, settings, settings_file, claude_code_only=claude_code)
    return print_checks(checks)
