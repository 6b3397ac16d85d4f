"""Plugins meet only through declared, public contracts: a check of every plugin's imports (``make lint``).

For each distribution under ``plugins/`` and ``examples/`` (its ``pyproject.toml``), every ``import`` in its
package (at any depth, not those under ``if TYPE_CHECKING:``) must be

- of the standard library, of the distribution itself, or of a distribution it declares (``dependencies`` or an
  extra of ``optional-dependencies``); declaring ``pps-core`` declares what the kernel's API is made of (its own
  dependencies, and those of the extras named, e.g. ``pps-core[testing]``);
- of another plugin of the repository only when the distribution *requires* it (``dependencies``): an extra
  naming a plugin (``graph = ["pps-graphiti"]``) installs it beside, it does not license reaching into it (a guarded
  ``try: from pps_x.settings import ...`` inside a function included); plugins meet through ``pps_core``'s
  contracts. An extra's third-party library may be imported optionally, and the tests may use a test extra;
- and never of a private name of another distribution: ``from pps_x.mod import _name``, a module ``pps_x._mod``,
  or ``mod._name`` on a module imported from another distribution.

Its tests run in the development environment (``requirements-dev.txt``), so there only imports of the kernel and
of other plugins are checked: a test of one plugin that imports another must declare it (e.g. in a test extra).

Known breaks being fixed elsewhere are listed in ``plugin_imports_baseline.txt`` (one per line, with the issue);
a break not listed fails, and so does a listed one that is gone (remove its line).

    python packaging/plugin_imports.py          # exit 1 and one line per break
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = Path(__file__).resolve().parent / "plugin_imports_baseline.txt"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(spec: str) -> tuple[str, set[str]]:
    """('pps-core', {'testing'}) from 'pps-core[testing]>=1'."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", spec)
    if not m:
        return norm(spec), set()
    return norm(m.group(1)), {e.strip() for e in (m.group(2) or "").split(",") if e.strip()}


@dataclass
class Dist:
    name: str
    directory: Path
    packages: list[str]
    declared: set[str] = field(default_factory=set)
    required: set[str] = field(default_factory=set)  # named in ``dependencies``, not only in an extra
    extras: dict[str, list[str]] = field(default_factory=dict)  # distribution -> the extras that name it


def _project(directory: Path) -> dict:
    return tomllib.loads((directory / "pyproject.toml").read_text()).get("project", {})


def kernel_api(root: Path, extras: set[str]) -> set[str]:
    """What declaring pps-core (with ``extras``) declares: its dependencies and those extras'."""
    project = _project(root)
    specs = list(project.get("dependencies", []))
    for extra in extras:
        specs += project.get("optional-dependencies", {}).get(extra, [])
    return {requirement(s)[0] for s in specs}


def distributions(root: Path = ROOT) -> list[Dist]:
    out = []
    for pyproject in sorted([*root.glob("plugins/*/pyproject.toml"), *root.glob("examples/*/pyproject.toml")]):
        directory = pyproject.parent
        project = _project(directory)
        packages = sorted(p.parent.name for p in directory.glob("*/__init__.py") if p.parent.name != "tests")
        dist = Dist(norm(project.get("name", directory.name)), directory, packages)
        specs = [(s, None) for s in project.get("dependencies", [])]
        for extra, listed in project.get("optional-dependencies", {}).items():
            specs += [(s, extra) for s in listed]
        for spec, extra in specs:
            name, extras = requirement(spec)
            dist.declared.add(name)
            if extra is None:
                dist.required.add(name)
            else:
                dist.extras.setdefault(name, []).append(extra)
            if name == "pps-core":
                dist.declared |= kernel_api(root, extras)
        out.append(dist)
    return out


