"""Where recaps live and which log is the newest: ``<home>/_recap.md`` plus a ``_recap.json`` sidecar.

The sidecar names the log the recap was made from (path, size, modification time), so a recap can
be told stale: the newest log changed after it was written (the session crashed before its recap,
or no recap was ever made). The logs considered are the entity's ``[recap] logs`` globs plus every
transcript the Claude Code hooks have captured (``pps_claude_code.sessions``).

The recap is a copy of turns (the forget lineage, :mod:`pps_core.lineage`): when any turn is forgotten,
:func:`forget` removes ``_recap.md`` and its sidecar, and records in ``_recap_forgotten.json`` a digest of every
entry the session logs held then (:func:`pps_recap.logs.entry_digest`: what an entry says, not where it is
written; no text, no path). What a log held before a forget may hold the forgotten turns, so no recap reads
those entries again, wherever they come back (a resumed Claude Code session repeats them in its new transcript;
a log is moved or rotated): :func:`read_plan` says what a recap of a log skips, and :func:`save` refuses a recap
begun before a forget that ended meanwhile. (A log unknown then and unchanged since is not read at all.)

With ``[recap] store = "postgres"`` the recap and its sidecar are one row of the entity's PostgreSQL schema
instead (:mod:`.pgstore`): every server of the entity reads and writes the same one, and :func:`forget` deletes
it. :func:`load`, :func:`save`, :func:`forget` and :func:`is_stale` take the entity's settings to pick the store
(a bare home is the files). How far the logs reached at a forget is shared too (``recap_forget_marks``), so a forget
through one server stops every server from recapping what its logs held then; a save and a forget exclude each
other across servers (an advisory lock).
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pps_claude_code.sessions import captured_sessions
from pydantic import Field
from pydantic_settings import SettingsConfigDict

from pps_core.atomic import plain_problem, read_plain
from pps_core.settings import PluginSettings

RECAP_FILE = "_recap.md"
META_FILE = "_recap.json"
#: What the session logs held when turns were forgotten: a digest per entry (no text, no path).
FORGOTTEN_FILE = "_recap_forgotten.json"
#: Of a log's first bytes, how many a cursor of :func:`_digest_logs` checks (the log was not rewritten in place).
HEAD_BYTES = 4096
LOCK_FILE = ".recap.lock"
#: A recap kept in PostgreSQL, as ``pps backup`` archives it (removed from the home once restored).
PG_BACKUP = "postgres/recap.json"


class RecapSettings(PluginSettings):
    """``[recap]`` of pps.toml (env ``PPS_RECAP_*``)."""

    model_config = SettingsConfigDict(env_prefix="PPS_RECAP_", extra="ignore")

    budget: int = Field(1000, ge=50, le=100_000, description="token budget of a recap (~4 characters a token)")
    logs: list[str] = Field(default_factory=list,
                            description="globs of session logs (JSONL) to recap, e.g. '~/agent/logs/*.jsonl'")
    summarizer: str = Field("auto", pattern="^(auto|llm|extractive)$",
                            description="auto = the [llm] endpoint when configured, else extractive")
    model: str | None = Field(None, description="LLM model for recaps; default: [llm] model")
    novelty: bool = Field(False, description="weigh summaries by novelty against existing memories")
    chunk_tokens: int = Field(350, ge=50, le=10_000)
    merge_threshold: float | None = Field(None, ge=-1, le=1, description="None = 0.55 embeddings, 0.2 lexical")
    startup_regenerate: bool = Field(True, description="at startup, regenerate a missing recap from the newest log")
    store: Literal["files", "postgres"] = Field(
        "files", description="files = _recap.md in the home; postgres = one row of the entity's schema, shared by "
                             "every server (pip install 'pps[postgres]')")
    dsn: str = Field("", description="store = postgres: libpq connection string; default: [postgres] dsn")
    schema_name: str = Field("", alias="schema", max_length=63,
                             description="store = postgres: the schema; default: [postgres] schema, else pps_<entity>")


def recap_settings(settings) -> RecapSettings:
    return settings.plugin_settings(RecapSettings, "recap")


def _where(where: Any) -> tuple[Path, tuple[str, str] | None]:
    """``where`` (a home, or an entity's settings) as its home and, when the recap is kept in PostgreSQL, the
    ``(dsn, schema)`` of its row."""
    if isinstance(where, str | Path):
        return Path(where), None
    rs = recap_settings(where)
    if rs.store != "postgres":
        return Path(where.home), None
    from . import pgstore

    return Path(where.home), pgstore.target(rs, where)


def describe(settings) -> str:
    """Where the recap is kept, for messages and ``pps privacy``."""
    home, pg = _where(settings)
    return f"postgres {pg[1]}.recaps" if pg else f"{home}/{RECAP_FILE} (and {META_FILE})"


def load(where: Any) -> tuple[str, dict] | None:
    """The saved recap text and its sidecar, or None (``where``: the entity's settings, or a home: the files)."""
    home, pg = _where(where)
    if pg is not None:
        from . import pgstore

        return pgstore.load(*pg)
    try:  # never through a link (issue 35 item 9): a planted `_recap.md -> ~/.ssh/id_ed25519` is not shown
        text = read_plain(Path(home) / RECAP_FILE).decode("utf-8").strip()
    except (OSError, ValueError):  # none, a link (NotPlainFile, named in health), not UTF-8
        return None
    meta = load_meta(home) or {}
    return (text, meta) if text else None


def unreadable(home: Path) -> list[str]:
    """The recap's files in ``home`` that are links (or not regular files), each with why: never read."""
    return [f"{name} is {problem}" for name in (RECAP_FILE, META_FILE)
            if (problem := plain_problem(Path(home) / name))]


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    """Saving a recap and forgetting exclude each other (any process): a recap begun before a forget is
    never written after it."""
    fd = os.open(Path(home) / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _forgotten_file(home: Path) -> dict:
    try:
        state = json.loads((Path(home) / FORGOTTEN_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(state, dict):
        return {}
    logs = state.get("logs") if isinstance(state.get("logs"), dict) else {}  # before issue 35: path -> size
    entries = state.get("entries") if isinstance(state.get("entries"), list) else []
    if not logs and not entries and not state.get("at"):
        return {}
    return {"at": float(state.get("at") or 0), "logs": logs, "entries": {e for e in entries if isinstance(e, str)},
            "digested": state.get("digested") if isinstance(state.get("digested"), dict) else {}}


def _merge(*states: dict) -> dict:
    at, logs, entries = 0.0, {}, set()
    for state in states:
        if not state:
            continue
        at = max(at, float(state.get("at") or 0))
        for name, size in state.get("logs", {}).items():
            if isinstance(size, int):
                logs[name] = max(logs.get(name, 0), size)
        entries |= set(state.get("entries") or ())
    return {"at": at, "logs": logs, "entries": entries} if at or logs or entries else {}


def _forgotten(where: Any) -> dict:
    """The forget marks: ``_recap_forgotten.json`` in the home, merged with the shared ones in PostgreSQL when the
    recap is kept there (a forget through any server then reaches every server's recaps)."""
    home, pg = _where(where)
    if pg is None:
        return _forgotten_file(home)
    from . import pgstore

    return _merge(_forgotten_file(home), pgstore.marks(*pg))


def _readable(state: dict, log: Path) -> int:
    if not state:
        return 0
    try:
        st = Path(log).stat()
    except OSError:
        return 0
    reached = state.get("logs", {}).get(str(Path(log).resolve()))
    if isinstance(reached, int):  # marked by a PPS before issue 35 (by path and size)
        return min(reached, st.st_size)
    return st.st_size if st.st_mtime <= float(state.get("at") or 0) else 0


def readable_from(where: Any, log: Path) -> int:
    """The byte offset from which ``log`` may be recapped: a log that has not changed since turns were last
    forgotten is not read at all (it existed then, as far as anyone can tell: the entries it held may not all be
    known); one that changed after is read whole, less the forgotten entries (:func:`read_plan`). ``where``: the
    entity's settings (the shared marks too when the recap is in PostgreSQL), or a home (its file)."""
    return _readable(_forgotten(where), log)


def read_plan(where: Any, log: Path) -> dict[str, Any]:
    """How a recap of ``log`` reads it: ``start`` (:func:`readable_from`), ``skip`` (the digests of every entry
    forgotten) and ``seen`` (the time of the last forget: :func:`save` refuses a recap that began before a later
    one), as :func:`pps_recap.pipeline.generate` takes them."""
    state = _forgotten(where)
    return {"start": _readable(state, log), "skip": frozenset(state.get("entries") or ()),
            "seen": float(state.get("at") or 0)}


def _head(path: str, size: int) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read(min(size, HEAD_BYTES))).hexdigest()[:32]


def _digest_logs(paths: list[str], cursors: dict) -> tuple[set[str], dict]:
    """The :func:`~pps_recap.logs.entry_digest` of every entry of ``paths`` that can give the recap a line, and the
    new cursors: what of each log was digested already (keyed by a digest of its path: ``[inode, offset, digest of
    its head]``), so the next forget reads only what a log gained (one rewritten or replaced is read whole again)."""
    from .logs import entry_digest, is_narrative, iter_entries

    digests: set[str] = set()
    kept: dict[str, list] = {}
    for name in dict.fromkeys(paths):
        try:
            st = os.stat(name)
            key = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:32]
            start = 0
            cursor = cursors.get(key)
            if (isinstance(cursor, list) and len(cursor) == 3 and cursor[0] == st.st_ino
                    and isinstance(cursor[1], int) and cursor[1] <= st.st_size and _head(name, cursor[1]) == cursor[2]):
                start = cursor[1]
            end = start
            for pos, entry in iter_entries(Path(name), start):
                if is_narrative(entry):
                    digests.add(entry_digest(entry))
                end = max(end, pos)
            kept[key] = [st.st_ino, end, _head(name, end)]
        except OSError:
            continue
    return digests, kept


def forget(settings) -> bool:
    """Turns were forgotten: the recap (and its sidecar) goes, and every entry the session logs hold now is
    remembered as forgotten, by its digest (in the home, or for every server in PostgreSQL when the recap is kept
    there). True when a recap was removed. Never keeps content, nor a path."""
    home = Path(settings.home)
    from pps_core.atomic import atomic_write

    _home, pg = _where(settings)
    with _locked(home):
        state = _forgotten_file(home) if pg is None else {}
        known = [str(p) for p in candidate_logs(settings)]
        meta = (load(settings) or ("", {}))[1] if pg is not None else load_meta(home)
        source = (meta or {}).get("source")
        if isinstance(source, str):
            known.append(source)
        digests, cursors = _digest_logs(known, state.get("digested", {}))
        removed = (home / RECAP_FILE).exists()
        for name in (RECAP_FILE, META_FILE):
            (home / name).unlink(missing_ok=True)
        now = time.time()
        if pg is None:
            entries = sorted(set(state.get("entries") or ()) | digests)
            atomic_write(home / FORGOTTEN_FILE, json.dumps({"at": now, "logs": state.get("logs") or {},
                                                            "entries": entries, "digested": cursors}))
            return removed
        from . import pgstore

        return bool(pgstore.forget(*pg, now, {}, sorted(digests))) or removed


def load_meta(home: Path) -> dict | None:
    try:
        meta = json.loads(read_plain(Path(home) / META_FILE))
    except (OSError, ValueError):  # none, a link (never read), not JSON
        return None
    return meta if isinstance(meta, dict) else None


def save(where: Any, text: str, source: Path | None, stats: dict, start: int = 0,
         seen: float | None = None) -> Path | str | None:
    """Write the recap of ``source`` read from byte ``start`` knowing the forgets up to ``seen`` (:func:`read_plan`);
    where it went (the file, or ``postgres <schema>.recaps``), or None (nothing written) when turns were forgotten
    since the recap began (a later forget, or ``start`` no longer where the log may be read from)."""
    from pps_core.atomic import atomic_write

    home, pg = _where(where)
    with _locked(home):
        if pg is None and source is not None and readable_from(home, source) > start:
            return None
        if pg is None and seen is not None and float(_forgotten_file(home).get("at") or 0) > seen:
            return None
        meta: dict = {"generated": time.time(), "stats": stats}
        if source is not None:
            st = Path(source).stat()
            meta.update(source=str(Path(source).resolve()), source_size=st.st_size, source_mtime=st.st_mtime,
                        source_start=start)
        if pg is not None:  # checked against the shared marks under the lock a forget takes, on any server
            from . import pgstore

            local = _forgotten_file(home)

            def stale(shared: dict) -> bool:
                marks = _merge(local, shared)
                if seen is not None and float(marks.get("at") or 0) > seen:
                    return True
                return source is not None and _readable(marks, source) > start

            return f"postgres {pg[1]}.recaps" if pgstore.save_unless(*pg, text, meta, stale) else None
        atomic_write(Path(home) / META_FILE, json.dumps(meta, indent=2, default=str))
        atomic_write(Path(home) / RECAP_FILE, text + "\n")
    return Path(home) / RECAP_FILE


def keep(settings, text: str, meta: dict) -> None:
    """Put back a recap row as it was (``pps restore``)."""
    _home, pg = _where(settings)
    if pg is not None:
        from . import pgstore

        pgstore.save(*pg, text, meta)


def forget_record(settings) -> dict | None:
    """The record of forgets a recap kept in PostgreSQL holds (``pps backup``); None for the files (copied)."""
    _home, pg = _where(settings)
    if pg is None:
        return None
    from . import pgstore

    return pgstore.forget_record(*pg)


def keep_forget_record(settings, record: dict) -> None:
    """Put back a record of forgets (``pps restore``)."""
    _home, pg = _where(settings)
    if pg is not None:
        from . import pgstore

        pgstore.keep_forget_record(*pg, record)


def candidate_logs(settings, exclude_session: str | None = None) -> list[Path]:
    """Session logs of the entity, oldest first by modification time (the newest is last)."""
    found: dict[str, Path] = {}
    for pattern in recap_settings(settings).logs:
        for name in glob.glob(os.path.expanduser(pattern), recursive=True):
            if os.path.isfile(name):
                found[str(Path(name).resolve())] = Path(name).resolve()
    for session in captured_sessions(settings.home):  # what the Claude Code hooks captured (their public contract)
        if exclude_session and session.session_id == exclude_session:
            continue
        found[str(session.transcript.resolve())] = session.transcript.resolve()
    if exclude_session:
        found = {k: p for k, p in found.items() if p.stem != exclude_session}
    return sorted(found.values(), key=lambda p: (p.stat().st_mtime, str(p)))


def newest_log(settings, exclude_session: str | None = None) -> Path | None:
    logs = candidate_logs(settings, exclude_session)
    return logs[-1] if logs else None


def is_stale(where: Any, log: Path | None) -> bool:
    """True when there is no recap, its own log changed since, or ``log`` was written after it."""
    saved = load(where)
    if saved is None:
        return log is not None
    if log is None:
        return False
    meta = saved[1]
    try:
        st = log.stat()
    except OSError:
        return False
    if meta.get("source") == str(log.resolve()):  # the same log grew since (a resumed session)
        return meta.get("source_size") != st.st_size or (meta.get("source_mtime") or 0) < st.st_mtime
    return st.st_mtime > (meta.get("generated") or 0)  # a later session left no recap (it crashed)
