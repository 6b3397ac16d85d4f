"""The ChromaDB index of the word-photos: derived data, rebuilt from the files whenever in doubt.

Chroma runs embedded (PersistentClient, telemetry off) in a process of its own (``pps_chroma.worker``):
a native call that hangs (a full disk) can then only time out, never freeze the server. Every call
waits at most ``timeout_s``; past that, or when a write fails, the index process is killed and the
next call starts a fresh one on the same folder (``generation`` counts them, so the layer re-reads
what is indexed). Vectors come from the entity's embedder, here in the server.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

from pps_core.errors import Unavailable
from pps_core.safepath import safe_children

from .worker import serve

#: Index processes are forked from a server that has imported chromadb once (about 1.5 s), so opening
#: an entity, or restarting a hung index, costs a fork instead.
_CTX = multiprocessing.get_context("forkserver")
_CTX.set_forkserver_preload(["pps_chroma.worker", "chromadb"])

STATE_FILE = "pps_word_photos.json"
#: Beside the index: a rewrite is owed (a word-photo was forgotten); the old index moved aside meanwhile.
PENDING = ".rewrite-pending"
OLD = ".old"
#: Opening a large index, or the first import of chromadb on a busy machine, takes longer than a query.
OPEN_TIMEOUT_S = 120.0
WRITES = {"add", "remove"}


class IndexUnavailable(Unavailable):
    """The index process hung or stopped: this call is abandoned (503); the next one starts a fresh process."""


class ChromaIndex:
    """Chunks of word-photos in one collection, kept by the index process; every chunk carries its file's
    name and fingerprint."""

    def __init__(self, path: Path, embedder: Any, timeout_s: float = 30.0, server: dict | None = None) -> None:
        self.path = Path(path)
        self.embedder = embedder
        #: A ``chroma run`` server ({host, port, ssl, token, collection}); None: embedded under ``path``.
        self.server = server
        self.timeout_s = timeout_s
        self.rebuilt = False
        self.generation = 0
        #: Why the last call failed, until one succeeds (the health line).
        self.fault: str | None = None
        self._count: int | None = None
        self._proc = None
        self._conn = None
        self._lock = threading.Lock()

    # -- the index process --------------------------------------------------------------------------

    def open(self) -> None:
        with self._lock:
            if self.server is None:  # what a rewrite cut short left: the old index may hold forgotten text
                shutil.rmtree(self._sibling(OLD), ignore_errors=True)
            self._start()
            if self.server is None and self._sibling(PENDING).exists():
                self._rewrite()

    def _sibling(self, suffix: str) -> Path:
        return self.path.with_name(self.path.name + suffix)

    def rewrite(self) -> None:
        """Write the index afresh: what was removed leaves the disk.

        Chroma keeps a removed document (its text, metadata and embedding) in its write-ahead log (the
        ``embeddings_queue`` table of ``chroma.sqlite3``) until it purges it, and in the SQLite file's free
        pages after. So forgetting a word-photo dumps every chunk that stays (no re-embedding), moves the old
        index aside, writes the chunks into a new one in the same place, then deletes the old one. A mark
        beside the index (written first, removed last) has the next open do it again after a crash; a crash
        half-way leaves a partial index, which the layer completes from the files (the index is derived
        data). A Chroma server (``mode = "http"``) keeps its own log: not reachable from here."""
        if self.server is not None:
            return
        with self._lock:
            mark = self._sibling(PENDING)
            mark.touch(mode=0o600)
            if self._conn is None:
                self._start()
            self._rewrite()

    def _rewrite(self) -> None:
        ids, docs, metas, vectors = self._exchange("dump", (), max(self.timeout_s, OPEN_TIMEOUT_S))
        try:
            self._exchange("close", (), 10.0)
        finally:
            self._stop()
        old = self._sibling(OLD)
        shutil.rmtree(old, ignore_errors=True)
        if self.path.exists():
            os.replace(self.path, old)
        self._start()
        step = 512
        for start in range(0, len(ids), step):
            end = start + step
            self._exchange("add", (ids[start:end], docs[start:end], metas[start:end], vectors[start:end]),
                           max(self.timeout_s, OPEN_TIMEOUT_S))
        self._count = None
        state = old / STATE_FILE
        if state.exists() and not (self.path / STATE_FILE).exists():
            os.replace(state, self.path / STATE_FILE)
        shutil.rmtree(old, ignore_errors=True)
        self._sibling(PENDING).unlink(missing_ok=True)

    def _start(self) -> None:
        ours, theirs = _CTX.Pipe(duplex=True)
        self._proc = _CTX.Process(target=serve, args=(theirs,), daemon=True,
                                  name=f"pps-chroma-{self.path.parent.name}")
        # multiprocessing re-runs the caller's __main__ in the child (a script without a main guard would
        # start all over there); the index process needs none of it, so it is not told about it.
        main = sys.modules["__main__"]
        sys.modules["__main__"] = types.ModuleType("__main__")
        try:
            with safe_children():  # the fork server and resource tracker start here: never in the user's folder
                self._proc.start()
        finally:
            sys.modules["__main__"] = main
        theirs.close()
        self._conn = ours
        self.generation += 1
        self._count = None
        self.rebuilt = self._exchange("open", (str(self.path), self.embedder.name, self.embedder.dimension,
                                               self.server),
                                      max(self.timeout_s, OPEN_TIMEOUT_S))

    def _stop(self) -> None:
        proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(timeout=10)
            proc.close()
        if conn is not None:
            conn.close()

    def _exchange(self, method: str, args: tuple, timeout: float) -> Any:
        started = time.monotonic()
        try:
            self._conn.send((method, args))
            answered = self._conn.poll(timeout)
            reply = self._conn.recv() if answered else None
        except (EOFError, OSError) as exc:
            self._stop()
            self.fault = f"the index process stopped during {method} ({type(exc).__name__}); it restarts on the next call"
            raise IndexUnavailable(f"word-photo index: {self.fault}") from None
        if reply is None:
            self._stop()
            self.fault = (f"the index did not answer {method} within {time.monotonic() - started:.0f} s (a full "
                          f"disk can hang Chroma); its process was stopped and restarts on the next call")
            raise IndexUnavailable(f"word-photo index: {self.fault}")
        ok, value = reply
        if not ok:
            if method in WRITES or method == "open":  # its state may no longer match the disk: start afresh
                self._stop()
                self.fault = f"{method} failed: {value}"
            raise value
        self.fault = None
        return value

    def _call(self, method: str, *args: Any) -> Any:
        with self._lock:
            if self._conn is None:
                self._start()
            return self._exchange(method, args, self.timeout_s)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None and self._proc is not None and self._proc.is_alive():
                try:
                    self._exchange("close", (), 10.0)
                except Exception:  # closing goes on: the process is stopped below
                    pass
            self._stop()

    # -- the index ----------------------------------------------------------------------------------

    def count(self) -> int:
        if self._count is None:
            self._count = self._call("count")
        return self._count

    def fingerprints(self) -> dict[str, dict[str, Any]]:
        """Per file: sha256, stat fingerprint, title, date... From the state file when it names exactly the
        files the collection holds (reading Chroma's metadata is ~10x slower on a cold open), else from
        the metadata of each file's first chunk."""
        state = self._read_state()
        if state is not None and set(state) == self._call("files"):
            return state
        return {meta["file"]: dict(meta) for meta in self._call("first_chunks")}

    def save_state(self, files: dict[str, dict[str, Any]]) -> None:
        """Write the per-file state beside the index, after the index itself changed."""
        from pps_core.atomic import atomic_write

        atomic_write(self.path / STATE_FILE, json.dumps(
            {"version": 1, "embedder": self.embedder.name, "files": files}, ensure_ascii=False))

    def _read_state(self) -> dict[str, dict[str, Any]] | None:
        try:
            data = json.loads((self.path / STATE_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("version") != 1 or data.get("embedder") != self.embedder.name:
            return None
        files = data.get("files")
        return files if isinstance(files, dict) else None

    def put(self, items: list[tuple[str, list[str], dict[str, Any]]]) -> int:
        """Replace the chunks of each (filename, texts, file metadata); returns chunks written."""
        if not items:
            return 0
        self.remove([name for name, _t, _m in items])
        ids, docs, metas = [], [], []
        for name, texts, meta in items:
            for i, text in enumerate(texts):
                ids.append(f"{name}#{i}")
                docs.append(text)
                metas.append({**meta, "file": name, "chunk": i})
        import numpy as np

        vectors = [np.asarray(v, dtype=np.float32) for v in self.embedder.embed(docs)] if docs else []
        self._count = None
        return self._call("add", ids, docs, metas, vectors)

    def remove(self, names: list[str]) -> None:
        self._count = None
        if names:
            self._call("remove", list(names))

    def query(self, vector: list[float], n: int) -> list[tuple[str, float]]:
        """(filename, cosine distance) of the ``n`` nearest chunks to an embedded query."""
        total = self.count()
        if total == 0 or n <= 0:
            return []
        return self._call("query", vector, min(n, total))

