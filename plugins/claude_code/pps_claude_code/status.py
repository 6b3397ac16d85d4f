"""``pps hooks status``: installed? for which entity? server reachable? last capture, injection, error; then the same
for every other host of the hook core that is installed (pps-codex, pps-gemini, pps-copilot)."""

from __future__ import annotations

from pathlib import Path

from .checks import activity_checks, entity_check, hooks_check, print_checks, server_check


def print_status(args) -> int:
    from .install import settings_file as find_settings

    settings_file = find_settings(getattr(args, "settings", None))
    entity, settings = entity_check(args)
    checks = [entity]
    if settings is not None:
        checks.append(hooks_check(settings, settings_file))
        checks.append(server_check(settings)[0])
        checks += activity_checks(settings)
    return print_checks(with_other_hosts(checks, settings, settings_file, claude_code_only=checks[1:]))


def with_other_hosts(checks: list, settings, settings_file: Path, claude_code_only: list) -> list:
    """``checks`` followed by every other host's lines (pps-codex, pps-gemini, pps-copilot). When another host's
    hooks carry the entity and Claude Code's settings file does not exist, Claude Code without hooks is a choice:
    its checks (``claude_code_only``) give way to one line saying so."""
    from .cli import other_hosts

    others = []
    for name in other_hosts():
        from pps_hooks.commands import status_lines
        from pps_hooks.hosts import get_host

        others += status_lines(get_host(name), Path(settings.home) if settings is not None else None,
                               settings.entity if settings is not None else None)
    if settings is not None and not settings_file.exists() and any(
            name.endswith(" hooks") and "not installed" not in detail for _, name, detail in others):
        checks = [c for c in checks if c not in claude_code_only or c[1] == "server"]
        checks.append(("ok", "hooks", f"Claude Code: not installed ({settings_file} does not exist)"))
    return checks + others
