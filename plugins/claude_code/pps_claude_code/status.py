"""``pps hooks status``: installed? for which entity? server reachable? last capture, injection, error; then the same
for every other host of the hook core that is installed (pps-codex, pps-gemini, pps-copilot)."""

from __future__ import annotations

from .checks import activity_checks, entity_check, hooks_check, print_checks, server_check


def print_status(args) -> int:
    from pathlib import Path

    from .cli import other_hosts
    from .install import settings_file as find_settings

    settings_file = find_settings(getattr(args, "settings", None))
    entity, settings = entity_check(args)
    checks = [entity]
    if settings is not None:
        checks.append(hooks_check(settings, settings_file))
        checks.append(server_check(settings)[0])
        checks += activity_checks(settings)
    others = []
    for name in other_hosts():
        from pps_hooks.commands import status_lines
        from pps_hooks.hosts import get_host

        others += status_lines(get_host(name), Path(settings.home) if settings is not None else None,
                               settings.entity if settings is not None else None)
    if settings is not None and not settings_file.exists() and any(
            name.endswith(" hooks") and "not installed" not in detail for _, name, detail in others):
        # another host carries this entity: Claude Code without hooks is a choice, not a failure
        checks = [entity, ("ok", "hooks", f"Claude Code: not installed ({settings_file} does not exist)")]
    return print_checks(checks + others)
