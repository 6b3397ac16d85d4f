"""Plugin ``recap`` (shipped with pps-core): the ``session_recap`` startup section.

List ``recap`` in the entity's plugins to show the last session's recap at startup; the
``session_recap`` operation itself is in the core catalog and works without it.
"""

from __future__ import annotations

from ..hookspecs import hookimpl


@hookimpl
def pps_layers(memory):
    from .service import RecapLayer

    return [RecapLayer(memory)]
