"""Concurrent crystallize / crystal_delete (threads of one process, and several processes) never lose,
overwrite or reuse a crystal number, and never answer a 500."""

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

FOLDERS = ("", "archive", "deleted")


def _stored(home: Path) -> dict[str, list[tuple[str, str]]]:
    """crystal name -> [(folder, text)] over the window, the archive and the trash."""
    out: dict[str, list[tuple[str, str]]] = {}
    for folder in FOLDERS:
        d = home / "crystals" / folder
        for p in sorted(d.glob("crystal_*.md")) if d.is_dir() else []:
            out.setdefault(p.name, []).append((folder, p.read_text()))
    return out


def _check(home: Path, created: dict[str, str], deleted: list[str]) -> None:
    stored = _stored(home)
    reused = {n: v for n, v in stored.items() if len(v) > 1}
    assert not reused, f"one number in two folders: {reused}"
    lost = sorted(n for n in created if n not in stored)
    assert not lost, f"acknowledged crystals missing: {lost}"
    wrong = sorted(n for n, text in created.items() if stored[n][0][1] != text)
    assert not wrong, f"crystals holding another call's text: {wrong}"
    assert len(created) == len(set(created)), "a number was handed out twice"
    for name in deleted:
        assert stored[name][0][0] == "deleted", f"{name} acknowledged deleted but is in {stored[name][0][0]!r}"


async def test_concurrent_crystallize_and_delete_in_one_process(make_memory):
    m = await make_memory(plugins=["crystals"])
    created: dict[str, str] = {}
    deleted: list[str] = []
    errors: list[BaseException] = []

    async def make(i):
        text = f"crystal text {i}"
        try:
            out = await m.call("crystallize", {"content": text})
        except BaseException as exc:  # noqa: BLE001 -- every failure is a finding
            errors.append(exc)
            return
        assert out["created"] not in created, f"{out['created']} acknowledged twice"
        created[out["created"]] = text

    async def delete():
        try:
            out = await m.call("crystal_delete")
        except BaseException as exc:  # noqa: BLE001
            if type(exc).__name__ != "NotFound":
                errors.append(exc)
            return
        deleted.append(out["deleted"])

    jobs = []
    for i in range(120):
        jobs.append(make(i))
        if i % 3 == 0:
            jobs.append(delete())
    await asyncio.gather(*jobs)
    assert not errors, f"{len(errors)} calls failed, e.g. {errors[0]!r}"
    _check(m.home, created, deleted)
    assert len(deleted) == len(set(deleted))


WORKER = textwrap.dedent("""
    import asyncio, json, sys
    from pps_core import Memory
    from pps_core.settings import load_settings

    async def main(home, tag, n):
        m = Memory(load_settings("testentity", home, plugins=["crystals"], timezone="UTC"), own=False)
        await m.open()
        created, deleted, errors = {}, [], []
        try:
            for i in range(n):
                text = f"{tag} crystal {i}"
                try:
                    out = await m.call("crystallize", {"content": text})
                    created[out["created"]] = text
                    if i % 3 == 1:
                        deleted.append((await m.call("crystal_delete"))["deleted"])
                except Exception as exc:
                    errors.append(repr(exc))
        finally:
            await m.close()
        print(json.dumps({"created": created, "deleted": deleted, "errors": errors}))

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
""")


async def test_concurrent_crystallize_and_delete_across_processes(make_memory, tmp_path):
    import json

    m = await make_memory(plugins=["crystals"])  # creates the home and its pps.toml
    home = m.home
    await m.close()
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    procs = [subprocess.Popen([sys.executable, str(script), str(home), f"p{k}", "40"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for k in range(3)]
    created: dict[str, str] = {}
    deleted: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        got = json.loads(out.strip().splitlines()[-1])
        assert not got["errors"], got["errors"][:3]
        for name, text in got["created"].items():
            assert name not in created, f"{name} handed out to two processes"
            created[name] = text
        deleted += got["deleted"]
    _check(home, created, deleted)
