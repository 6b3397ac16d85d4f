"""Plugins meet only through declared, public contracts (issue 24): packaging/plugin_imports.py, run by make lint,
fails on an import of an undeclared distribution or of another distribution's private name."""

import importlib.util
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load():
    spec = importlib.util.spec_from_file_location("plugin_imports", ROOT / "packaging" / "plugin_imports.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def test_the_repository_keeps_the_contract_except_the_listed_breaks():
    lint = load()
    found = {lint._key(p) for p in lint.check(ROOT)}
    assert sorted(found - lint.baseline()) == []  # new breaks
    assert sorted(lint.baseline() - found) == []  # fixed breaks still listed


def test_undeclared_distributions_and_private_names_are_breaks(tmp_path):
    lint = load()
    write(tmp_path / "pyproject.toml", '[project]\nname = "pps-core"\ndependencies = ["pydantic>=2"]\n')
    write(tmp_path / "plugins/b/pyproject.toml", '[project]\nname = "pps-b"\ndependencies = ["pps-core"]\n')
    write(tmp_path / "plugins/b/pps_b/__init__.py", "")
    write(tmp_path / "plugins/b/pps_b/store.py", "_cache = {}\ndef public(): ...\n")
    write(tmp_path / "plugins/a/pyproject.toml", '[project]\nname = "pps-a"\ndependencies = ["pps-core"]\n')
    write(tmp_path / "plugins/a/pps_a/__init__.py", "")
    write(tmp_path / "plugins/a/pps_a/ok.py", """
        from typing import TYPE_CHECKING
        import json
        import pydantic  # what the kernel's API is made of: declared with pps-core
        from pps_core import hookimpl
        if TYPE_CHECKING:
            from pps_b.store import public  # annotations only
    """)
    write(tmp_path / "plugins/a/pps_a/bad.py", """
        def later():
            from pps_b.store import public  # undeclared, inside a function
        from pps_b.store import _cache
        from pps_b import store
        store._cache.clear()
    """)
    write(tmp_path / "plugins/a/tests/test_a.py", "import pytest\nfrom pps_b import store\n")
    found = [p.split(":", 1)[1] for p in lint.check(tmp_path)]
    assert sorted(p for p in lint.check(tmp_path) if "ok.py" in p) == []
    assert "3: imports pps_b.store of pps-b, which pps-a does not declare in its pyproject.toml" in found
    assert any(p.startswith("4: imports a private name of pps-b: pps_b.store._cache") for p in found)
    assert any(p.startswith("6: uses a private name of another distribution: store._cache") for p in found)
    tests = [p for p in lint.check(tmp_path) if p.startswith("plugins/a/tests/")]
    assert tests == ["plugins/a/tests/test_a.py:2: imports pps_b of pps-b, which pps-a does not declare in its "
                     "pyproject.toml"]  # pytest comes with the dev environment; another plugin must be declared
    write(tmp_path / "plugins/a/pyproject.toml",
          '[project]\nname = "pps-a"\ndependencies = ["pps-core"]\n[project.optional-dependencies]\ntest = ["pps-b"]\n')
    assert [p for p in lint.check(tmp_path) if "does not declare" in p] == []


def test_package_code_imports_another_plugin_only_as_a_required_dependency(tmp_path):
    """An extra naming another plugin (``graph = ["pps-b"]``) does not license reaching into it: the code of a
    plugin's package meets another plugin only through the kernel's contracts, unless it requires it outright.
    A guarded import inside a function (``try: from pps_b.settings import ... except ImportError``) is still one.
    An extra's third-party library (``psycopg``) may be imported optionally; the tests may use a test extra."""
    lint = load()
    write(tmp_path / "pyproject.toml", '[project]\nname = "pps-core"\ndependencies = ["pydantic>=2"]\n')
    write(tmp_path / "plugins/b/pyproject.toml", '[project]\nname = "pps-b"\ndependencies = ["pps-core"]\n')
    write(tmp_path / "plugins/b/pps_b/__init__.py", "")
    write(tmp_path / "plugins/b/pps_b/settings.py", "class BSettings: ...\n")
    write(tmp_path / "plugins/a/pyproject.toml",
          '[project]\nname = "pps-a"\ndependencies = ["pps-core"]\n[project.optional-dependencies]\n'
          'graph = ["pps-b"]\npostgres = ["pydantic-core"]\ntest = ["pps-b"]\n')
    write(tmp_path / "plugins/a/pps_a/__init__.py", "")
    write(tmp_path / "plugins/a/pps_a/pages.py", """
        def focal(settings):
            try:
                from pps_b.settings import BSettings
            except ImportError:
                return None
            return BSettings


        def optional_library():
            try:
                import pydantic_core
            except ImportError:
                return None
            return pydantic_core
    """)
    write(tmp_path / "plugins/a/tests/test_a.py", "from pps_b.settings import BSettings\n")
    found = lint.check(tmp_path)
    assert found == ["plugins/a/pps_a/pages.py:4: imports pps_b.settings of pps-b, which pps-a names only in an "
                     "extra (graph, test): a plugin's code meets another plugin through pps_core's contracts, or requires "
                     "it in its dependencies"]
    write(tmp_path / "plugins/a/pyproject.toml",
          '[project]\nname = "pps-a"\ndependencies = ["pps-core", "pps-b"]\n[project.optional-dependencies]\n'
          'postgres = ["pydantic-core"]\n')
    assert lint.check(tmp_path) == []
