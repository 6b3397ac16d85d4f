"""Core anchors: word-photo files in word_photos/, indexed in ChromaDB; hand edits noticed by stat, then hash."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pps_core import Layer, LayerHealth, Pointer, SearchResult, SectionConfig, StartupItems
from pps_core.atomic import atomic_create, clean_stale_tmp
from pps_core.errors import Conflict, NotFound, Unavailable
from pps_core.timeutil import now_utc, to_storage

from .files import Photo, Unreadable, check_filename, check_title, chunks, read_photo, render, slugify
from .settings import ChromaSettings

Fingerprint = tuple[int, int, int]  # mtime_ns, size, inode
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pps-chroma-embed")


@dataclass
class Entry:
    """What the layer knows of one indexed file without opening it."""

    fp: Fingerprint
    sha256: str
    title: str
    date: str | None
    tags: list[str]
    location: str | None
    warning: str | None

    @property
    def when(self) -> str:
        return self.date or _mtime(self.fp[0])

    def meta(self) -> dict[str, Any]:
        return {"sha256": self.sha256, "mtime_ns": self.fp[0], "size": self.fp[1], "ino": self.fp[2],
                "title": self.title, "date": self.date or "", "tags": json.dumps(self.tags, ensure_ascii=False),
                "location": self.location or "", "warning": self.warning or ""}

    @classmethod
    def from_meta(cls, m: dict[str, Any]) -> Entry:
        return cls(fp=(int(m["mtime_ns"]), int(m["size"]), int(m["ino"])), sha256=m["sha256"], title=m["title"],
                   date=m.get("date") or None, tags=json.loads(m.get("tags") or "[]"),
                   location=m.get("location") or None, warning=m.get("warning") or None)


class AnchorLayer(Layer):
    name = "core_anchors"
    title = "Word-photos"
    #: Cosine similarity below which a word-photo is no match for ambient recall (MiniLM: unrelated
    #: sentences score about 0.0-0.15, related ones 0.3+). `[recall] min_score` overrides it.
    min_recall_score = 0.2

    def default_sections(self) -> list[SectionConfig]:
        """reference/002: the two newest word-photos, after the crystals."""
        return [SectionConfig(name="Word-photos", layer=self.name, count=2, position=20)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        return Pointer(operation="anchor_list", params={})

    def __init__(self, memory) -> None:
        super().__init__()
        self.memory = memory
        self.settings = memory.settings.plugin_settings(ChromaSettings, "chroma")
        self.derived_paths = (self.settings.index_dir,)  # rebuilt from the files: backups skip it
        self.dir = Path(memory.home) / self.settings.directory
        self.trash = self.dir / ".deleted"
        self.index = None
        self._entries: dict[str, Entry] = {}
        self._problems: dict[str, tuple[Fingerprint, str]] = {}
        self._lock = threading.RLock()
        self._dir_mtime = -1
        self._last_scan = 0.0
        self._last_listing: dict[str, Fingerprint] = {}
        self._watch = None
        self._generation = 0
        #: The index process was started and read (:meth:`_start`).
        self._started = False
        self.open_ms: float | None = None

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        embedder = self.memory.embedder
        if embedder is None:
            raise RuntimeError("word-photos need an embedder: add 'embeddings' to the entity's plugins")
        await asyncio.to_thread(self._open, embedder)

    def _open(self, embedder) -> None:
        """The folder and the index's handle; the index process starts at the first use (:meth:`_start`)."""
        started = time.perf_counter()
        from .index import ChromaIndex

        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        clean_stale_tmp(self.dir)
        with self._lock:
            self.index = ChromaIndex(Path(self.memory.home) / self.settings.index_dir, embedder,
                                     self.settings.timeout_s, self.settings.server(self.memory.settings.entity))
            self._started = False
            if self.settings.watch:
                from .watch import watch

                self._watch = watch(self.dir)  # before the first full check: nothing falls in between
        self.open_ms = round((time.perf_counter() - started) * 1000, 1)

    def _start(self) -> None:
        """Start the index process and read what it holds, once, at the first read or write of the word-photos
        (the caller holds ``_lock``). A command that never touches them (a ``store_message``) starts none:
        the process imports chromadb (about 0.7 s of CPU) and opens the index before it answers."""
        if self._started:
            return
        if self.index is None:
            raise Unavailable("word-photo index: the layer is closed")
        try:
            self.index.open()
        except Unavailable:
            raise
        except Exception as exc:  # the next call tries again
            raise Unavailable(f"word-photo index could not start ({type(exc).__name__}: {exc}); "
                              "`pps reindex` rebuilds it from the files") from exc
        self._started = True
        self._entries = {name: Entry.from_meta(m) for name, m in self.index.fingerprints().items()}
        self._generation = self.index.generation
        if self._entries:  # an empty index (new, deleted, another embedder's) is built on the first read
            self.sync()    # or by `pps reindex`, which shows its progress

    async def close(self) -> None:
        with self._lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
            if self.index is not None:
                self.index.close()
                self.index = None

    async def reindex(self, progress, full: bool = False) -> dict[str, Any]:
        """Every file checked by hash and re-embedded if changed; with ``full`` the index is rebuilt."""
        from .reindex import reindex

        return await asyncio.to_thread(reindex, self, progress, full)

    # -- noticing changes -----------------------------------------------------------------------

    def _listing(self) -> dict[str, Fingerprint]:
        out: dict[str, Fingerprint] = {}
        with os.scandir(self.dir) as it:
            for e in it:
                if e.name.startswith(".") or not e.name.endswith(".md"):
                    continue
                try:
                    if e.is_file(follow_symlinks=False) or e.is_symlink():  # a link: listed, refused when read
                        st = e.stat(follow_symlinks=False)
                        out[e.name] = (st.st_mtime_ns, st.st_size, st.st_ino)
                except FileNotFoundError:
                    continue
        return out

    def maybe_sync(self) -> None:
        """Cheap check before reads: the watch's events (or the folder's mtime), then the files named."""
        self._start()
        if self.index.generation != self._generation:  # a fresh index process: re-read what it holds
            self._entries = {name: Entry.from_meta(m) for name, m in self.index.fingerprints().items()}
            self._generation = self.index.generation
            self._last_scan, self._last_listing = 0.0, {}
        now = time.monotonic()
        if self._watch is not None:
            try:
                names = self._watch.changed()
            except OSError:  # the watch broke: from now on, stat every file
                self._watch = None
                names = None
            if names is None or now - self._last_scan >= (self.settings.scan_interval_s or 60.0):
                self.sync()
            elif names:
                try:
                    self.sync(names=names)
                except BaseException:
                    self._last_scan = 0.0  # these names were consumed: check every file next time
                    raise
            return
        if now - self._last_scan >= self.settings.scan_interval_s:
            self.sync()
            return
        try:
            dir_mtime = self.dir.stat().st_mtime_ns
        except FileNotFoundError:
            self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            dir_mtime = -2
        if dir_mtime != self._dir_mtime:
            self.sync()

    def _stat_some(self, names: set[str]) -> dict[str, Fingerprint]:
        out: dict[str, Fingerprint] = {}
        for name in names:
            if name.startswith(".") or not name.endswith(".md") or "/" in name:
                continue
            try:
                st = os.lstat(self.dir / name)
            except (FileNotFoundError, NotADirectoryError):
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):  # a link: listed, refused when read
                out[name] = (st.st_mtime_ns, st.st_size, st.st_ino)
        return out

    def sync(self, rehash: bool = False, names: set[str] | None = None) -> dict[str, list]:
        """Bring the index in line with the files (only ``names``, if given); only files whose stat changed
        are read and hashed (every file with ``rehash``)."""
        with self._lock:
            self._start()
            changes: dict[str, list] = {"added": [], "updated": [], "removed": [], "unreadable": []}
            if names is None:
                if self._watch is None and self.settings.scan_interval_s:
                    self._dir_mtime = self.dir.stat().st_mtime_ns
                listing = self._listing()
                scope: set[str] | None = None
                self._last_scan = time.monotonic()
                if not rehash and listing == self._last_listing:  # the common case, compared in C
                    return changes
            else:
                listing, scope = self._stat_some(names), set(names)
            fresh: list[tuple[Photo, Fingerprint]] = []
            touched = False
            for name, fp in sorted(listing.items()):
                entry = self._entries.get(name)
                if not rehash and ((entry and entry.fp == fp) or self._problems.get(name, (None,))[0] == fp):
                    continue
                try:
                    photo = read_photo(self.dir / name, self.memory.tz)
                except Unreadable as exc:
                    self._problems[name] = (fp, str(exc))
                    changes["unreadable"].append({"filename": name, "reason": str(exc)})
                    if entry:
                        self.index.remove([name])
                        del self._entries[name]
                        touched = True
                    continue
                self._problems.pop(name, None)
                if entry and entry.sha256 == photo.sha256:
                    entry.fp = fp  # touched, not changed
                    touched = True
                    continue
                fresh.append((photo, fp))
                changes["updated" if entry else "added"].append(name)
            known = set(self._entries) if scope is None else scope & set(self._entries)
            gone = sorted(known - set(listing))
            for name in (set(self._problems) if scope is None else scope & set(self._problems)) - set(listing):
                del self._problems[name]
            if gone:
                self.index.remove(gone)
                for name in gone:
                    del self._entries[name]
                changes["removed"] = gone
            self._index(fresh)
            if fresh or gone or touched:
                self._save_state()
            if scope is None:
                self._last_listing = listing
            else:
                for name in scope:
                    if name in listing:
                        self._last_listing[name] = listing[name]
                    else:
                        self._last_listing.pop(name, None)
            return changes

    def _index(self, photos: list[tuple[Photo, Fingerprint]]) -> None:
        self._start()
        items, entries = [], {}
        for photo, fp in photos:
            entry = Entry(fp=fp, sha256=photo.sha256, title=photo.title, date=photo.date, tags=photo.tags,
                          location=photo.location, warning=photo.warning)
            items.append((photo.filename, chunks(photo, self.settings.chunk_chars), entry.meta()))
            entries[photo.filename] = entry
        try:
            self.index.put(items)
        except BaseException:  # e.g. the embedding endpoint is down: these files stay "not indexed"
            for name in entries:
                self._entries.pop(name, None)
            self._last_scan = 0.0  # and the next read checks every file again
            self._last_listing = {}
            raise
        self._entries.update(entries)

    def _save_state(self) -> None:
        self._start()
        self.index.save_state({name: e.meta() for name, e in self._entries.items()})

    # -- writes ---------------------------------------------------------------------------------

    def save(self, content: str, title: str, location: str | None = None,
             tags: list[str] | None = None, when: datetime | None = None) -> tuple[Photo, str | None]:
        """Write the file, then index it; (photo, why it is not indexed yet, or None). ``when``: the date it
        carries (default now)."""
        title = check_title(title)
        text = render(title, content, when or now_utc(), tags or [], location)
        stem = slugify(title)
        with self._lock:
            self._start()  # an index that cannot start refuses the save (503), as a layer that did not open did
            for n in range(1, 10_000):
                path = self.dir / (f"{stem}.md" if n == 1 else f"{stem}-{n}.md")
                if atomic_create(path, text):
                    break
            else:  # pragma: no cover - ten thousand photos with one title
                raise Conflict(f"anchor_save: too many word-photos titled {title!r}", param="title")
            st = path.stat()
            photo = read_photo(path, self.memory.tz)
            try:
                self._index([(photo, (st.st_mtime_ns, st.st_size, st.st_ino))])
            except Exception as exc:  # the file is saved (the truth); the index catches up on a later read
                return photo, f"{type(exc).__name__}: {exc}"
            self._save_state()
            return photo, None

    def delete(self, filename: str, forget: bool = False) -> str | None:
        """Remove a word-photo from the folder (kept under .deleted/) and from the index. ``forget``: gone for good,
        the file and every copy an earlier delete kept of that name (returns None)."""
        name = check_filename(filename)
        with self._lock:
            self._start()
            path = self.dir / name
            if forget:
                stem = path.stem
                copies = [p for p in (self.trash.iterdir() if self.trash.is_dir() else ())
                          if p.name == name or (p.name.startswith(f"{stem}.") and p.suffix == ".md"
                                                and p.name[len(stem) + 1:-3].replace("-", "").isdigit())]
                if not path.is_file() and not copies:
                    raise NotFound(f"anchor_delete: no word-photo named {name!r}, nor a deleted copy of it",
                                   param="filename")
                for p in [path, *copies] if path.is_file() else copies:
                    p.unlink()
                self.index.remove([name])
                self._entries.pop(name, None)
                self._problems.pop(name, None)
                self._save_state()
                self.index.rewrite()  # Chroma's log and free pages still hold it: the index is written afresh
                self._save_state()
                return None
            if not path.is_file():
                known = ", ".join(sorted(self._entries)[:10]) or "none"
                raise NotFound(f"anchor_delete: no word-photo named {name!r} (some that exist: {known})",
                               param="filename")
            self.trash.mkdir(exist_ok=True, mode=0o700)
            target = self.trash / name
            stamp, n = int(time.time()), 1
            while target.exists():  # never replace an earlier deleted copy
                target = self.trash / f"{path.stem}.{stamp}{'' if n == 1 else f'-{n}'}.md"
                n += 1
            os.replace(path, target)
            self.index.remove([name])
            self._entries.pop(name, None)
            self._problems.pop(name, None)
            self._save_state()
            return str(target.relative_to(self.dir))

    # -- reads ----------------------------------------------------------------------------------

    def _result(self, name: str, score: float) -> SearchResult | None:
        try:
            photo = read_photo(self.dir / name, self.memory.tz)
        except Unreadable:
            return None
        entry = self._entries.get(name)
        meta = {"kind": "document", "title": photo.title}
        if photo.tags:
            meta["tags"] = photo.tags
        if photo.location:
            meta["location"] = photo.location
        return SearchResult(layer=self.name, content=photo.body, source=name, score=round(score, 4),
                            timestamp=photo.date or (entry.when if entry else None), metadata=meta)

    def search_sync(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        # The query is embedded while the files are checked: both mostly wait outside the GIL.
        vector = _POOL.submit(self.index.embedder.embed, [query])
        with self._lock:
            self.maybe_sync()
            want = offset + limit
            if limit <= 0 or not self._entries:
                return []
            total = self.index.count()
            n = min(total, want * 3 + 8)
            (qv,) = vector.result()
            while True:
                best: dict[str, float] = {}
                for name, distance in self.index.query(qv, n):
                    best.setdefault(name, 1.0 - distance)
                if len(best) >= want or n >= total:
                    break
                n = min(total, n * 4)
            ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[offset:want]
            return [r for r in (self._result(name, s) for name, s in ranked) if r is not None]

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        return await asyncio.to_thread(self.search_sync, query, limit, offset)

    def newest(self, count: int) -> list[str]:
        with self._lock:
            self.maybe_sync()
            ordered = sorted(self._entries.items(), key=lambda kv: (kv[1].when, kv[1].fp[0], kv[0]))
            return [name for name, _e in ordered[-count:]] if count > 0 else []

    async def startup(self, count: int | None) -> StartupItems:
        """The newest ``count`` word-photos, and how many there are (the index's entries, not read)."""
        items = await self.recent(count if count is not None else 1_000_000)
        with self._lock:
            total = len(self._entries)
        return StartupItems(items=items, total=max(total, len(items)))

    async def recent(self, limit: int) -> list[SearchResult]:
        def run():
            with self._lock:
                return [r for r in (self._result(n, 1.0) for n in self.newest(limit)) if r is not None]

        return await asyncio.to_thread(run)

    def listing(self) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
        with self._lock:
            self.maybe_sync()
            ordered = sorted(self._entries.items(), key=lambda kv: (kv[1].when, kv[1].fp[0], kv[0]), reverse=True)
            photos = [{"filename": n, "title": e.title, "date": e.when, "tags": e.tags, "location": e.location,
                       "bytes": e.fp[1], **({"warning": e.warning} if e.warning else {})} for n, e in ordered]
            return photos, self.problems()

    def problems(self) -> list[dict[str, str]]:
        return [{"filename": n, "reason": r} for n, (_fp, r) in sorted(self._problems.items())]

    async def health(self) -> LayerHealth:
        if self.index is None:
            return LayerHealth(layer=self.name, available=False, detail="index is closed")
        if self.index.fault:  # answered without waiting for the index (it may be the thing that hangs)
            return LayerHealth(layer=self.name, available=False, detail=f"word-photo index: {self.index.fault}")

        def run():
            with self._lock:
                try:
                    self.maybe_sync()
                except Unavailable as exc:  # the index process did not start (or stopped)
                    return LayerHealth(layer=self.name, available=False, detail=str(exc))
                bad = self.problems()
                emb = self.index.embedder
                state = "" if getattr(emb, "loaded", True) else ", loads on first use"
                seen = "inotify" if self._watch is not None else "stat"
                n = len(self._entries)
                detail = (f"{n} word-photo{'' if n == 1 else 's'} in {self.dir}; embedder {emb.name}{state}; "
                          f"edits seen by {seen}")
                if bad:
                    detail += "; skipped: " + ", ".join(f"{p['filename']} ({p['reason']})" for p in bad[:20])
                return LayerHealth(layer=self.name, available=True, detail=detail, latency_ms=self.recent_latency_ms,
                                   counts={"word_photos": len(self._entries), "chunks": self.index.count(),
                                           "unreadable": len(bad)})

        return await asyncio.to_thread(run)


def _mtime(ns: int) -> str:
    return to_storage(datetime.fromtimestamp(ns / 1e9, UTC))
