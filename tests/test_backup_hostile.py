"""A restore is hostile input (issue 14): links, devices, '..', absolute names and a pps.toml pointing a store
at another home are refused in one line, and nothing is left behind."""

import io
import json
import tarfile

import pytest

from pps_core.testing.server import init_entity, pps

MANIFEST = {"format": 2, "entity": "lyra", "counts": {}, "files": 1, "token_included": False}


def archive(path, members):
    """members: (TarInfo, bytes | None) pairs; a manifest and a pps.toml are added."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in [(tarfile.TarInfo("pps-backup.json"), json.dumps(MANIFEST).encode()),
                           (tarfile.TarInfo("pps.toml"), b'entity = "lyra"\nplugins = []\n')] + members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def member(name, kind=tarfile.REGTYPE, data=b"x", linkname=""):
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, (data if kind == tarfile.REGTYPE else None)


HOSTILE = {
    "symlink out": [member("crystals", tarfile.SYMTYPE, linkname="/tmp"), member("crystals/x.md")],
    "hardlink": [member("token", tarfile.LNKTYPE, linkname="pps.toml")],
    "dotdot": [member("../escaped.txt")],
    "absolute": [member("/tmp/pps-escaped.txt")],
    "device": [member("dev", tarfile.CHRTYPE)],
    "fifo": [member("pipe", tarfile.FIFOTYPE)],
    "twice": [member("a.md"), member("a.md")],
    # the CVE-2025-4517 shape: a chain of links whose resolution passes PATH_MAX, then a file through it
    "link chain": [member("d" * 200 + f"{i}", tarfile.SYMTYPE, linkname="../" * 30) for i in range(20)]
                  + [member("d" * 200 + "0/victim")],
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_archive_is_refused_in_one_line_and_leaves_nothing(tmp_path, case):
    target = tmp_path / "restored" / "home"
    bad = archive(tmp_path / "bad.tar.gz", HOSTILE[case])
    out = pps(tmp_path, "restore", str(bad), "--home", str(target), check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "nothing was restored" in out.stderr
    assert not target.exists() and list((tmp_path / "restored").iterdir()) == []
    assert not (tmp_path / "escaped.txt").exists()


def test_a_restored_config_cannot_point_a_store_at_another_home(tmp_path):
    victim = init_entity(tmp_path, "victim", "sqlite")
    pps(tmp_path, "call", "--entity", "victim", "store_message",
        '{"content": "the victim\'s secret", "author_name": "V", "channel": "c"}')
    bad = tmp_path / "evil.tar.gz"
    with tarfile.open(bad, "w:gz") as tar:
        for name, data in [("pps-backup.json", json.dumps(MANIFEST).encode()),
                           ("pps.toml", f'entity = "evil"\nplugins = ["sqlite"]\n[sqlite]\nfile = '
                                        f'"{victim / "pps.db"}"\n'.encode())]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    target = tmp_path / "root" / "evil"
    # adopted whole only when asked (issue 35 item 10), and then refused
    out = pps(tmp_path, "restore", str(bad), "--home", str(target), "--archive-settings", check=False)
    assert out.returncode == 2 and "inside the entity's home" in out.stderr and "Traceback" not in out.stderr
    assert not target.exists()
    # by default the archive's [sqlite] table is left out: the restored entity's store is its own
    out = pps(tmp_path, "restore", str(bad), "--home", str(target), check=False)
    assert out.returncode == 0 and "left out the archive's [sqlite] settings" in out.stdout, out.stdout + out.stderr
    assert "the victim's secret" not in pps(tmp_path, "call", "--home", str(target), "raw_search",
                                           '{"query": "secret"}').stdout
    found = pps(tmp_path, "call", "--entity", "victim", "raw_search", '{"query": "secret"}').stdout
    assert "the victim's secret" in found


def test_an_archive_never_restores_live_credentials(tmp_path):
    """An archive that holds ``credentials/`` (an OAuth server's grants: pps_core.auth.CREDENTIALS_DIR, which no
    backup writes) is restored without it: a grant revoked since cannot come back from an archive."""
    target = tmp_path / "home"
    crafted = archive(tmp_path / "old.tar.gz", [member("credentials/oauth.json", data=b'{"access": {}}'),
                                                member("crystals/crystal_001.md", data=b"# kept")])
    out = pps(tmp_path, "restore", str(crafted), "--home", str(target), check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert (target / "crystals" / "crystal_001.md").read_bytes() == b"# kept"
    assert not (target / "credentials").exists()

