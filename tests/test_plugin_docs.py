"""The plugin reference (docs/plugin-hooks.md) documents every hook, Layer method, contract and event helper
with its exact signature, and every hook has a test named after it (datasette's discipline)."""

import inspect
import re
from pathlib import Path

import pytest

from pps_core import chat, contracts, embedding, events, hookspecs, layer, ranking, transport

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "plugin-hooks.md"
HOOKS = {name: fn for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("pps_")}


def signature(fn) -> str:
    """``[async ]name(arg: type, arg: type = default) -> type``, as the reference's headings write it."""
    sig = inspect.signature(fn)
    params = []
    for p in sig.parameters.values():
        if p.name == "self":
            continue
        text = f"{p.name}: {p.annotation}" if p.annotation is not inspect.Parameter.empty else p.name
        if p.default is not inspect.Parameter.empty:
            text += f" = {p.default!r}"
        params.append(text)
    out = f"{fn.__name__}({', '.join(params)})"
    if sig.return_annotation is not inspect.Signature.empty:
        out += f" -> {sig.return_annotation}"
    return ("async " if inspect.iscoroutinefunction(fn) else "") + out


def headings() -> set[str]:
    return {m.group(1) for m in re.finditer(r"^#{2,4} `?(.+?)`?$", REFERENCE.read_text(), re.M)}


def public_methods(cls) -> list:
    return [f for n, f in vars(cls).items() if inspect.isfunction(f) and not n.startswith("_")]


def test_contributing_links_the_reference():
    assert "docs/plugin-hooks.md" in (ROOT / "CONTRIBUTING.md").read_text()


@pytest.mark.parametrize("name", sorted(HOOKS))
def test_every_hook_is_documented_with_its_signature(name):
    assert signature(HOOKS[name]) in headings(), f"docs/plugin-hooks.md needs a section `### {signature(HOOKS[name])}`"


def test_every_hook_has_a_test_named_after_it():
    files = [*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("plugins/*/tests/**/test_*.py"),
             *ROOT.glob("examples/*/tests/**/test_*.py")]
    tests = set()
    for path in files:
        tests.update(re.findall(r"^(?:async )?def (test_hook_\w+)\(", path.read_text(), re.M))
    missing = [name for name in HOOKS if f"test_hook_{name}" not in tests]
    assert missing == [], f"no test_hook_<name> test exercises {missing}"


def test_the_layer_contract_is_documented():
    found = headings()
    missing = [signature(f) for f in public_methods(layer.Layer) if signature(f) not in found]
    assert missing == [], f"Layer methods without a section in docs/plugin-hooks.md: {missing}"
    text = REFERENCE.read_text()
    for attr in ("name", "title", "min_recall_score", "backlog_target", "derived_paths"):
        assert hasattr(layer.Layer, attr) and f"- `{attr}`:" in text, attr


def test_every_contract_is_documented_with_its_methods():
    protocols = [cls for mod in (chat, contracts, embedding, ranking, transport) for _, cls in inspect.getmembers(mod)
                 if inspect.isclass(cls) and cls.__module__ == mod.__name__ and getattr(cls, "_is_protocol", False)]
    assert {c.__name__ for c in protocols} >= {"IngestionQueue", "UnreadSource", "SummarizableStore", "Ingester", "ChatModel"}
    found = headings()
    for cls in protocols:
        assert cls.__name__ in found, f"docs/plugin-hooks.md needs a section `### {cls.__name__}`"
        missing = [signature(f) for f in public_methods(cls) if signature(f) not in found]
        assert missing == [], f"{cls.__name__}: {missing}"


def test_every_event_helper_is_documented():
    found = headings()
    missing = [signature(f) for f in public_methods(events.Events) if signature(f) not in found]
    assert missing == [], f"memory.events helpers without a section in docs/plugin-hooks.md: {missing}"


def test_the_transport_contract_is_documented():
    """What `pps serve` hands a transport (Served, each reached Entity, the Caller it presents) and what the
    transport implements, each public method with its signature."""
    from pps_core import reach

    found = headings()
    text = REFERENCE.read_text()
    for cls in (transport.Transport, transport.Served, reach.Entity, reach.Caller):
        assert cls.__name__ in found, f"docs/plugin-hooks.md needs a section `### {cls.__name__}`"
        missing = [signature(f) for f in public_methods(cls) if signature(f) not in found]
        assert missing == [], f"{cls.__name__}: {missing}"
    for attr in ("name", "help", "forwards", "multi_entity", "stop_grace_s"):
        assert hasattr(transport.Transport, attr) and f"- `{attr}`:" in text, attr
