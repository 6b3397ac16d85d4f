"""PPS's own behaviour as plugins (pytest's default plugins): each module implements the public hookspecs
and is registered before the entity's plugins (see ``pps_core.plugins.BUILTIN_PLUGINS``)."""
