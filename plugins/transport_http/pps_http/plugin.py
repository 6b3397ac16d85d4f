"""Entry point of the HTTP transport: ``pps serve http``."""

from __future__ import annotations

from pps_core import hookimpl

#: A new entity loads this plugin (pps init, a pps.toml that names no plugins); lower comes first.
PPS_DEFAULT = 90


@hookimpl
def pps_addhooks(pluginmanager):
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def pps_transports():
    from .serve import HttpTransport

    return [HttpTransport()]
