"""The turn store: everything the turn domain needs from a database, and nothing else.

:class:`TurnStore` is the whole contract between the turn domain (the ``raw_capture`` and ``message_summaries``
layers, their operations, the fused search in :mod:`pps_turns.retriever`) and a backend. ``pps_sqlite`` and
``pps_postgres`` implement it; ``examples/pps_memstore`` does it in memory in a few dozen lines. A store knows
rows, transactions and indexes; it knows no operation, no layer, no embedder and no ranking: the domain
computes vectors and fuses candidates, the store keeps and returns them.

Data shapes (plain dicts; timestamps are canonical UTC strings, :func:`pps_core.timeutil.to_storage`):

- a **turn**: ``id`` (int, ascending in arrival order), ``message_id`` (str | None), ``content``,
  ``author_name``, ``channel``, ``session_id`` (str | None), ``created_at``, ``metadata`` (dict),
  ``summary_id`` (int | None);
- a **summary**: ``id``, ``summary_text``, ``start_id``, ``end_id``, ``message_count``, ``channels`` (list),
  ``time_span_start``, ``time_span_end``, ``summary_type``, ``created_at``, ``rewrite`` (None, ``"backfill"``
  or ``"forgotten"``);
- a **vector**: float32 values as bytes (``numpy.asarray(v, dtype=numpy.float32).tobytes()``), unit length,
  stored under a model key (the embedder's name and a recipe); a store keeps one vector per turn or summary.

Every method is atomic on its own: it commits all of its writes or none. Errors the caller should see are
:mod:`pps_core.errors` (``NotFound``, ``Conflict``, ``InvalidParams`` naming the parameter, ``Unavailable``).
``tests/`` of pps-turns hold the parametrized suite every store must pass (``pps_turns.testing``).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

Turn = dict[str, Any]
SummaryRow = dict[str, Any]


def context_plan(unsummarized: int, wanted: int, per_summary: int) -> tuple[int | None, int]:
    """get_conversation_context: (how many newest unsummarized turns, None = all; how many newest summaries)."""
    if wanted == 0:
        return 0, 0
    if unsummarized >= wanted:
        return wanted, 0
    return None, math.ceil((wanted - unsummarized) / per_summary)


def message_id_digest(message_id: str) -> str:
    """What a tombstone keeps of a forgotten turn's ``message_id``: its SHA-256, never the id (an importer's
    derived id may carry text)."""
    return hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()


def turn_digest(turn: Turn) -> str:
    """What a turn is, whatever id it was captured or imported with: the SHA-256 of its channel, author, time and
    content as stored (what ``pps export`` writes and ``pps import`` reads back). A turn stored without a
    ``message_id`` comes back from an export with a derived one (``pps:<entity>:<id>``), from ``pps import jsonl``
    with another (``jsonl:<hash>``): this digest knows it is the same turn. Kept as a tombstone when the turn is
    forgotten, and matched against the turns stored (the same turn is not stored twice)."""
    key = "\x00".join(("pps-turn/1", turn["channel"], turn["author_name"], turn["created_at"], turn["content"]))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def tombstones(turn: Turn) -> list[str]:
    """Every digest a forgotten turn leaves: its :func:`turn_digest`, and its ``message_id``'s when it has one."""
    out = [turn_digest(turn)]
    if turn.get("message_id") is not None:
        out.append(message_id_digest(turn["message_id"]))
    return out


def forgotten_ack(turn: Turn) -> dict[str, Any]:
    """The ack for a turn whose ``message_id`` was forgotten: nothing is stored, and the ack says why."""
    return {"id": None, "message_id": turn["message_id"], "created_at": turn["created_at"],
            "channel": turn["channel"], "forgotten": True}


