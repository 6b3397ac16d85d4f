"""The ``session_recap`` operation and the ``session_recap`` startup layer (plugin name ``recap``)."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pps_core.errors import InvalidParams, NotFound
from pps_core.layer import Layer
from pps_core.models import LayerHealth, SearchResult, SectionConfig, StartupItems
from pps_core.params import HostPath

from . import store

if TYPE_CHECKING:  # pragma: no cover
    from pps_core.memory import Memory

#: Layers whose items count as "existing memories" for novelty: not the raw turns of the session itself.
NOVELTY_SKIP = {"raw_capture", "session_recap"}


class SessionRecapParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    log: HostPath | None = Field(None, max_length=4096,
                            description="session log (JSONL: mindloop-style or a Claude Code transcript); "
                                        "default: the newest log of the entity")
    budget: int | None = Field(None, ge=50, le=100_000, description="token budget; default [recap] budget (1000)")
    model: str | None = Field(None, max_length=200, description="LLM model; default [recap] model, then [llm] model")
    summarizer: Literal["auto", "llm", "extractive"] | None = Field(
        None, description="auto = the configured LLM when there is one, else extractive")
    novelty: bool | None = Field(None, description="weigh by novelty against existing memories")
    write: bool = Field(True, description="save as the entity's _recap.md (shown at startup)")
    exclude_session: str | None = Field(None, max_length=200,
                                        description="when picking the newest log, skip this session (the current one)")
    fast: bool = Field(False, description="extractive summaries and lexical merge only (no model): for startup paths")
    if_stale: bool = Field(False, description="only when the log changed since the saved recap was made (or there is "
                                              "none): a host's startup asks this way; otherwise answers skipped")


def resolve_log(memory: Memory, p: SessionRecapParams, *, trusted: bool = False) -> Path:
    """The log to recap. Through the operation (any caller holding the entity's token) only this
    entity's own logs are readable; ``trusted`` (the local CLI, run by the file's owner) reads any."""
    if p.log:
        # Whether the path is this entity's is decided before anything about the file is said, so a caller
        # cannot learn whether a path elsewhere exists (one refusal for a file, a folder or nothing).
        try:
            path = Path(p.log).expanduser().resolve()
            found = path.is_file()
        except (OSError, RuntimeError):  # a name too long for the file system; ~user with no such user
            path, found = None, False
        if not trusted and (path is None or not _entity_log(memory, path)):
            raise InvalidParams("log: not one of this entity's session logs (allowed: files matching [recap] logs, "
                                "transcripts its Claude Code hooks saw, files under its home); add its folder to "
                                "[recap] logs in pps.toml, or recap it with `pps recap LOG` (the CLI reads any file you can read)", param="log")
        if path is None or not found:
            raise InvalidParams(f"log: no such file {p.log!r}", param="log")
        if path.suffix.lower() not in (".jsonl", ".json", ".log", ".ndjson"):
            raise InvalidParams("log: expected a JSONL session log (.jsonl)", param="log")
        return path
    newest = store.newest_log(memory.settings, p.exclude_session)
    if newest is None:
        raise NotFound("no session log found: pass log, set [recap] logs in pps.toml, or install the Claude "
                       "Code hooks (`pps hooks install`)", param="log")
    return newest


def _novelty_fn(memory: Memory, loop: asyncio.AbstractEventLoop):
    from .chunks import cosine, lexical_vectors

    names = [n for n in memory.layers if n not in NOVELTY_SKIP]

    async def nearest(text: str) -> list[str]:
        found = await asyncio.gather(*(memory.search_layer(n, text[:2000], 3) for n in names),
                                     return_exceptions=True)
        return [r.content for batch in found if isinstance(batch, list) for r in batch]

    def novelty(summaries: list[str]) -> list[float]:
        out = []
        for s in summaries:
            neighbours = asyncio.run_coroutine_threadsafe(nearest(s), loop).result(60)
            if not neighbours:
                out.append(1.0)
                continue
            if memory.embedder is not None:
                vecs = memory.embedder.embed([s] + neighbours)
            else:
                vecs = lexical_vectors([s] + neighbours)
            out.append(1.0 - max(cosine(vecs[0], v) for v in vecs[1:]))
        return out

    return novelty


def run_recap(memory: Memory, path: Path, *, budget: int, kind: str, model: str | None, novelty: bool,
              loop: asyncio.AbstractEventLoop | None = None, progress=None, embed: bool = True):
    """Blocking: the recap of ``path`` with the entity's embedder and summarizer, of what the log holds but the
    entries forgotten (:func:`store.read_plan`)."""
    from .pipeline import generate
    from .summarize import make_summarizer, user_name_of

    rs = store.recap_settings(memory.settings)
    summarizer = make_summarizer(memory.chat_model(model or rs.model) if kind != "extractive" else None, kind,
                                 user_name_of(memory.settings))
    novelty_fn = _novelty_fn(memory, loop) if novelty and loop is not None else None
    embedder = memory.embedder if embed else None
    return generate(path, budget=budget, summarizer=summarizer, embedder=embedder, novelty=novelty_fn,
                    tz=memory.tz, chunk_tokens=rs.chunk_tokens, merge_threshold=rs.merge_threshold,
                    progress=progress, **store.read_plan(memory.settings, path))


async def session_recap(memory: Memory, p: SessionRecapParams) -> dict[str, Any]:
    rs = store.recap_settings(memory.settings)
    budget = p.budget or rs.budget
    if p.if_stale:
        if not p.log and store.newest_log(memory.settings, p.exclude_session) is None:
            return _skipped(None, budget, "no session log")
        path = resolve_log(memory, p)
        if not await asyncio.to_thread(store.is_stale, memory.settings, path):
            return _skipped(path, budget, "the saved recap is newer than the log")
    else:
        path = resolve_log(memory, p)
    novelty = rs.novelty if p.novelty is None else p.novelty
    loop = asyncio.get_running_loop()
    kind = "extractive" if p.fast else p.summarizer or rs.summarizer
    recap = await asyncio.to_thread(run_recap, memory, path, budget=budget, kind=kind, model=p.model,
                                    novelty=novelty and not p.fast, loop=loop, embed=not p.fast)
    written = None
    if p.write and recap.text:
        saved = await asyncio.to_thread(store.save, memory.settings, recap.text, path, recap.stats, recap.start,
                                        recap.seen)
        written = str(saved) if saved else None
    return {
        "text": recap.text, "source": str(path), "tokens": recap.tokens, "budget": budget, "written": written,
        "summarizer": recap.stats.get("summarizer"), "stats": recap.stats,
        "items": [{"start": i.start.isoformat() if i.start else None, "end": i.end.isoformat() if i.end else None,
                   "summary": i.summary, "score": i.score} for i in recap.items],
    }


def _skipped(path: Path | None, budget: int, why: str) -> dict[str, Any]:
    return {"text": "", "source": str(path) if path else None, "tokens": 0, "budget": budget, "written": None,
            "summarizer": None, "stats": {}, "items": [], "skipped": why}


class RecapLayer(Layer):
    """The last session's recap as a startup section; regenerated from the newest log when missing."""

    name = "session_recap"
    title = "Last session"
    exclusive = False  # _recap.md is replaced atomically (the row in PostgreSQL too): any process may write it

    def default_sections(self) -> list[SectionConfig]:
        """The last session's recap comes first in the startup package (``[startup] omit = ["Last session"]``
        leaves it out; so does ``[startup] recap = false``, the older spelling)."""
        if (self.memory.settings.startup.model_extra or {}).get("recap") is False:
            return []
        return [SectionConfig(name="Last session", layer=self.name, count=1, position=0)]

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.memory = memory
        #: A recap in the home is one file: read at a glance beside the owner (one in PostgreSQL waits for it).
        self.glance = store.recap_settings(memory.settings).store != "postgres"
        self._glancing = False

    async def open_glance(self) -> None:
        """Read-only: the saved recap is read, none is made (making one writes)."""
        self._glancing = True

    async def search(self, query: str, limit: int, offset: int = 0) -> list[SearchResult]:
        return []  # a recap is procedural state for the next instance, not searchable memory (reference/004)

    def _load_or_make(self, make: bool = True) -> tuple[str, dict] | None:
        settings = self.memory.settings
        saved = store.load(settings)
        if saved is not None or not make or self._glancing or not store.recap_settings(settings).startup_regenerate:
            return saved
        newest = store.newest_log(self.memory.settings)
        if newest is None:
            return None
        rs = store.recap_settings(self.memory.settings)
        recap = run_recap(self.memory, newest, budget=rs.budget, kind="extractive", model=None, novelty=False,
                          embed=False)  # inside the startup call's per-layer timeout: no model
        if not recap.text:
            return None
        if store.save(settings, recap.text, newest, recap.stats, recap.start, recap.seen) is None:
            return None  # turns were forgotten meanwhile
        return store.load(settings)

    async def startup(self, count: int | None) -> StartupItems:
        found = await asyncio.to_thread(self._load_or_make, False)
        if found is None and not self._glancing:
            # servers of a fleet starting at once: one makes the recap, the others show it from their next startup
            async with self.memory.claim("recap") as mine:
                if mine:
                    found = await asyncio.to_thread(self._load_or_make)
        if found is None or count == 0:
            return StartupItems(items=[], total=0)
        text, meta = found
        when = datetime.fromtimestamp(meta["generated"], UTC).isoformat() if meta.get("generated") else None
        return StartupItems(items=[SearchResult(layer=self.name, content=text, source=store.RECAP_FILE,
                                                timestamp=when, metadata={"log": meta.get("source")})], total=1)

    async def snapshot(self, dest: Path) -> list[str] | None:
        """``pps backup`` of a recap kept in PostgreSQL: its row and the record of forgets (``recap_forget_marks``,
        ``recap_forgotten_entries``) as a file of the archive (files are copied as they are)."""
        if store.recap_settings(self.memory.settings).store != "postgres":
            return None
        saved = await asyncio.to_thread(store.load, self.memory.settings)
        forgets = await asyncio.to_thread(store.forget_record, self.memory.settings)
        path = Path(dest) / store.PG_BACKUP
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # the recap, and the record of forgets (what the logs held when turns were forgotten: never recapped again)
        path.write_text(json.dumps(dict({"text": saved[0], "meta": saved[1]} if saved else {}, forgotten=forgets)),
                        encoding="utf-8")
        os.chmod(path, 0o600)
        return [store.PG_BACKUP]

    async def check_restore(self, manifest: dict[str, Any]) -> None:
        """A restore told ``PPS_POSTGRES_DSN``/``_SCHEMA`` puts the recap there too, or refuses."""
        rs = store.recap_settings(self.memory.settings)
        if rs.store == "postgres":
            self.memory.settings.follows("recap", {"dsn": rs.dsn or "", "schema": rs.schema_name or ""}, "postgres")

    async def after_restore(self, manifest: dict[str, Any]) -> None:
        """``pps restore``: the archive's recap row is saved (unless one is there), and its file removed."""
        path = Path(self.memory.home) / store.PG_BACKUP
        if not path.is_file():
            return
        saved = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(saved, dict) and store.recap_settings(self.memory.settings).store == "postgres":
            if isinstance(saved.get("forgotten"), dict):
                await asyncio.to_thread(store.keep_forget_record, self.memory.settings, saved["forgotten"])
            if saved.get("text") and await asyncio.to_thread(store.load, self.memory.settings) is None:
                await asyncio.to_thread(store.keep, self.memory.settings, saved["text"], saved["meta"])
        path.unlink()
        if not any(path.parent.iterdir()):
            path.parent.rmdir()

    async def ready(self) -> str | None:
        """``/ready``: a recap kept in PostgreSQL needs its database to answer now; one in the home is always ready."""
        rs = store.recap_settings(self.memory.settings)
        if rs.store != "postgres":
            return None
        from . import pgstore

        try:
            await asyncio.to_thread(pgstore.ping, *pgstore.target(rs, self.memory.settings))
        except Exception as exc:  # noqa: BLE001 - readiness reports, never raises
            from pps_core.errors import Unavailable

            if isinstance(exc, Unavailable):
                return "the recap's PostgreSQL is unreachable; try again shortly"
            return type(exc).__name__
        return None

    async def health(self) -> LayerHealth:
        settings = self.memory.settings
        try:
            saved = await asyncio.to_thread(store.load, settings)
        except Exception as exc:  # noqa: BLE001 - a health check reports, never raises
            return LayerHealth(layer=self.name, available=False, detail=f"{type(exc).__name__}: {exc}")
        counts, detail = {"recap": int(saved is not None)}, store.describe(settings)
        refused = store.unreadable(Path(settings.home)) if store.recap_settings(settings).store == "files" else []
        if refused:  # a link planted as the recap: never read (issue 35 item 9)
            counts["unreadable"] = len(refused)
            detail += "; not read: " + "; ".join(refused)
        return LayerHealth(layer=self.name, available=True, detail=detail, counts=counts)

def _entity_log(memory: Memory, path: Path) -> bool:
    home = Path(memory.home).resolve()
    if path == home or home in path.parents:
        return True
    return path in set(store.candidate_logs(memory.settings))
