"""`pps plugins` right after installing, before any entity exists: what is installed, not an error."""

import json
import subprocess
import sys
from importlib.metadata import entry_points


def _pps(args, tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PPS_ROOT": str(tmp_path / "entities")}
    code = "import sys; from pps_core.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=60)


def test_plugins_before_init_lists_what_is_installed(tmp_path):
    proc = _pps(["plugins"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "no entity yet: `pps init --entity NAME` creates one" in proc.stdout
    assert "sqlite       pps-sqlite " in proc.stdout
    listed = json.loads(_pps(["plugins", "--json"], tmp_path).stdout)
    assert set(listed["installed"]) == {ep.name for ep in entry_points(group="pps.plugins")} - {"ledger"}
    assert listed["distributions"]["sqlite"]["distribution"] == "pps-sqlite"
    assert not (tmp_path / "entities").exists()  # nothing was created


def test_plugins_for_a_named_entity_that_does_not_exist_is_still_an_error(tmp_path):
    proc = _pps(["plugins", "--entity", "lyra"], tmp_path)
    assert proc.returncode == 2 and "run `pps init --entity lyra` first" in proc.stderr


def test_the_contract_suites_test_store_is_not_a_users_plugin(tmp_path):
    """`ledger` (the store pps-core's TransportContract serves) exists only for the suites' own processes: a
    user's `pps plugins` never lists it, and an entity cannot name it."""
    listed = json.loads(_pps(["plugins", "--json"], tmp_path).stdout)
    assert "sqlite" in listed["installed"] and "ledger" not in listed["installed"]
    proc = _pps(["init", "--entity", "lyra", "--plugins", "sqlite,ledger"], tmp_path)  # refused before writing
    assert proc.returncode != 0 and "no plugin named 'ledger'" in proc.stderr, proc.stdout + proc.stderr
    _pps(["init", "--entity", "lyra", "--plugins", "sqlite"], tmp_path)
    toml = next(tmp_path.rglob("lyra/pps.toml"))
    toml.write_text(toml.read_text().replace('"sqlite"', '"sqlite", "ledger"'))  # named by hand
    proc = _pps(["plugins", "--entity", "lyra"], tmp_path)
    assert proc.returncode != 0 and "no plugin named 'ledger'" in proc.stderr, proc.stdout + proc.stderr


def test_the_contract_suites_register_the_test_store_for_their_own_processes(tmp_path):
    from pps_core.testing.server import pps

    listed = json.loads(pps(tmp_path, "plugins", "--json").stdout)
    assert listed["installed"]["ledger"] == "pps_core.testing.ledger"
