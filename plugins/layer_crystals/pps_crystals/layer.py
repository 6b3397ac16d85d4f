"""Crystals as files: crystal_NNN.md in a rolling window; older ones archived, never lost."""

from __future__ import annotations

import asyncio
import fcntl
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import Field

from pps_core import (
    Layer,
    LayerHealth,
    PluginSettings,
    Pointer,
    SearchResult,
    SectionConfig,
    StartupItems,
    StorePath,
)
from pps_core.atomic import NotPlainFile, atomic_create, plain_problem, read_plain
from pps_core.errors import Conflict, NotFound
from pps_core.textsearch import lexical_scores_tokens, tokens
from pps_core.timeutil import to_storage

NAME = re.compile(r"^crystal_(\d{3,})\.md$")
LOCK_NAME = ".lock"
#: A folder's listing is reused while the folder's inode and mtime are those it had, and only if that mtime was
#: at least this old when it was listed: a file added within the same clock tick as the listing can leave the
#: mtime as it was, never one added a second later (so a crystal another process adds is seen at the next call).
LISTING_SETTLED_NS = 1_000_000_000
T = TypeVar("T")


class CrystalSettings(PluginSettings, env_prefix="PPS_CRYSTALS_"):
    window: int = Field(4, ge=1, le=1000, description="crystals kept in the window; older ones are archived")
    directory: StorePath = Field("crystals", description="folder under the entity's home (store = files; with "
                                                         "postgres, where `pps crystals sync` writes the files)")
    store: Literal["files", "postgres"] = Field(
        "files", description="files = crystal_NNN.md in the home (one owner); postgres = one table shared by "
                             "every server of the entity (needs dsn; pip install 'pps[postgres]')")
    dsn: str = Field("", description="store = postgres: libpq connection string or URI (password in PGPASSWORD "
                                     "or ~/.pgpass); default: [postgres] dsn")
    schema_name: str = Field("", alias="schema", max_length=63,
                             description="store = postgres: the schema; default: [postgres] schema, else "
                                         "pps_<entity>")


def numbered(folder: Path) -> list[tuple[int, Path]]:
    """The ``crystal_NNN.md`` names in ``folder``, by number, listed now: every one but a folder, links included
    (its number is taken; :func:`readable` keeps the files that may be read)."""
    out = []
    with os.scandir(folder) as entries:
        for e in entries:
            m = NAME.match(e.name)
            if m and not e.is_dir(follow_symlinks=False):
                out.append((int(m.group(1)), Path(e.path)))
    return sorted(out)


def readable(pairs: list[tuple[int, Path]]) -> list[tuple[int, Path]]:
    """The plain files among ``pairs``: a link (symbolic or hard) is never read as a crystal (issue 35 item 9),
    it would inject the file it points to (``ln -s ~/.ssh/id_ed25519 crystals/crystal_009.md``)."""
    return [(n, p) for n, p in pairs if plain_problem(p) is None]


def crystal_name(number: int) -> str:
    return f"crystal_{number:03d}.md"


