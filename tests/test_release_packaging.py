"""Release tooling (packaging/release.py): one version everywhere, the `pps` metapackage, package data."""

import importlib.util
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_release():
    spec = importlib.util.spec_from_file_location("pps_release", ROOT / "packaging" / "release.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


release = _load_release()


def _meta() -> dict:
    return tomllib.loads((ROOT / "packaging" / "pps" / "pyproject.toml").read_text())["project"]


def _entry_points(pkg) -> set[str]:
    data = tomllib.loads(pkg.pyproject.read_text())
    return set(data["project"].get("entry-points", {}).get("pps.plugins", {}))


def test_every_distribution_carries_the_one_version():
    assert release.check() == []
    core, plugins = release.packages()
    import pps_core

    versions = {p.name: p.version for p in [core, *plugins]}
    versions["pps"] = _meta()["version"]
    versions["pps_core.__version__"] = pps_core.__version__
    assert set(versions.values()) == {release.read_version()}, versions


def test_the_default_install_holds_the_default_plugins_and_the_extras_the_rest():
    from pps_core.plugins import default_plugins

    core, plugins = release.packages()
    default = [p for p in plugins if p.bundle == "default"]
    # `pps init` on a default install gets the whole default plugin list: a plugin that asks to be loaded by every
    # new entity (PPS_DEFAULT) ships in the default install.
    assert set(default_plugins()) <= {name for p in default for name in _entry_points(p)}
    meta = _meta()
    version = release.read_version()
    assert sorted(meta["dependencies"]) == sorted(f"{p.name}=={version}" for p in [core, *default])
    extras = meta["optional-dependencies"]
    assert {"postgres", "explorer", "falkordb", "neo4j", "all"} <= set(extras)
    assert extras["falkordb"] == [f"pps-graphiti[falkordb-server]=={version}"]
    for p in plugins:
        if p.bundle == "extra":
            assert f"{p.name}=={version}" in extras[p.extra] and f"{p.name}=={version}" in extras["all"]
    assert meta["scripts"] == {"pps": "pps_core.cli:main"}  # pipx/uv tool expose this distribution's scripts
    # The metapackage's README names what it installs.
    readme = (ROOT / "packaging" / "pps" / "README.md").read_text()
    missing = [p.name for p in default if f"`{p.name}`" not in readme]
    missing += [f"pps[{e}]" for e in extras if f"`pps[{e}]`" not in readme]
    assert not missing, f"packaging/pps/README.md does not mention {missing}"


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A copy of the files release.py reads and writes; release.ROOT points at it."""
    files = ["VERSION", "LICENSE", "pyproject.toml", "pps_core/__init__.py", "packaging/pps/pyproject.toml",
             "packaging/pps/LICENSE", "packaging/pps/README.md"]
    for directory in release.plugin_dirs():
        rel = directory.relative_to(ROOT)
        files += [str(rel / "pyproject.toml"), str(rel / "LICENSE")]
    for rel in files:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, tmp_path / rel)
    monkeypatch.setattr(release, "ROOT", tmp_path)
    return tmp_path


def _plugin(tree: Path, name: str, tool: str) -> Path:
    directory = tree / "plugins" / name
    directory.mkdir(parents=True)
    (directory / "pyproject.toml").write_text(
        f'[project]\nname = "pps-{name}"\nversion = "{release.read_version()}"\n\n'
        f'[project.entry-points."pps.plugins"]\n{name} = "pps_{name}.plugin"\n\n{tool}')
    return directory


def test_a_new_version_is_written_into_every_distribution(tree):
    before = {p: p.read_text() for p in tree.rglob("pyproject.toml")}
    old = release.read_version()
    (tree / "VERSION").write_text("9.8.7\n")
    problems = release.check()
    core, plugins = release.packages()
    assert len(problems) == len(plugins) + 3  # each pyproject, pps_core.__version__, the metapackage
    assert "pyproject.toml: version '0.1.0', VERSION says '9.8.7'" in problems[0].replace(old, "0.1.0")

    release.sync()
    assert release.check() == []
    for path, text in before.items():
        data = tomllib.loads(path.read_text())
        assert data["project"]["version"] == "9.8.7", path
        if "packaging" not in path.parts:  # nothing but the version line changed
            assert path.read_text().replace('version = "9.8.7"', f'version = "{old}"', 1) == text
    assert '__version__ = "9.8.7"' in (tree / "pps_core" / "__init__.py").read_text()
    meta = tomllib.loads((tree / "packaging" / "pps" / "pyproject.toml").read_text())["project"]
    assert all(dep.endswith("==9.8.7") for dep in meta["dependencies"])


def test_a_new_plugin_lands_in_the_default_install_or_an_extra_as_it_says(tree):
    _plugin(tree, "notes", '[tool.pps]\nbundle = "extra"\n')
    _plugin(tree, "diary", '[tool.pps]\nbundle = "default"\n')
    problems = release.check()
    assert "packaging/pps/pyproject.toml is not what the plugins' [tool.pps] tables and VERSION say" in problems
    assert "plugins/notes/LICENSE: missing or not a copy of ./LICENSE" in problems

    release.sync()
    assert release.check() == []
    meta = tomllib.loads((tree / "packaging" / "pps" / "pyproject.toml").read_text())["project"]
    version = release.read_version()
    assert f"pps-diary=={version}" in meta["dependencies"]
    assert f"pps-notes=={version}" not in meta["dependencies"]
    assert meta["optional-dependencies"]["notes"] == [f"pps-notes=={version}"]
    assert f"pps-notes=={version}" in meta["optional-dependencies"]["all"]
    assert (tree / "plugins" / "notes" / "LICENSE").read_bytes() == (tree / "LICENSE").read_bytes()


@pytest.mark.parametrize("tool, message", [
    ("", r"plugins/notes/pyproject.toml: no \[tool.pps\] table"),
    ('[tool.pps]\nbundle = "maybe"\n', r'bundle must be "default" or "extra", not \'maybe\''),
    ('[tool.pps]\nbundle = "default"\nextras = { big = ["nope"] }\n', r"extras.big must list extras of this package"),
    ('[tool.pps]\nbundel = "default"\n', r"unknown keys \['bundel'\]"),
])
def test_a_plugin_that_does_not_say_how_it_ships_is_refused_by_name(tree, tool, message):
    _plugin(tree, "notes", tool)
    with pytest.raises(release.ReleaseError, match=message):
        release.check()
    with pytest.raises(release.ReleaseError, match=message):
        release.sync()


def test_a_bad_version_is_refused_and_not_written(tree, capsys):
    assert release.main(["version", "one.two"]) == 2
    assert "is not a release version" in capsys.readouterr().err
    assert release.read_version() == (ROOT / "VERSION").read_text().strip()


def test_templates_and_static_files_ship_in_the_wheel_and_bytecode_does_not(tmp_path):
    src = tmp_path / "layer_crystals"
    shutil.copytree(ROOT / "plugins" / "layer_crystals", src,
                    ignore=shutil.ignore_patterns("*.egg-info", "build", "tests"))
    package = src / "pps_crystals"
    (package / "templates" / "pages").mkdir(parents=True)
    (package / "templates" / "pages" / "index.html").write_text("<p>{{ x }}</p>")
    (package / "static").mkdir()
    (package / "static" / "app.css").write_text("p {}")
    (package / "__pycache__").mkdir(exist_ok=True)
    (package / "__pycache__" / "layer.cpython-311.pyc").write_bytes(b"\0")
    (package / "templates" / "stray.pyc").write_bytes(b"\0")
    subprocess.run([sys.executable, "-m", "build", "-q", "--wheel", "--no-isolation", "--outdir",
                    str(tmp_path / "out"), str(src)], check=True, capture_output=True)
    (wheel,) = (tmp_path / "out").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "pps_crystals/templates/pages/index.html" in names
    assert "pps_crystals/static/app.css" in names
    assert not [n for n in names if n.endswith(".pyc") or "__pycache__" in n]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_users_path_in_the_readme_never_needs_make():
    """Only the README's Develop section may send anyone to `make`; and Install, while PPS is not on a package
    index (a registry command would fail today, issue 39), where the wheels are built from a checkout, saying
    what the one line will be once released."""
    readme = (ROOT / "README.md").read_text()
    sections = re.split(r"(?m)^(?=## )", readme)
    install = next(s for s in sections if s.startswith("## Install"))
    prerelease = "not on PyPI yet" in install
    if prerelease:
        assert "Once released" in install and "pipx install pps" in install, "Install must say what the one line will be"
    user = [s for s in sections if not s.startswith("## Develop") and not (prerelease and s is install)]
    assert len(user) == len(sections) - 1 - prerelease, "README has no '## Develop' section"
    offenders = [line for s in user for line in s.splitlines()
                 if re.search(r"(^|[`\s(])make( [a-z]+)?($|[`\s);,.])", line) or ".venv/" in line]
    assert not offenders, offenders
    assert readme.index("## Install") < readme.index("## Develop")
