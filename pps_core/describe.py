"""How to call an operation, read from its parameter model: each parameter's type, default, limits and an
example (``pps operations NAME``, ``pps call NAME --help``). Nothing here is written by hand per operation."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .catalog import Operation

_LIMITS = (("minimum", ">= {}"), ("exclusiveMinimum", "> {}"), ("maximum", "<= {}"), ("exclusiveMaximum", "< {}"),
           ("minLength", "length >= {}"), ("maxLength", "length <= {}"),
           ("minItems", "items >= {}"), ("maxItems", "items <= {}"))


def parameters(op: Operation) -> list[dict[str, Any]]:
    """One dict per parameter: name, type, required, default, limits, description, example."""
    schema = op.input_schema()
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = _resolve(prop, defs)
        out.append({
            "name": name,
            "type": _type(prop, defs),
            "required": name in required,
            "default": prop.get("default"),
            "has_default": "default" in prop,
            "limits": _limits(prop),
            "description": prop.get("description") or "",
            "example": _example(name, prop, defs),
        })
    return out


def example_params(op: Operation) -> dict[str, Any]:
    """Parameters for an example call: every required one, with an example value."""
    return {p["name"]: p["example"] for p in parameters(op) if p["required"]}


def render(op: Operation) -> str:
    """The text of ``pps operations NAME``."""
    hints = [h for h, on in (("read-only", op.read_only), ("destructive", op.destructive),
                             ("idempotent", op.idempotent)) if on]
    lines = [f"{op.name}  ({op.group}{'; ' + ', '.join(hints) if hints else ''})", "", op.description, ""]
    params = parameters(op)
    if not params:
        lines.append("No parameters.")
    else:
        lines.append("Parameters:")
        for p in params:
            head = f"  {p['name']}  {p['type']}"
            if p["required"]:
                head += ", required"
            elif p["has_default"]:
                head += f", default {json.dumps(p['default'], ensure_ascii=False)}"
            else:
                head += ", optional"
            if p["limits"]:
                head += ", " + ", ".join(p["limits"])
            lines.append(head)
            if p["description"]:
                lines.append(f"      {p['description']}")
            lines.append(f"      e.g. {json.dumps(p['example'], ensure_ascii=False)}")
    example = json.dumps(example_params(op), ensure_ascii=False)
    lines += ["", "Example:", f"  pps call {op.name} '{example}'"]
    return "\n".join(lines)


def _resolve(prop: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = prop.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return {**defs.get(ref.rsplit("/", 1)[1], {}), **{k: v for k, v in prop.items() if k != "$ref"}}
    return prop


def _type(prop: dict[str, Any], defs: dict[str, Any]) -> str:
    prop = _resolve(prop, defs)
    if "enum" in prop:
        return " | ".join(json.dumps(v) for v in prop["enum"])
    if "const" in prop:
        return json.dumps(prop["const"])
    options = prop.get("anyOf") or prop.get("oneOf")
    if options:
        kinds = [_type(o, defs) for o in options]
        kinds = [k for k in kinds if k != "null"] + (["null"] if "null" in kinds else [])
        return " | ".join(dict.fromkeys(kinds))
    kind = prop.get("type")
    if kind == "array":
        return f"list of {_type(prop.get('items', {}), defs)}"
    if kind == "object":
        return prop.get("title", "object") if "properties" in prop else "object"
    return str(kind or "any")


def _limits(prop: dict[str, Any]) -> list[str]:
    found = [text.format(prop[key]) for key, text in _LIMITS if key in prop]
    for option in prop.get("anyOf") or []:
        found += [text.format(option[key]) for key, text in _LIMITS if key in option]
    return list(dict.fromkeys(found))


def _example(name: str, prop: dict[str, Any], defs: dict[str, Any]) -> Any:
    prop = _resolve(prop, defs)
    if prop.get("examples"):
        return prop["examples"][0]
    if prop.get("default") is not None:
        return prop["default"]
    if "enum" in prop:
        return prop["enum"][0]
    options = [o for o in (prop.get("anyOf") or prop.get("oneOf") or []) if o.get("type") != "null"]
    if options:
        return _example(name, options[0], defs)
    kind = prop.get("type")
    if kind == "integer":
        return int(prop["minimum"]) if "minimum" in prop else 1
    if kind == "number":
        return float(prop.get("minimum", 1.0))
    if kind == "boolean":
        return True
    if kind == "array":
        return [_example(name, prop.get("items", {}), defs)]
    if kind == "object":
        fields = _resolve(prop, defs).get("properties")
        if not fields:
            return {}
        needed = set(prop.get("required", []))
        return {k: _example(k, v, defs) for k, v in fields.items() if k in needed}
    return _WORDS.get(name, f"<{name}>")


#: Example words for common parameter names; any other string is shown as ``<name>``.
_WORDS = {"query": "what did we decide about the garden", "content": "We planted the tomatoes today.",
          "context": "startup", "author_name": "Jeff", "channel": "terminal", "title": "first-snow",
          "timestamp": "2026-01-31T20:00:00", "since": "24h", "entity_name": "Jeff"}
