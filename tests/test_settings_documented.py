"""Every setting an entity's pps.toml accepts is documented (issue 38; datasette tests that every setting is).

The settings are found, not listed here: the kernel's ``EntitySettings`` (every table and key under it, the
entries of ``[[startup.add]]`` included) and every plugin's own section, a ``PluginSettings`` model that a plugin
of ``plugins/`` or ``examples/`` reads with ``settings.plugin_settings(Model, "section")``. Each must be named in
README.md or docs/ as it is written: ``[recall] skip_in_text``, ``[[startup.add]] max_chars``, ``[graphiti]
focal_entity``, and a top-level key in backticks (`` `timezone` ``); docs/SETTINGS.md is the reference table.
"""

from __future__ import annotations

import importlib
import re
import typing
from pathlib import Path

from pydantic import BaseModel

from pps_core.settings import EntitySettings, PluginSettings

ROOT = Path(__file__).resolve().parent.parent
#: Fields of EntitySettings that pps.toml does not set: the home is where pps.toml is (the loader passes it).
NOT_IN_THE_FILE = {"home"}


def _sources() -> list[Path]:
    return [p for p in sorted([*ROOT.glob("plugins/*/*/**/*.py"), *ROOT.glob("examples/*/*/**/*.py")])
            if "tests" not in p.relative_to(ROOT).parts[2:] and ".venv" not in p.parts]


def plugin_sections() -> dict[str, type[PluginSettings]]:
    """``[section]`` -> the PluginSettings model a plugin reads it with."""
    classes: dict[str, str] = {}  # model name -> module
    calls: dict[str, set[str]] = {}  # model name -> sections
    for path in _sources():
        text = path.read_text()
        package_dir = ROOT / Path(*path.relative_to(ROOT).parts[:2])
        module = ".".join(path.relative_to(package_dir).with_suffix("").parts).removesuffix(".__init__")
        for m in re.finditer(r"^class (\w+)\(PluginSettings\b", text, re.M):
            classes[m.group(1)] = module
        for m in re.finditer(r"plugin_settings\(\s*(\w+)\s*,\s*\"(\w+)\"", text):
            calls.setdefault(m.group(1), set()).add(m.group(2))
    assert set(classes) == set(calls), "a PluginSettings model no plugin reads, or one read but not found"
    return {section: getattr(importlib.import_module(classes[name]), name)
            for name, sections in calls.items() for section in sections}


def _models(annotation) -> tuple[list[type[BaseModel]], bool]:
    """The models inside a field's type, and whether the field is a list of them (an array of tables)."""
    found, listed = [], False
    for arg in typing.get_args(annotation):
        inner, inner_listed = _models(arg)
        found += inner
        listed |= inner_listed or (inner != [] and typing.get_origin(annotation) is list)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    return found, listed


def _keys(model: type[BaseModel], table: str, array: bool = False):
    """(names a document may use, model, field) for every key of ``model`` read from ``[table]``."""
    for name, field in model.model_fields.items():
        key = field.alias or name
        if not table and name in NOT_IN_THE_FILE:
            continue
        models, listed = _models(field.annotation)
        nested = f"{table}.{key}" if table else key
        if not models or listed:  # a value (a list of tables is one too: `sections = [...]`)
            written = f"[[{table}]] {key}" if array else (f"[{table}] {key}" if table else f"`{key}`")
            yield written, model, name
        for sub in models:
            yield from _keys(sub, nested, array=listed)


def every_setting() -> dict[str, list[str]]:
    """What a reader must find -> the ways it may be written (a table reached twice, e.g. ``[startup] sections``
    and ``[[startup.add]]`` entries, is documented once under either name)."""
    found: dict[tuple[type, str], list[str]] = {}
    for written, model, name in _keys(EntitySettings, ""):
        found.setdefault((model, name), []).append(written)
    for section, model in sorted(plugin_sections().items()):
        for written, sub, name in _keys(model, section):
            found.setdefault((sub, f"{section}:{name}"), []).append(written)
    return {ways[0]: ways for ways in found.values()}


def documents() -> str:
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))])


def test_settings_are_found_in_the_kernel_and_in_every_plugin():
    settings = every_setting()
    assert {"`timezone`", "[recall] skip_in_text", "[backup] allowed_dirs", "[startup.late_night] asleep",
            "[[startup.sections]] max_chars", "[graphiti] focal_entity", "[postgres] schema", "[notes] file",
            "[claude_code] prompt_recall_budget"} <= set(settings)
    assert "`home`" not in settings and "`startup`" not in settings and "[startup] late_night" not in settings


def test_every_setting_is_named_in_the_readme_or_the_docs():
    text = documents()
    missing = [name for name, ways in every_setting().items() if not any(way in text for way in ways)]
    assert missing == [], (f"{len(missing)} settings are documented nowhere (README.md, docs/; the reference is "
                           f"docs/SETTINGS.md): {', '.join(missing)}")