@runtime_checkable
class TurnStore(Protocol):
    """A database of turns, summaries, read cursors and their vectors."""

    #: Where the data lives, for health (``"/home/x/pps.db"``, ``"postgresql host:5432/db schema s"``).
    detail: str
    #: Whether the store belongs to one process at a time (an embedded file). A store on a server that any
    #: number of PPS processes may share sets False, and the layers are built non-exclusive
    #: (:attr:`pps_core.Layer.exclusive`: no owner lock when no layer of the entity is exclusive).
    exclusive: bool
    #: Home-relative paths the store derives from its own data (an index file): backups skip them and
    #: ``pps reindex`` rebuilds them (:attr:`pps_core.Layer.derived_paths` of ``raw_capture``).
    derived_paths: tuple[str, ...]

    async def open(self) -> None:
        """Connect, create or migrate the schema. Raise to have the layers reported unavailable."""
        ...

    async def close(self) -> None:
        """Release connections, threads and files (save what an index keeps in memory)."""
        ...

    # -- turns ----------------------------------------------------------------------------------

    async def store(self, batch: list[Turn]) -> tuple[list[dict[str, Any]], list[Turn]]:
        """Store turns (``created_at`` already canonical, no ``id``) in one transaction.

        Returns (acks in input order, the turns newly stored, with their ids). An ack is ``{"id", "message_id",
        "created_at", "channel"}``, plus ``"inside_summaries": [ids]`` when the new turn's time falls strictly
        inside summaries' spans (those are flagged ``rewrite = "backfill"`` unless flagged already). A turn whose
        ``message_id`` is already stored, or that was stored without one and comes back with one (the same
        :func:`turn_digest`: the same channel, author, time and content; one earlier in the batch too: what an
        export re-imported sends), stores nothing and is acked as the first was (without a ``message_id`` a
        repeat is a new turn; two different message_ids are two turns). A turn with a tombstone (:func:`tombstones`: its ``message_id``'s
        digest or its :func:`turn_digest`) stores nothing and is acked :func:`forgotten_ack`."""
        ...

    async def turns_by_ids(self, ids: Sequence[int]) -> list[Turn]:
        """The turns with these ids that exist, in the order of ``ids``."""
        ...

    async def newest(self, limit: int) -> list[Turn]:
        """The ``limit`` newest turns by (created_at, id), in time order."""
        ...

    async def counts(self) -> dict[str, int]:
        """``total``, ``unsummarized``, ``uningested`` turns and ``cursors`` (read cursors)."""
        ...

    async def unsummarized_page(self, limit: int | None, offset: int = 0, *, oldest_first: bool = False,
                                channel: str | None = None) -> tuple[int, list[Turn]]:
        """(unsummarized turns in ``channel``, or all; a page of them). Pages count from the newest (offset 0 =
        newest) unless ``oldest_first``; the page itself is in time order by (created_at, id). ``limit`` None:
        all. With ``oldest_first`` (what a summarizer is handed) no turn still being written may later appear
        inside the page's range."""
        ...

    async def since(self, ts: str, limit: int, include_summaries: bool) -> tuple[list[Turn], bool, list[SummaryRow]]:
        """(turns with created_at >= ``ts`` in time order, at most ``limit``; whether more exist; summaries
        whose span ends at or after ``ts``, by span start, when ``include_summaries``)."""
        ...

    async def around(self, ts: str, before: int, after: int) -> tuple[list[Turn], list[Turn]]:
        """``before`` turns before ``ts`` and ``after`` from it, each side in time order; a side that runs
        out lends what it lacks to the other."""
        ...

    async def context(self, wanted: int, per_summary: int) -> tuple[int, list[SummaryRow], list[Turn]]:
        """(unsummarized count, summaries oldest first, unsummarized turns) as :func:`context_plan` plans them,
        read in one consistent snapshot."""
        ...

    async def poll(self, consumer: str, channel: str | None, limit: int, *,
                   newest_first_preview: bool = False) -> dict[str, Any]:
        """Unread turns of channels other than ``channel`` since ``consumer``'s cursor; advances it.

        A new consumer starts at the newest turn (``{"consumer_key", "new_consumer": True, "unread_total": 0,
        "turns": [], "remaining": 0, "cursor"}``). Otherwise ``{"consumer_key", "new_consumer": False,
        "unread_total", "turns" (time order), "remaining", "cursor", "oldest_unread_at"}``: "unread" is by
        arrival (id); ``limit`` arrivals are returned and the rest stay unread, unless
        ``newest_first_preview``, which returns the newest ``limit`` by time, marks everything read and gives
        ``oldest_unread_at`` when it left some out. Two concurrent polls of one consumer: one raises
        ``Conflict``."""
        ...

    async def pending_ingestion(self, limit: int) -> list[Turn]:
        """The oldest turns (by id) not yet marked ingested."""
        ...

    async def mark_ingested(self, ids: list[int]) -> int:
        """Mark turns ingested; how many changed."""
        ...

    async def author_names(self) -> list[str]:
        """Every distinct ``author_name`` (names in a question boost that author's turns)."""
        ...

    # -- forgetting -----------------------------------------------------------------------------

    async def in_range(self, channel: str, since: str, until: str) -> list[int]:
        """Ids of turns in ``channel`` or under it (``"terminal"`` = ``"terminal:*"``) with since <= created_at
        < until, in time order."""
        ...

    async def forget(self, ids: list[int], who: str, how: str, owed: Sequence[str] = ()) -> dict[str, Any]:
        """Delete turns for good, in one transaction: the row, its full-text entry, its vector and any copy the
        store keeps (an in-memory matrix, an index file), so no copy of the store (a backup) holds the text;
        every summary that covered one goes too (text, full-text entry, vector), and the turns it still covered
        return to the backlog (unsummarized); the :func:`tombstones` of each turn (its :func:`turn_digest`, and its
        ``message_id``'s digest), so no import brings it back; authors nobody speaks as any more.
        Log ids, time, ``who`` and ``how`` (``"ids"``, ``"range"`` or ``"search"``), never content.

        ``owed`` names the copies (``"plugin/copy"``, :meth:`pps_core.events.Events.owed_copies`) that must still
        forget these turns: when it is not empty and a turn was found, the same transaction records an *owed
        forget* holding what those copies' ``forget`` needs without the rows: the found turns' ids, their
        ``message_id`` s, their texts, ``who`` and the copies (:meth:`owed_forgets`). A crash right after the
        commit leaves it for the next open to finish.
        Returns ``{"forgotten": [ids], "not_found": [ids], "summaries_removed": [ids],
        "returned_to_backlog": n, "owed": id of the owed forget, or None}``."""
        ...

    async def owed_forgets(self, texts: bool = False) -> list[dict[str, Any]]:
        """Every owed forget, oldest first: ``{"id", "forgotten_at", "who", "turn_ids", "message_ids",
        "copies"}`` (``message_ids``: those of the turns that had one; ``copies``: the keys still owed), plus
        ``"texts"`` (in the order of ``turn_ids``) when ``texts``."""
        ...

    async def settle_forget(self, owed_id: int, confirmed: Sequence[str]) -> list[str]:
        """Strike the ``confirmed`` copies off an owed forget, in one transaction; when none is left the record
        is deleted and its bytes with it (as :meth:`forget` deletes a turn's: no copy of the store keeps the
        texts once nothing is owed). The copies still owed (``[]`` when it is gone, or unknown)."""
        ...

    async def forget_log(self, limit: int, offset: int = 0) -> tuple[int, list[dict[str, Any]]]:
        """(entries, newest first: ``{"id", "forgotten_at", "who", "how", "turn_ids", "summaries_removed"}``)."""
        ...

    async def save_forget_token(self, token_digest: str, query_digest: str, ids: list[int], expires_at: float,
                                now: float) -> None:
        """Keep a ``forget_search`` confirmation (digests only; epoch seconds), dropping expired ones, so any
        process serving the entity can redeem it."""
        ...

    async def take_forget_token(self, token_digest: str, query_digest: str, now: float) -> list[int] | None:
        """The turn ids of a valid confirmation for this query, used up (deleted) in the same transaction; None
        for an unknown, expired, used or other-query token (a token for another query stays valid)."""
        ...

    # -- summaries ------------------------------------------------------------------------------

    async def store_summary(self, text: str, *, start_id: int | None, end_id: int | None,
                            message_ids: list[int] | None, channels: list[str] | None,
                            summary_type: str, created_at: str | None = None) -> SummaryRow:
        """Store a summary and mark exactly its turns, in one transaction.

        Turns are ``message_ids`` (each must exist: ``NotFound`` naming ``message_ids``), else every turn with
        start_id <= id <= end_id (``InvalidParams`` naming ``start_id`` when reversed or incomplete, ``NotFound``
        when none). Any of them already summarized, now or by a concurrent writer: ``Conflict`` and nothing
        stored. The summary's ``start_id``/``end_id`` are the least and greatest id, its span the least and
        greatest created_at, ``channels`` the given ones or the turns' (sorted). Its ``created_at`` is the given one
        (canonical storage form: a restore keeps when the summary was written), else now."""
        ...

    async def recent_summaries(self, limit: int, offset: int = 0) -> list[SummaryRow]:
        """Newest first by the time they cover (time_span_end, then id)."""
        ...

    async def summaries_by_ids(self, ids: Sequence[int]) -> list[SummaryRow]:
        """The summaries with these ids that exist (any order)."""
        ...

    async def summary_stats(self) -> dict[str, Any]:
        """``total_messages``, ``unsummarized_count``, ``summarized_count``, ``summary_count``,
        ``oldest_unsummarized_at``, ``newest_summary_at``, ``unsummarized_by_channel`` (most first),
        ``needs_rewrite`` (as :meth:`needs_rewrite`)."""
        ...

    async def summary_count(self) -> int:
        ...

    async def needs_rewrite(self) -> list[dict[str, Any]]:
        """Summaries flagged for rewrite, ``[{"id", "reason"}]`` by id."""
        ...

    # -- full text ------------------------------------------------------------------------------

    async def lexical_turns(self, terms: list[str], n: int, channel: str | None = None,
                            budget: int = 0) -> dict[int, float]:
        """BM25 (higher is better) of the ``n`` best turns whose content holds any of ``terms`` (already
        tokenised: lower-case words), only turns of ``channel`` when given. ``budget`` is a hint: the postings
        the store may rank before it bounds its pass over a long history (0: exhaustive)."""
        ...

    async def term_counts(self, terms: list[str], cap: int) -> tuple[int, dict[str, int]]:
        """(how many turns are stored, how many of them hold each of ``terms`` as the full-text index matches it,
        counted up to ``cap``): the idf of the calibrated score. A count may be cached while the store grows by
        less than a tenth."""
        ...

    async def channel_neighbours(self, ids: Sequence[int], reach: int) -> list[tuple[int, int]]:
        """(id, other) pairs: for each of ``ids``, every turn of the same channel whose id is at most ``reach`` away,
        or only the nearest two of them on each side (``pps_turns.retrieval.links_from_rows`` keeps no more; a store
        may save the rows): the neighbour signal counts a turn's
        neighbours in its own conversation, not the turns of other channels stored between them. (A store
        without it still works: the turns next by id, when of the same channel, count instead.)"""
        ...

    async def lexical_summaries(self, query: str, n: int) -> list[SummaryRow]:
        """The ``n`` best summaries for the words of ``query`` (any of them) by BM25, best first, each with
        ``score`` (higher is better)."""
        ...

    # -- vectors (the domain embeds; the store keeps them) --------------------------------------

    async def turns_missing_vectors(self, model: str, limit: int, after: int) -> tuple[list[Turn], int]:
        """(up to ``limit`` turns with id > ``after`` and no vector of ``model``, by id; an id up to which every
        turn has now been looked at). When fewer than ``limit`` come back, the domain's next look starts at
        that id. A store several servers write (``exclusive`` False) answers by set membership instead: ids
        commit out of order there, so it ignores ``after`` and returns every turn still without a vector of
        ``model`` (``pps_postgres`` keeps them in a backlog table the capture adds to); the domain then keeps no
        mark and looks at the backlog before every search, so a turn committed late is neither left behind nor
        missing from the pending count."""
        ...

    async def write_turn_vectors(self, model: str, turns: list[Turn], vectors: list[bytes]) -> None:
        """Keep ``vectors[i]`` as the vector of ``turns[i]`` under ``model`` (replacing any other)."""
        ...

    async def count_turns_missing_vectors(self, model: str) -> int:
        ...

    async def drop_turn_vectors(self) -> int:
        """Delete every turn vector of every model (and any index built from them); how many rows went."""
        ...

    async def turn_similarities(self, model: str, qvec: Any, n: int, context: float,
                                channel: str | None = None) -> tuple[Sequence[int], Sequence[float]]:
        """(ids, cosines) of at least the ``n`` turns whose context vectors are nearest the unit vector
        ``qvec`` (a float32 numpy array); it may return more, or all. A turn's context vector is its own
        vector plus ``context`` times those of the nearest turn of its channel on each side within
        ``retrieval.NEIGHBOUR_REACH`` ids, re-normalised (:meth:`pps_turns.vectors.TurnVectors.context_matrix` computes it). Empty when the store
        has no usable vectors yet (the search is then lexical). ``channel`` is a hint: the domain keeps only
        that channel's turns anyway.

        Where the candidates come from is the store's: an exact matrix in process (``TurnVectors.scores``, what
        ``examples/pps_memstore`` does), an index file (``pps_sqlite`` past its ``ann_threshold``) or an index
        inside a database server (``pps_postgres``: pgvector HNSW, no vector held in process). An approximate
        index answers its nearest candidates by their own vectors, rescored exactly by context; the contract
        (``pps_turns.testing``) checks the best ten against exact search on a small history."""
        ...

    async def channel_similarities(self, model: str, qvec: Any, channels: Sequence[str], n: int,
                                   context: float) -> tuple[Sequence[int], Sequence[float]]:
        """(ids, cosines) of at least the ``n`` turns of each of ``channels`` whose context vectors are nearest
        ``qvec``, scored exactly as :meth:`turn_similarities` scores them (same context vectors, same cosines, so
        the domain adds them to that method's candidates); it may return more (their neighbours, or every turn of
        a channel), never a turn of another channel. Empty when the store has no usable vectors yet.

        What it is for: the turn search draws its dense candidates from the whole history first; in a long history
        the best few hundred of it by meaning hold few turns of the conversation a question is about, so after a
        first pass the domain asks here for the best turns of the channels its best candidates point to
        (``pps_turns.retriever``, ``FusionConfig.channel_candidates``). A store answers from what it keeps: the exact
        matrix masked by channel, an exact scan of a small channel's vectors, a channel-filtered query in the
        database; for a channel too large to scan cheaply it may answer approximately (its index's wider
        candidates of that channel). (A store without it still works: the search keeps its global candidates.)"""
        ...

    async def repair_turn_index(self, model: str) -> dict[str, Any] | None:
        """``pps reindex``, after every missing vector is written: bring any index the store builds from the
        vectors up to date (a small JSON report), or None when it keeps none."""
        ...

    async def summaries_missing_vectors(self, model: str, limit: int, after: int) -> tuple[list[tuple[int, str]],
                                                                                              int]:
        """(up to ``limit`` (id, summary_text) with id > ``after`` and no vector of ``model``, by id; as
        :meth:`turns_missing_vectors`, the id up to which every summary has been looked at)."""
        ...

    async def write_summary_vectors(self, model: str, ids: list[int], vectors: list[bytes]) -> None:
        ...

    async def count_summaries_missing_vectors(self, model: str) -> int:
        ...

    async def drop_summary_vectors(self) -> int:
        """Delete every summary vector of every model; how many went."""
        ...

    async def summary_similarities(self, model: str, qvec: Any, n: int) -> dict[int, float]:
        """{summary id: cosine} of the ``n`` summaries nearest ``qvec``."""
        ...


