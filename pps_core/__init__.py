"""PPS core: the kernel every plugin builds on. Everything a plugin needs is importable from here.

Hooks: :mod:`pps_core.hookspecs` (implement them with ``@pps_core.hookimpl``). Layers: subclass
:class:`Layer`; what one layer offers another: :mod:`pps_core.contracts`. Operations: :class:`Operation`
with a :class:`Params` model. Runtime helpers (atomic files, time, text search) are re-exported below.
"""

from .atomic import atomic_create, atomic_write
from .catalog import Operation
from .contracts import Ingester, IngestionQueue, SummarizableStore, SummaryBatch, SummaryReceipt, UnreadSource
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
from .layer import FailedLayer, Layer
from .lineage import ForgottenTurns, TurnCopy
from .memory import Memory
from .models import (
    LayerHealth,
    LayerStatus,
    Message,
    Pointer,
    SearchResult,
    SectionConfig,
    StartupItems,
    Summary,
)
from .params import NoParams, Params, StorePath, Text
from .privacy import Captured, CapturedMetadata, drop_private, drop_private_deep
from .publish import Prompt, PromptArgument, PromptMessage, ResourceItem, Resources
from .ranking import Ranker
from .settings import EntitySettings, PluginSettings, load_settings
from .textsearch import lexical_scores
from .timeutil import now_utc, to_storage
from .transport import Transport

__version__ = "0.1.0"

__all__ = [
    "Captured", "CapturedMetadata", "ForgottenTurns", "TurnCopy", "drop_private", "drop_private_deep",
    "ConfigError", "Conflict", "Embedder", "EntitySettings", "Events", "FailedLayer", "Forbidden", "Ingester",
    "IngestionQueue", "InvalidParams", "Layer", "LayerHealth", "LayerStatus", "Memory", "Message", "NoParams",
    "NotFound", "Operation", "PPSError", "Params", "PluginSettings", "Pointer", "Prompt", "PromptArgument",
    "PromptMessage", "Ranker", "ResourceItem", "Resources", "SearchResult",
    "SectionConfig", "StartupItems", "StorageError", "StorePath", "SummarizableStore", "Summary", "SummaryBatch",
    "SummaryReceipt", "Text", "TooLarge", "Transport", "Unauthorized", "Unavailable", "UnknownOperation",
    "UnreadSource", "atomic_create", "atomic_write", "hookimpl", "lexical_scores", "load_settings", "now_utc",
    "to_storage",
]