class CrystalLayer(Layer):
    name = "crystallization"
    title = "Crystals"
    #: Plain files read under a file lock: any process can read them beside the owner, at once.
    glance = True

    def default_sections(self) -> list[SectionConfig]:
        """reference/002: the three newest crystals, second in the package (after the last session)."""
        return [SectionConfig(name="Crystals", layer=self.name, count=3, position=10)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        return Pointer(operation="get_crystals", params={"count": total})

    def __init__(self, memory) -> None:
        super().__init__()
        self.settings = memory.settings.plugin_settings(CrystalSettings, "crystals")
        self.dir = Path(memory.home) / self.settings.directory
        self.archive = self.dir / "archive"
        self.trash = self.dir / "deleted"
        self._cache: dict[Path, tuple[tuple[int, int], str, list[str]]] = {}
        #: Each folder's numbered files, by the folder's (inode, mtime) when listed (:meth:`_numbered`).
        self._listings: dict[Path, tuple[tuple[int, int], list[tuple[int, Path]]]] = {}
        self._thread_lock = threading.Lock()
        self._glancing = False

    async def open(self) -> None:
        for d in (self.dir, self.archive):
            d.mkdir(parents=True, exist_ok=True, mode=0o700)

    async def open_glance(self) -> None:
        """Read-only: nothing to open (the folders are read as they are; none yet reads as no crystals)."""
        self._glancing = True

    @contextmanager
    def locked(self) -> Iterator[None]:
        """One writer (or reader) of the folders at a time: threads of this process, then other processes.

        Numbering, rolling and deleting each read a listing and then move files; two of them interleaved
        lost crystals and reused numbers. flock on ``crystals/.lock`` is released by the kernel if the
        holder dies, so a crash never leaves the folder locked.
        """
        with self._thread_lock:
            if self._glancing and not self.dir.is_dir():  # a glance only reads: no folder is no crystals yet,
                yield  # and it creates nothing (not the folder, not its lock)
                return
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(self.dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield
            finally:
                os.close(fd)  # closing the descriptor releases the flock

    def _run_locked(self, fn: Callable[..., T], *args) -> T:
        with self.locked():
            return fn(*args)

    async def run_locked(self, fn: Callable[..., T], *args) -> T:
        """``fn(*args)`` under the lock, in a worker thread (waiting for another process never blocks the loop)."""
        return await asyncio.to_thread(self._run_locked, fn, *args)

    # -- operations (the PostgreSQL layer answers the same ones) -------------------------------

    async def crystallize(self, content: str) -> dict[str, Any]:
        path, window = await self.run_locked(lambda: (self.create(content), self.current()))
        return {"created": path.name, "chars": len(content), "window": [q.name for _n, q in window]}

    async def listing(self) -> dict[str, Any]:
        current, archived, refused = await self.run_locked(
            lambda: (readable(self.current()), readable(self.archived()), self.unreadable()))
        out: dict[str, Any] = {"current": [p.name for _n, p in current], "archived": [p.name for _n, p in archived],
                               "window": self.settings.window}
        if refused:
            out["unreadable"] = refused
        return out

    async def delete_newest_op(self) -> dict[str, Any]:
        path, current = await self.run_locked(lambda: (self.delete_newest(), self.current()))
        return {"deleted": path.name, "current": [q.name for _n, q in current]}

    async def forget(self, name: str) -> dict[str, Any]:
        from .operations import _forget

        return await self.run_locked(_forget, self, name)

    # -- files --------------------------------------------------------------------------------

    def _numbered(self, folder: Path) -> list[tuple[int, Path]]:
        """The folder's crystals by number; listed again only when the folder changed (its mtime: a file added,
        removed or renamed in it), so the startup package's health line does not list both folders every call."""
        try:
            st = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            return []
        if not stat.S_ISDIR(st.st_mode):
            return []
        key = (st.st_ino, st.st_mtime_ns)
        hit = self._listings.get(folder)
        if hit is not None and hit[0] == key:
            return list(hit[1])
        out = numbered(folder)
        if time.time_ns() - st.st_mtime_ns >= LISTING_SETTLED_NS:
            self._listings[folder] = (key, out)
        return list(out)

    def current(self) -> list[tuple[int, Path]]:
        """Every crystal name in the window, links included (numbering, rolling); :func:`readable` to read."""
        return self._numbered(self.dir)

    def archived(self) -> list[tuple[int, Path]]:
        return self._numbered(self.archive)

    def create(self, content: str) -> Path:
        """Write the next crystal atomically (never overwriting), then roll the window. Call under ``locked``."""
        self.archive.mkdir(parents=True, exist_ok=True, mode=0o700)
        while True:
            used = [n for n, _ in self.current() + self.archived() + self._numbered(self.trash)]
            number = (max(used) + 1) if used else 1
            path = self.dir / f"crystal_{number:03d}.md"
            if atomic_create(path, content):
                break
        self._roll()
        return path

    def _roll(self) -> None:
        cur = self.current()
        for _n, p in cur[: max(0, len(cur) - self.settings.window)]:
            _move(p, self.archive)

    def delete_newest(self) -> Path:
        """Move the newest crystal to ``deleted/`` and refill the window from the archive. Call under ``locked``."""
        cur = self.current()
        if not cur:
            raise NotFound("crystal_delete: there is no crystal to delete")
        _n, newest = cur[-1]
        self.trash.mkdir(parents=True, exist_ok=True, mode=0o700)
        _move(newest, self.trash)
        arch = self.archived()
        if arch and len(self.current()) < self.settings.window:  # refill the window from the archive
            _move(arch[-1][1], self.dir)
        return newest

    def unreadable(self) -> list[dict[str, str]]:
        """The names in the window and the archive that are not read (links), each with the reason."""
        out = []
        for _n, p in self.archived() + self.current():
            problem = plain_problem(p)
            if problem:
                out.append({"name": p.name, "folder": str(p.parent.relative_to(self.dir.parent)), "reason": problem})
        return out

    def newest(self, count: int) -> list[Path]:
        cur = [p for _n, p in readable(self.current())]
        if count > len(cur):
            cur = [p for _n, p in readable(self.archived())] + cur
        return cur[-count:] if count > 0 else []

    def _entry(self, path: Path) -> tuple[tuple[int, int], str, list[str]]:
        """File text and tokens, re-read only when mtime or size changed (a hand edit is seen at once)."""
        st = os.lstat(path)
        key = (st.st_mtime_ns, st.st_size)
        hit = self._cache.get(path)
        if hit is None or hit[0] != key:
            text = _read(path)
            hit = (key, text, tokens(text))
            self._cache[path] = hit
        return hit

    def result(self, path: Path, score: float = 1.0) -> SearchResult:
        st = os.lstat(path)
        return SearchResult(layer=self.name, content=_read(path), source=path.name, score=score,
                            timestamp=to_storage(_mtime(st.st_mtime)),
                            metadata={"kind": "document", "archived": path.parent == self.archive})

    # -- layer ----------------------------------------------------------------------------------

    def _search(self, query: str, limit: int, offset: int) -> list[SearchResult]:
        entries = []
        for _n, p in readable(self.archived() + self.current()):
            try:
                entries.append((p, self._entry(p)[2]))
            except NotPlainFile:  # swapped for a link since it was listed
                continue
        scored = lexical_scores_tokens(query, [toks for _p, toks in entries])
        ranked = sorted(((s, p) for (p, _t), s in zip(entries, scored, strict=True) if s > 0), key=lambda t: -t[0])
        return self._results(ranked[offset: offset + limit])

    def _results(self, scored: list[tuple[float, Path]]) -> list[SearchResult]:
        out = []
        for score, path in scored:
            try:
                out.append(self.result(path, score))
            except NotPlainFile:  # swapped for a link since it was listed
                continue
        return out

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        return await self.run_locked(self._search, query, limit, offset)

    async def recent(self, limit: int) -> list[SearchResult]:
        return await self.run_locked(lambda: self._results([(1.0, p) for p in self.newest(limit)]))

    async def startup(self, count: int | None) -> StartupItems:
        """The newest ``count``, and how many crystals there are (window and archive), counted without reading."""
        def run() -> StartupItems:
            items = self._results([(1.0, p) for p in self.newest(count if count is not None else 1_000_000)])
            return StartupItems(items=items, total=len(readable(self.current())) + len(readable(self.archived())))

        return await self.run_locked(run)

    async def health(self) -> LayerHealth:
        if not self.dir.is_dir():
            return LayerHealth(layer=self.name, available=False, detail=f"{self.dir} is missing")
        refused = self.unreadable()
        detail = str(self.dir)
        if refused:
            detail += "; not read: " + "; ".join(f"{u['folder']}/{u['name']} ({u['reason']})" for u in refused[:5])
        counts = {"crystals": len(readable(self.current())), "archived": len(readable(self.archived()))}
        if refused:
            counts["unreadable"] = len(refused)
        return LayerHealth(layer=self.name, available=True, detail=detail, counts=counts,
                           latency_ms=self.recent_latency_ms)


def _move(src: Path, folder: Path) -> Path:
    """Move ``src`` into ``folder`` (one rename: a crash never leaves it in both); a file of the same name
    there (a hand-made copy) is kept and this one gets a suffix. Called under the lock."""
    dst, k = folder / src.name, 0
    while dst.exists():
        k += 1
        dst = folder / f"{src.name}.{k}"
    os.rename(src, dst)
    return dst


def _read(path: Path) -> str:
    """A crystal's text, never through a link (:func:`pps_core.atomic.read_plain`: raises ``NotPlainFile``)."""
    try:
        return read_plain(path).decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise Conflict(f"{path.name} changed while being read; try again") from None


def _mtime(ts: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, UTC)
