"""PPS core: hook specifications, plugin loading, settings, the operation catalog and ambient recall."""

from .catalog import Operation
from .errors import Conflict, InvalidParams, NotFound, PPSError, Unavailable
from .hookspecs import hookimpl
from .layer import Layer
from .memory import Memory
from .models import LayerHealth, Message, SearchResult, StartupItems, Summary
from .settings import EntitySettings, PluginSettings, load_settings

__version__ = "0.1.0"

__all__ = [
    "Conflict", "EntitySettings", "InvalidParams", "Layer", "LayerHealth", "Memory", "Message", "NotFound",
    "Operation", "PPSError", "PluginSettings", "SearchResult", "StartupItems", "Summary", "Unavailable",
    "hookimpl", "load_settings",
]
