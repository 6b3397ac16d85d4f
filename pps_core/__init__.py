"""PPS core: the kernel every plugin builds on. Everything a plugin needs is importable from here.

Hooks: :mod:`pps_core.hookspecs` (implement them with ``@pps_core.hookimpl``). Layers: subclass
:class:`Layer`; what one layer offers another: :mod:`pps_core.contracts`. Operations: :class:`Operation`
with a :class:`Params` model. Runtime helpers (atomic files, time, text search) are re-exported below.
"""

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: Public name -> the kernel module that defines it. Imported on first use (PEP 562), so that importing
#: one small module (``pps_core.forward`` for a Claude Code hook, ``pps_core.cli`` for ``pps --version``)
#: does not import Memory, pydantic-settings and pluggy.
_EXPORTS: dict[str, str] = {
    "atomic_create": "atomic", "atomic_write": "atomic",
    "EVERY_LAYER": "catalog", "Operation": "catalog",
    "Ingester": "contracts", "IngestionQueue": "contracts", "OwedForgets": "contracts", "SummarizableStore": "contracts",
    "SummaryBatch": "contracts", "SummaryReceipt": "contracts", "UnreadSource": "contracts",
    "Embedder": "embedding",
    "ConfigError": "errors", "Conflict": "errors", "Forbidden": "errors", "InvalidParams": "errors",
    "NotFound": "errors", "PPSError": "errors", "StorageError": "errors", "TooLarge": "errors",
    "Unauthorized": "errors", "Unavailable": "errors", "UnknownOperation": "errors",
    "Events": "events",
    "hookimpl": "hookspecs",
    "FailedLayer": "layer", "Layer": "layer", "WarmingLayer": "layer",
    "ForgottenTurns": "lineage", "TurnCopy": "lineage",
    "ChatModel": "chat",
    "Memory": "memory", "UndeclaredLayer": "memory",
    "LayerHealth": "models", "LayerStatus": "models", "Message": "models", "Pointer": "models",
    "SearchResult": "models", "SectionConfig": "models", "SectionItem": "models", "StartupItems": "models",
    "Summary": "models", "TurnItem": "models",
    "NoParams": "params", "Params": "params", "StorePath": "params", "Text": "params",
    "Captured": "privacy", "CapturedMetadata": "privacy", "drop_private": "privacy", "drop_private_deep": "privacy",
    "Prompt": "publish", "PromptArgument": "publish", "PromptMessage": "publish", "ResourceItem": "publish",
    "Resources": "publish",
    "Ranker": "ranking",
    "EntitySettings": "settings", "PluginSettings": "settings", "load_settings": "settings",
    "lexical_scores": "textsearch",
    "now_utc": "timeutil", "to_storage": "timeutil",
    "Transport": "transport",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pps_core' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module("." + module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:  # pragma: no cover
    from .atomic import atomic_create, atomic_write
    from .catalog import EVERY_LAYER, Operation
    from .chat import ChatModel
    from .contracts import (
        Ingester,
        IngestionQueue,
        OwedForgets,
        SummarizableStore,
        SummaryBatch,
        SummaryReceipt,
        UnreadSource,
    )
    from .embedding import Embedder
    from .errors import (
        ConfigError,
        Conflict,
        Forbidden,
        InvalidParams,
        NotFound,
        PPSError,
        StorageError,
        TooLarge,
        Unauthorized,
        Unavailable,
        UnknownOperation,
    )
    from .events import Events
    from .hookspecs import hookimpl
    from .layer import FailedLayer, Layer, WarmingLayer
    from .lineage import ForgottenTurns, TurnCopy
    from .memory import Memory, UndeclaredLayer
    from .models import (
        LayerHealth,
        LayerStatus,
        Message,
        Pointer,
        SearchResult,
        SectionConfig,
        SectionItem,
        StartupItems,
        Summary,
        TurnItem,
    )
    from .params import NoParams, Params, StorePath, Text
    from .privacy import Captured, CapturedMetadata, drop_private, drop_private_deep
    from .publish import Prompt, PromptArgument, PromptMessage, ResourceItem, Resources
    from .ranking import Ranker
    from .settings import EntitySettings, PluginSettings, load_settings
    from .textsearch import lexical_scores
    from .timeutil import now_utc, to_storage
    from .transport import Transport

__all__ = [
    "Captured", "CapturedMetadata", "ForgottenTurns", "TurnCopy", "drop_private", "drop_private_deep",
    "EVERY_LAYER", "ChatModel", "ConfigError", "Conflict", "Embedder", "EntitySettings", "Events", "FailedLayer", "Forbidden", "Ingester",
    "IngestionQueue", "InvalidParams", "Layer", "LayerHealth", "LayerStatus", "Memory", "Message", "NoParams",
    "NotFound", "Operation", "OwedForgets", "PPSError", "Params", "PluginSettings", "Pointer", "Prompt", "PromptArgument",
    "PromptMessage", "Ranker", "ResourceItem", "Resources", "SearchResult",
    "SectionConfig", "SectionItem", "StartupItems", "StorageError", "StorePath", "SummarizableStore", "Summary", "SummaryBatch",
    "SummaryReceipt", "Text", "TooLarge", "Transport", "TurnItem", "Unauthorized", "Unavailable", "UnknownOperation",
    "UndeclaredLayer", "UnreadSource", "WarmingLayer", "atomic_create", "atomic_write", "hookimpl", "lexical_scores", "load_settings",
    "now_utc", "to_storage",
]