def module_owners(root: Path, dists: list[Dist]) -> dict[str, str]:
    """Top-level module -> distribution: the repository's own packages, then what is installed."""
    owners = {top: norm(names[0]) for top, names in metadata.packages_distributions().items() if names}
    owners["pps_core"] = "pps-core"
    for d in dists:
        for package in d.packages:
            owners[package] = d.name
    return owners


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """(node, module, names) of every absolute import, skipping ``if TYPE_CHECKING:`` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if _type_checking(node):
            stack.extend(getattr(node, "orelse", []))
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node, alias.name, [], alias
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node, node.module, node.names, None
        stack.extend(ast.iter_child_nodes(node))


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _is_module(module: str, name: str, dists: list[Dist]) -> bool:
    """Whether ``from module import name`` imports a module (of the repository, or installed)."""
    import importlib.util

    parts = [*module.split("."), name]
    for d in dists:
        if parts[0] in d.packages:
            where = d.directory.joinpath(*parts)
            return where.with_suffix(".py").exists() or (where / "__init__.py").exists()
    try:
        return importlib.util.find_spec(".".join(parts)) is not None
    except (ImportError, ValueError):
        return False


def check(root: Path = ROOT) -> list[str]:
    """Every break, as ``path:line: what`` (paths relative to ``root``)."""
    dists = distributions(root)
    owners = module_owners(root, dists)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    repo = {d.name for d in dists} | {"pps-core"}
    problems: list[str] = []
    for d in dists:
        for path in sorted(d.directory.rglob("*.py")):
            if any(part in (".venv", "build", "node_modules") for part in path.parts):
                continue
            rel = path.relative_to(root)
            in_tests = "tests" in path.relative_to(d.directory).parts
            tree = ast.parse(path.read_text(), str(path))
            foreign_modules: set[str] = set()  # names bound to another distribution's modules
            for node, module, names, alias in _imports(tree):
                top = module.split(".")[0]
                if top in stdlib:
                    continue
                owner = owners.get(top)
                if owner is None or owner == d.name or (in_tests and owner not in repo):
                    continue  # tests run in the dev environment (requirements-dev.txt): only plugins are checked
                if owner not in d.declared:
                    problems.append(f"{rel}:{node.lineno}: imports {module} of {owner}, which {d.name} does not "
                                    "declare in its pyproject.toml")
                elif owner in repo and owner not in d.required and not in_tests:
                    problems.append(f"{rel}:{node.lineno}: imports {module} of {owner}, which {d.name} names only "
                                    f"in an extra ({', '.join(d.extras[owner])}): a plugin's code meets another "
                                    "plugin through pps_core's contracts, or requires it in its dependencies")
                private = [p for p in module.split(".")[1:] if _private(p)]
                private += [f"{module}.{a.name}" for a in names if _private(a.name)]
                if private:
                    problems.append(f"{rel}:{node.lineno}: imports a private name of {owner}: {private[0]}")
                if alias is not None:
                    foreign_modules.add(alias.asname or top)
                for a in names:
                    if not _private(a.name) and _is_module(module, a.name, dists):
                        foreign_modules.add(a.asname or a.name)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                        and node.value.id in foreign_modules):
                    problems.append(f"{rel}:{node.lineno}: uses a private name of another distribution: "
                                    f"{node.value.id}.{node.attr}")
    return problems


def baseline() -> set[str]:
    if not BASELINE.exists():
        return set()
    return {line.split("  #")[0].strip() for line in BASELINE.read_text().splitlines()
            if line.strip() and not line.startswith("#")}


def _key(problem: str) -> str:
    """A break without its line number (the baseline survives edits above it)."""
    path, _line, what = problem.split(":", 2)
    return f"{path}:{what}"


def main() -> int:
    found = check()
    known = baseline()
    new = [p for p in found if _key(p) not in known]
    gone = sorted(known - {_key(p) for p in found})
    for p in new:
        print(p)
    for k in gone:
        print(f"{k} -- listed in {BASELINE.relative_to(ROOT)} but fixed: remove the line")
    if new or gone:
        print(f"plugin imports: {len(new)} new break(s), {len(gone)} stale baseline line(s)")
        return 1
    print(f"plugin imports: {len(distributions())} distributions checked, {len(known)} known break(s) listed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
