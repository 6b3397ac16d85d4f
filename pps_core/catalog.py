"""The operation catalog: one definition per capability, from which MCP, HTTP and CLI are generated."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from .errors import InvalidParams, did_you_mean

#: JSON parameters nest at most this deep (objects and arrays), metadata included.
MAX_DEPTH = 32

if TYPE_CHECKING:  # pragma: no cover
    from .memory import Memory

Handler = Callable[["Memory", Any], Awaitable[Any]]
#: ``Operation(reads=EVERY_LAYER)``: the operation reads every layer of the entity (recall, health).
EVERY_LAYER = "*"


@dataclasses.dataclass(frozen=True)
class Operation:
    """A named capability: parameters, an async handler and hints for MCP clients.

    The handler receives the entity's :class:`~pps_core.memory.Memory` and a validated
    instance of ``params`` and returns something JSON-serialisable (a dict or a pydantic model).
    A result dict with a ``text`` key is rendered as text content by MCP (``ambient_recall``).
    """

    name: str
    params: type[BaseModel]
    handler: Handler
    description: str
    group: str = "misc"
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    #: Operations that change who may call (token rotation): refused to a caller no gate vouched for (an entity
    #: without a token, reached over the network).
    sensitive: bool = False
    #: In the small tool list a client sees when context is scarce (MCP's ``essential`` profile): search, save,
    #: and walking what the startup package points to. Set by the plugin that defines the operation.
    essential: bool = False
    #: What a read reaches, so a memory that opens only what a call needs (``pps call``) opens exactly that: layer
    #: names and contracts (a Protocol of :mod:`pps_core.contracts`: every layer filling it), or
    #: :data:`EVERY_LAYER`. None: the layers of the plugin that defines it (every layer if it has none). A write
    #: opens every layer (its events and forgetting reach other plugins).
    reads: tuple[str | type, ...] | str | None = None

    def __post_init__(self) -> None:
        if isinstance(self.reads, str) and self.reads != EVERY_LAYER:
            raise ValueError(f"operation {self.name!r}: reads is a tuple of layer names and contracts, or "
                             f"EVERY_LAYER (got {self.reads!r})")
        if self.params.model_config.get("extra") != "forbid":  # every plugin's operation rejects unknown keys
            strict = type(self.params.__name__, (self.params,),
                          {"model_config": {**self.params.model_config, "extra": "forbid"},
                           "__module__": self.params.__module__, "__doc__": self.params.__doc__})
            object.__setattr__(self, "params", strict)

    def validate(self, raw: dict[str, Any] | None) -> BaseModel:
        """Validate raw JSON params; errors name the parameter."""
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams(f"{self.name}: parameters must be a JSON object, got {type(raw).__name__}")
        _check_shape(raw, self.name)
        _reject_non_finite(raw, self.name)
        try:
            return self.params.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(p) for p in first.get("loc", ())) or None
            msgs = []
            for err in exc.errors()[:5]:
                where = ".".join(str(p) for p in err.get("loc", ())) or "(params)"
                if err.get("type") == "extra_forbidden" and len(err.get("loc", ())) == 1:
                    known = self.params.model_fields
                    msgs.append(f"{where}: no such parameter{did_you_mean(where, known)} (parameters: "
                                f"{', '.join(known) or 'none'})")
                else:
                    msgs.append(f"{where}: {err.get('msg')}")
            raise InvalidParams(f"{self.name}: invalid parameter " + "; ".join(msgs)
                                + f" (`pps call {self.name} --help` shows them)", param=loc) from None

    def input_schema(self) -> dict[str, Any]:
        return self.params.model_json_schema()

    def spec(self) -> ToolSpec:
        """What a client sees of this operation (a tool in MCP, an entry of ``GET /tools``)."""
        return ToolSpec(name=self.name, description=self.description, input_schema=self.input_schema(),
                        read_only=self.read_only, destructive=self.destructive, idempotent=self.idempotent,
                        sensitive=self.sensitive, essential=self.essential)


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    """A view of an :class:`Operation` without its handler: the same fields for every transport's listing, and
    what a forwarding client reads back from the owner (``GET /tools``)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool = False
    destructive: bool = False
    idempotent: bool = False
    sensitive: bool = False
    essential: bool = False

    @classmethod
    def from_operation(cls, op: Operation) -> ToolSpec:
        return op.spec()

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolSpec:
        """Read a listing entry back (unknown keys of a newer server are ignored)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in fields})

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _check_shape(value: Any, op: str) -> None:
    """Refuse JSON nested deeper than MAX_DEPTH before anything reads it (iteratively: no recursion limit)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            if depth >= MAX_DEPTH:
                raise InvalidParams(f"{op}: parameters nest deeper than {MAX_DEPTH} levels")
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))


