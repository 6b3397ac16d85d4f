"""The hosts installed beside the core: entry points ``pps.hosts`` (name -> a :class:`pps_hooks.host.Host`
subclass). Claude Code is listed too (its plugin keeps its own commands and fast path)."""

from __future__ import annotations

from importlib.metadata import entry_points

from .host import Host

GROUP = "pps.hosts"


def host_names() -> list[str]:
    """Every installed host's name, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def get_host(name: str) -> Host:
    """The host called ``name`` (``ValueError`` naming the installed ones when there is none)."""
    for ep in entry_points(group=GROUP):
        if ep.name == name:
            host = ep.load()()
            if not isinstance(host, Host):
                raise ValueError(f"the host entry point {name!r} is not a pps_hooks.host.Host")
            return host
    raise ValueError(f"no host {name!r} is installed (installed: {', '.join(host_names()) or 'none'})")
