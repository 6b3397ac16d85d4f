"""Every hook is documented, typed, and exercised by a plugin or a test (datasette's rule)."""

import inspect
import re
from pathlib import Path

from pps_core import hookspecs

ROOT = Path(__file__).parent.parent
HOOKS = [name for name, fn in inspect.getmembers(hookspecs, inspect.isfunction) if name.startswith("pps_")]


def test_there_are_hooks():
    assert {"pps_layers", "pps_operations", "pps_embedder", "pps_rankers", "pps_transports",
            "pps_message_stored", "pps_summary_stored"} <= set(HOOKS)


def test_every_hook_has_a_docstring_saying_how_results_combine():
    for name in HOOKS:
        doc = inspect.getdoc(getattr(hookspecs, name)) or ""
        assert len(doc) > 30, name
        spec = getattr(hookspecs, name)
        returns = inspect.signature(spec).return_annotation
        if returns not in (None, "None"):
            assert re.search(r"first non-None|all results|flattened", doc, re.I), name


def test_every_hook_is_implemented_or_called_somewhere():
    files = [p for p in list(ROOT.glob("plugins/*/pps_*/**/*.py")) + list(ROOT.glob("pps_core/**/*.py"))
             + list(ROOT.glob("tests/*.py")) + list(ROOT.glob("plugins/*/tests/*.py")) if p.name != "hookspecs.py"]
    sources = "\n".join(p.read_text() for p in files)
    for name in HOOKS:
        implemented = re.search(rf"def {name}\(", sources)
        called = f'"{name}"' in sources or f".{name}(" in sources or f".{name}.call_historic(" in sources
        assert implemented and called, name


def test_hook_pps_addhooks():
    """A plugin adds hookspecs another plugin implements."""
    import pluggy

    from pps_core import hookimpl
    from pps_core.plugins import build_plugin_manager

    class Specs:
        @pluggy.HookspecMarker("pps")
        def pps_example_pages(self, memory):
            """Pages to mount."""

    class Declares:
        __pps_name__ = "declares"

        @hookimpl
        def pps_addhooks(self, pluginmanager):
            pluginmanager.add_hookspecs(Specs)

    class Implements:
        __pps_name__ = "implements"

        @hookimpl
        def pps_example_pages(self, memory):
            return ["/ui"]

    pm = build_plugin_manager([], [Declares(), Implements()])  # check_pending passes: the spec exists
    assert pm.hook.pps_example_pages(memory=None) == [["/ui"]]


def test_hook_pps_register_commands():
    """A plugin adds a pps command."""
    import argparse

    from pps_core import hookimpl
    from pps_core.cli import CommandRegistry
    from pps_core.plugins import build_plugin_manager

    class Greets:
        __pps_name__ = "greets"

        @hookimpl
        def pps_register_commands(self, cli):
            p = cli.add("greet", lambda args: print(f"hello {args.entity}") or 0, help="say hello")
            cli.entity_args(p)

    parser = argparse.ArgumentParser(prog="pps")
    handlers: dict = {}
    pm = build_plugin_manager([], [Greets()])
    pm.hook.pps_register_commands(cli=CommandRegistry(parser.add_subparsers(dest="command"), handlers))
    args = parser.parse_args(["greet", "--entity", "lyra"])
    assert args.command == "greet" and handlers["greet"](args) == 0


def test_plugins_share_a_command_group():
    """`pps import` is one command whose kinds come from several plugins; a kind added twice is an error."""
    import argparse

    import pytest

    from pps_core import hookimpl
    from pps_core.cli import CommandRegistry
    from pps_core.plugins import build_plugin_manager

    def kind(name):
        class Adds:
            __pps_name__ = f"adds-{name}"

            @hookimpl
            def pps_register_commands(self, cli):
                p = cli.group("import", help="import history").add(name, lambda args: f"{name} {args.path}",
                                                                    help=f"from {name}")
                p.add_argument("path")

        return Adds()

    parser = argparse.ArgumentParser(prog="pps")
    handlers: dict = {}
    registry = CommandRegistry(parser.add_subparsers(dest="command"), handlers)
    pm = build_plugin_manager([], [kind("chatgpt"), kind("jsonl")])
    pm.hook.pps_register_commands(cli=registry)
    args = parser.parse_args(["import", "jsonl", "x.jsonl"])
    assert handlers["import"](args) == "jsonl x.jsonl"
    assert handlers["import"](parser.parse_args(["import", "chatgpt", "e.zip"])) == "chatgpt e.zip"
    with pytest.raises(ValueError, match="two plugins add a `pps import jsonl` command"):
        registry.group("import", help="").add("jsonl", lambda args: 0, help="again")
    with pytest.raises(ValueError, match="two plugins add a `pps import` command"):
        CommandRegistry(argparse.ArgumentParser().add_subparsers(), {"import": lambda a: 0}).group("import", help="")