#: Integers a store can keep (SQLite INTEGER, PostgreSQL bigint): a bigger id is no id, and a clear error.
INT_MIN, INT_MAX = -(2**63), 2**63 - 1


def _unencodable(text: str) -> bool:
    """A lone surrogate (JSON's ``"\\ud800"``) cannot be stored as UTF-8 anywhere."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _reject_non_finite(value: Any, op: str, path: str = "") -> None:
    """Refuse what no store can keep, naming where it is: NaN/infinity, integers past 64 bits, strings (values
    or keys) with lone surrogates."""
    where = path or "value"
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidParams(f"{op}: {where} must be a finite number", param=path or None)
    if isinstance(value, int) and not isinstance(value, bool) and not INT_MIN <= value <= INT_MAX:
        raise InvalidParams(f"{op}: {where} is out of range (integers fit in 64 bits)", param=path or None)
    if isinstance(value, str) and _unencodable(value):
        raise InvalidParams(f"{op}: {where} is not valid Unicode (a lone surrogate)", param=path or None)
    if isinstance(value, dict):
        for k, v in value.items():
            key = f"{path}.{k}" if path else str(k)
            if isinstance(k, str) and _unencodable(k):
                raise InvalidParams(f"{op}: a key of {where} is not valid Unicode (a lone surrogate)",
                                    param=path or None)
            _reject_non_finite(v, op, key)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _reject_non_finite(v, op, f"{path}.{i}")


_PLAIN = frozenset({str, int, float, bool, type(None)})


def _is_plain(value: Any) -> bool:
    """Whether ``value`` is JSON data already (checked without building anything: the common case). Only
    containers go on the stack: a startup package's answer holds thousands of scalars."""
    kind = type(value)
    if kind in _PLAIN:
        return True
    if kind is not dict and kind is not list:
        return False
    stack = [value]
    pop, push, plain = stack.pop, stack.append, _PLAIN
    while stack:
        item = pop()
        for v in item.values() if type(item) is dict else item:
            kind = type(v)
            if kind in plain:
                continue
            if kind is dict or kind is list:
                push(v)
            else:
                return False
    return True


def to_jsonable(result: Any) -> Any:
    """Turn a handler's result into plain JSON data (returned as it is when it already is)."""
    if _is_plain(result):
        return result
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, dict):
        return {k: to_jsonable(v) for k, v in result.items()}
    if isinstance(result, list | tuple):
        return [to_jsonable(v) for v in result]
    if isinstance(result, str | int | float | bool | type(None)):
        return result
    return json.loads(json.dumps(result, default=str))


class Catalog:
    """The entity's operations by name, in registration order."""

    def __init__(self, operations: list[Operation]) -> None:
        self._ops: dict[str, Operation] = {}
        for op in operations:
            if op.name in self._ops:
                raise ValueError(f"operation {op.name!r} is defined twice")
            self._ops[op.name] = op

    def __iter__(self) -> Iterator[Operation]:
        return iter(self._ops.values())

    def __contains__(self, name: str) -> bool:
        return name in self._ops

    def __len__(self) -> int:
        return len(self._ops)

    def get(self, name: str) -> Operation | None:
        return self._ops.get(name)

    def names(self) -> list[str]:
        return list(self._ops)
