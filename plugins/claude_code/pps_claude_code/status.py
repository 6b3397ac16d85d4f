"""``pps hooks status``: installed? for which entity? server reachable? last capture, injection, error."""

from __future__ import annotations

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
    return print_checks(checks)
