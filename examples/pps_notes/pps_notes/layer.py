"""The notes layer: short notes in one JSON file under the entity's home, searchable and in the startup package."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from pps_core import (
    Layer,
    LayerHealth,
    PluginSettings,
    Pointer,
    SearchResult,
    SectionConfig,
    StorageError,
    atomic_write,
    lexical_scores,
    now_utc,
    to_storage,
)


class NotesSettings(PluginSettings, env_prefix="PPS_NOTES_"):
    """The ``[notes]`` table of pps.toml (or ``PPS_NOTES_*`` variables)."""

    file: str = "notes.json"
    startup_count: int = 5


class NotesLayer(Layer):
    name = "notes"
    title = "Notes"

    def __init__(self, home: Path, settings: NotesSettings) -> None:
        super().__init__()
        self.path = home / settings.file
        self.startup_count = settings.startup_count
        self._notes: list[dict[str, Any]] = []
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        if self.path.exists():
            try:
                self._notes = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise StorageError(f"cannot read {self.path}: {exc}") from exc

    # -- what the operations call -------------------------------------------------------------------

    async def add(self, text: str) -> dict[str, Any]:
        async with self._lock:  # one writer at a time; the file is replaced atomically
            note = {"id": len(self._notes) + 1, "text": text, "created_at": to_storage(now_utc())}
            notes = [*self._notes, note]
            await asyncio.to_thread(atomic_write, self.path, json.dumps(notes, ensure_ascii=False))
            self._notes = notes
        return note

    def newest(self, offset: int, limit: int) -> list[dict[str, Any]]:
        """Notes newest first, one page."""
        return list(reversed(self._notes))[offset:offset + limit]

    def count(self) -> int:
        return len(self._notes)

    # -- the Layer contract -------------------------------------------------------------------------

    def _result(self, note: dict[str, Any], score: float = 0.0) -> SearchResult:
        return SearchResult(layer=self.name, content=note["text"], source=f"note {note['id']}", score=score,
                            timestamp=note["created_at"], metadata={"id": note["id"]})

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        scores = lexical_scores(query, {str(n["id"]): n["text"] for n in self._notes})
        ranked = sorted(((s, i) for i, s in enumerate(scores) if s > 0), key=lambda t: (-t[0], t[1]))
        return [self._result(self._notes[i], s) for s, i in ranked[offset:offset + limit]]

    async def recent(self, limit: int) -> list[SearchResult]:
        return [self._result(n) for n in self._notes[-limit:]] if limit > 0 else []

    def default_sections(self) -> list[SectionConfig]:
        # Newest first, so a budget that cuts the section keeps the newest notes.
        return [SectionConfig(name="Notes", layer=self.name, count=self.startup_count, order="newest_first",
                              position=60)]

    def left_out_call(self, section: SectionConfig, shown: int, total: int) -> Pointer | None:
        # The section held the `total` newest notes and showed `shown` of them: newest first, the left-out
        # ones follow the shown ones; oldest first (a [startup] override), they are the newest.
        missing = total - shown
        if missing <= 0:
            return None
        offset = shown if section.order == "newest_first" else 0
        return Pointer(operation="notes_list", params={"offset": offset, "limit": missing})

    async def health(self) -> LayerHealth:
        return LayerHealth(layer=self.name, available=True, counts={"notes": len(self._notes)})
