"""Plugin ``recap``: session recap (design §6, reference/004): what the entity was doing, for the next instance.

A session log (a mindloop-style chat JSONL or a Claude Code transcript) is collapsed into a narrative
(``logs``, ``collapse``), chunked and merged by similarity (``chunks``), summarized (``summarize``),
scored by recency and selected within a token budget (``pipeline``), and kept as ``_recap.md`` in the
entity's home (``store``), which the ``session_recap`` startup section shows (``layer``).
"""
