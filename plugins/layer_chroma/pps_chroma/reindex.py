"""``reindex`` for the word-photos: the Chroma index rebuilt from the files, the source of truth.

Without ``full`` every file is read and hashed and only what changed is embedded again (a thorough
``anchor_resync``); with ``full`` the index is deleted and every file embedded again (another embedder,
a damaged or deleted index). Work goes in batches of files so ``progress`` can follow it.
"""

from __future__ import annotations

import shutil
from typing import Any

BATCH = 16


def reindex(layer, progress, full: bool) -> dict[str, Any]:
    from .index import ChromaIndex

    with layer._lock:
        if full:
            path, embedder, timeout = layer.index.path, layer.index.embedder, layer.index.timeout_s
            layer.index.close()
            layer.index = None
            shutil.rmtree(path, ignore_errors=True)
            layer.index = ChromaIndex(path, embedder, timeout)
            layer.index.open()
            layer._generation = layer.index.generation
            layer._entries, layer._problems, layer._last_listing = {}, {}, {}
            layer._started = True  # if the layer had not started its index yet, this one is it
        listing = sorted(layer._listing())
        gone = sorted(set(layer._entries) - set(listing))
        total = len(listing) + (1 if gone else 0)
        progress(0, total)
        report: dict[str, Any] = {"files": len(listing), "added": [], "updated": [], "removed": [], "unreadable": []}
        for start in range(0, len(listing), BATCH):
            part = listing[start:start + BATCH]
            changes = layer.sync(rehash=True, names=set(part))
            for key in report:
                if key != "files":
                    report[key] += changes[key]
            progress(start + len(part), total)
        if gone:
            report["removed"] += layer.sync(names=set(gone))["removed"]
            progress(total, total)
        layer._save_state()
        report["chunks"] = layer.index.count()
        report["indexed"] = len(layer._entries)
        return {k: (len(v) if isinstance(v, list) and k != "unreadable" else v) for k, v in report.items()}
