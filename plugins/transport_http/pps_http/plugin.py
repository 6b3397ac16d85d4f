"""Entry point of the HTTP transport: ``pps serve http``."""

from __future__ import annotations

from pps_core import hookimpl


@hookimpl
def pps_addhooks(pluginmanager):
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@hookimpl
def pps_transports():
    from .serve import HttpTransport

    return [HttpTransport()]
