"""The turn domain's own copies of turn text, declared through the kernel's forget lineage.

A store adapter returns :func:`turn_copies` from its ``pps_turn_copies`` hook. The store is the *origin*: the
forget operation deletes every one of these copies in the store's own transaction (the rows, their full-text and
vector rows, the summaries that covered them), so their ``forget`` here has nothing left to do; the lineage
lists them so that ``turn_copies`` (and docs/FAULTS.md) account for every place a turn's text lives.
"""

from __future__ import annotations

from pps_core.lineage import ForgottenTurns, TurnCopy


def _in_the_forget_transaction(_turns: ForgottenTurns) -> None:
    """Nothing to do: the store removed this copy in the forget's own transaction."""


def turn_copies(where: str, index_where: str | None = None) -> list[TurnCopy]:
    """The copies every turn store keeps (``where``: the database; ``index_where``: a vector index outside it)."""
    copies = [
        TurnCopy("turns", f"{where}: turns and their full-text index",
                 "deleted with their full-text rows in one transaction; the message_id is tombstoned so no import "
                 "or retry stores it again; the forget log keeps ids, time, who asked and how, never text",
                 _in_the_forget_transaction, origin=True),
        TurnCopy("summaries", f"{where}: summaries and their full-text index",
                 "a summary that covered a forgotten turn is deleted; the other turns it covered return to the "
                 "summarization backlog", _in_the_forget_transaction, origin=True),
        TurnCopy("turn vectors", f"{where}: one embedding per turn", "deleted with the turn",
                 _in_the_forget_transaction, origin=True),
        TurnCopy("authors", f"{where}: author names", "an author left with no turn is deleted",
                 _in_the_forget_transaction, origin=True),
    ]
    if index_where:
        copies.append(TurnCopy("turn vector index", index_where,
                               "the forgotten ids leave the index at once, its files are deleted and a clean index "
                               "is rebuilt from the remaining vectors", _in_the_forget_transaction, origin=True))
    return copies