@runtime_checkable
class BrowsableTurnStore(TurnStore, Protocol):
    """A :class:`TurnStore` that also pages turns by filters and counts activity per time bucket (the
    ``list_turns`` and ``turn_activity`` operations; a store without them answers those with ``Unavailable``)."""

    async def list_turns(self, *, since: str | None, until: str | None, channel: str | None, author: str | None,
                         ids: list[int] | None, newest_first: bool, limit: int,
                         offset: int) -> tuple[int, list[Turn]]:
        """(how many match, a page by (created_at, id)). ``channel`` matches the channel or any under it
        (``"terminal"`` = ``"terminal:*"``); ``author`` case-insensitively."""
        ...

    async def activity(self, start: str, end: str, width: int) -> tuple[list[tuple[str, str, int]], int,
                                                                        list[tuple[str, int]]]:
        """(``[(bucket, channel, turns)]`` for start <= created_at < end, where a bucket is the first ``width``
        characters of created_at; turns dated before ``start`` minus turns summarized by summaries created
        before it; ``[(bucket, turns summarized)]`` by summaries created in the range, bucketed the same)."""
        ...


@runtime_checkable
class ArchivableTurnStore(TurnStore, Protocol):
    """A :class:`TurnStore` whose data is not files in the entity's home (a database server): ``pps backup``
    asks it for its rows and ``pps restore`` gives them back (through the ``raw_capture`` layer's
    :meth:`~pps_core.Layer.snapshot` and :meth:`~pps_core.Layer.after_restore`). A store in the home (SQLite) needs
    neither: its files are copied."""

    async def export_rows(self, dest: Path) -> list[str]:
        """Write every row of the store (turns, summaries, read cursors, vectors, the forget log and tombstones) under
        ``dest``, from one consistent snapshot; the home-relative paths written."""
        ...

    def exported_counts(self, dest: Path) -> dict[str, int] | None:
        """The counts :meth:`export_rows` took under ``dest`` in the same snapshot as its rows: ``total``,
        ``unsummarized``, ``uningested``, ``cursors`` (turns), ``summaries``, ``needs_rewrite``; None when nothing was
        exported there. Other processes write the store while a backup runs (a fleet): these, not a count taken
        before or after, are what the archive holds."""
        ...

    async def import_rows(self, home: Path) -> dict[str, int] | None:
        """After ``pps restore``: load what :meth:`export_rows` wrote (now under ``home``) into this store, which must
        hold no turns (else ``Conflict``, nothing loaded), in one transaction checked by the rows of each table
        (a damaged archive loads nothing: ``InvalidParams`` naming ``file``); then remove those files from the home.
        The rows loaded per table, or None when the archive has none."""
        ...


@runtime_checkable
class GlanceableStore(Protocol):
    """A :class:`TurnStore` that can also be opened for reading only, cheaply, beside the process that owns it
    (SQLite in WAL mode): the ``raw_capture`` and ``message_summaries`` layers on it then open at a glance
    (:attr:`pps_core.Layer.glance`), so a cold Claude Code hook finds turns by their words while the owner starts.
    A glance has no embedder: the turn and summary searches are lexical."""

    async def open_glance(self) -> None:
        """Open read-only (no schema change; every write fails). Raise when it cannot be read that way now (no
        database yet, a schema this code does not read): the layers are then shown as warming up."""
        ...
