"""Plugin ``claude_code``: Claude Code as a host of a PPS entity.

``hooks`` (``pps hooks``/``pps hook``: capture every turn, inject memory at session start),
``transcripts`` (Claude Code transcripts read as turns) and ``importer`` (``pps import``).
"""
