"""Summarize a chunk: the entity's configured LLM (OpenAI-compatible), or an offline extractive summary.

The LLM is called with the standard library (``POST {base_url}/chat/completions``), so the core gains
no HTTP dependency. A chunk the LLM fails on falls back to the extractive summary, and the recap says
how many did.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import TYPE_CHECKING

from .chunks import Chunk, words
from .collapse import CONSEQUENTIAL

if TYPE_CHECKING:  # pragma: no cover
    from pps_core.chat import ChatModel

PROMPT = (
    "You write the recap an AI agent reads when its next session starts. Summarize this segment of its "
    "previous session in at most {sentences} sentences, in the first person (the agent is 'I', the human "
    "is 'the user'). Keep what was decided, what was changed (files, memories), and what was left "
    "unfinished; drop pleasantries and file contents. Answer with the summary only.")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'`(\[])")


END_PROMPT = (
    "You write the WHERE I LEFT OFF line of the recap an AI agent reads when its next session starts. From "
    "the end of its previous session below, say in at most two sentences, in the first person (the agent is "
    "'I', the human is 'the user'): what I was doing when the session ended, what failed or is unfinished, "
    "and the next step if the session states one. Answer with the line only.")
#: Cues of a stated next step or of unfinished work, in the agent's own words.
_NEXT = re.compile(r"\b(next( step)?|todo|to do|still|remaining|left to|need to|will|then I|follow[- ]up)\b", re.I)
#: How much of the session's end the end state is drawn from.
END_TURNS = 12


def _sentences(text: str) -> list[str]:
    return [p.strip() for p in _SENTENCE.split(" ".join(text.split())) if p.strip()]


def user_name_of(settings) -> str:
    """The user as the entity knows them: ``user_name`` of pps.toml (or of its ``[claude_code]`` table, where
    ``pps setup --user-name`` writes it), else "the user"."""
    extra = getattr(settings, "model_extra", None) or {}
    for value in (extra.get("user_name"), (settings.section("claude_code") or {}).get("user_name")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    return "the user"


def _quoted(text: str, limit: int = 200) -> str:
    text = " ".join(text.split())
    return f'"{text if len(text) <= limit else text[:limit - 3].rstrip() + "..."}"'


def extractive_end_state(turns, user_name: str = "the user") -> str:
    """Where the session ended, from its last turns: what the user last asked, the agent's last words, the last
    failure, the stated next step."""
    tail = list(turns)[-END_TURNS:]
    said = [t for t in tail if t.role == "Assistant" and t.text.strip()]
    failure = next((t.text for t in reversed(tail) if t.role == "Tool" and "(failed)" in t.text), None)
    asked = next((t.text for t in reversed(tail) if t.role == "User" and t.text.strip()), "")
    parts: list[str] = [f"{user_name[:1].upper() + user_name[1:]} had asked: {_quoted(asked)}."] if asked else []
    if said:
        final = _sentences(said[-1].text)
        parts.append(" ".join(final[-3:]) if final else said[-1].text.strip())
    if failure and failure not in " ".join(parts):
        parts.append(f"Last failure: {failure.rstrip('.')}.")
    stated = " ".join(parts[1:] if asked else parts)
    for t in reversed(said[:-1]):  # a next step said a little earlier, when the last words do not state one
        if _NEXT.search(stated):
            break
        cue = next((x for x in reversed(_sentences(t.text)) if _NEXT.search(x)), None)
        if cue:
            parts.append(cue)
            break
    text = " ".join(parts)
    return text if len(text) <= 600 else text[:597].rstrip() + "..."


class ExtractiveSummarizer:
    """The chunk's most central sentences, in their original order (TF-IDF weight per sentence).

    Consequential tool lines (they changed state) and user requests get a bonus, so the summary says
    what was asked and what was done; reasoning competes on content.
    """

    name = "extractive"

    def __init__(self, max_sentences: int = 3, max_chars: int = 420, user_name: str = "the user") -> None:
        self.max_sentences = max_sentences
        self.max_chars = max_chars
        #: How the user is named: pps.toml's ``user_name`` (:func:`user_name_of`).
        self.user_name = user_name

    def end_state(self, turns) -> str:
        return extractive_end_state(turns, self.user_name)

    def summarize(self, chunk: Chunk) -> str:
        sentences: list[tuple[str, str, float]] = []  # (role, sentence, bonus)
        turn_of: list[int] = []  # the chunk's turn each sentence came from: one prompt is quoted as one
        seen: set[str] = set()
        for n_turn, t in enumerate(chunk.turns):
            if t.role == "Thinking" or t.text in seen:
                continue
            seen.add(t.text)
            bonus = 0.3 if t.role == "Tool" and t.category == CONSEQUENTIAL else 0.3 if t.role == "User" else 0.0
            parts = [t.text] if t.role == "Tool" else _SENTENCE.split(" ".join(t.text.split()))
            kept = [(t.role, s.strip(), bonus) for s in parts if len(s.strip()) > 3]
            sentences.extend(kept)
            turn_of.extend([n_turn] * len(kept))
        last_said = max((i for i, (r, _s, _b) in enumerate(sentences) if r == "Assistant"), default=None)
        if last_said is not None:  # where a stretch of work ends, the agent tends to say what is still open
            role, s, bonus = sentences[last_said]
            sentences[last_said] = (role, s, bonus + 0.8)
        if not sentences:
            sentences = [(t.role, " ".join(t.text.split()), 0.0) for t in chunk.turns]
            turn_of = list(range(len(sentences)))
        df = Counter(w for _r, s, _b in sentences for w in set(words(s)))
        n = len(sentences)

        def score(i: int) -> float:
            _role, s, bonus = sentences[i]
            ws = words(s)
            if not ws:
                return bonus
            weight = sum(math.log(1 + df[w]) for w in ws) / math.sqrt(len(ws))
            return weight / (1 + math.log(1 + n)) + bonus + (0.2 if i == 0 else 0.0)

        budget_sentences = min(self.max_sentences + chunk.tokens // 400, 6)
        max_chars = self.max_chars + 120 * (budget_sentences - self.max_sentences)
        best = sorted(range(n), key=lambda i: -score(i))[:budget_sentences]
        # each prompt quoted on its own, named as the entity knows the user: never one prompt glued to the next
        groups: list[tuple[str, int, list[str]]] = []
        used = 0
        for i in sorted(best):
            role, s, _b = sentences[i]
            s = s if len(s) <= 220 else s[:217].rstrip() + "..."
            if groups and used + len(s) > max_chars:
                break
            if groups and groups[-1][0] == role == "User" and groups[-1][1] == turn_of[i]:
                groups[-1][2].append(s)
            else:
                groups.append((role, turn_of[i], [s]))
            used += len(s) + 1
        name = self.user_name[:1].upper() + self.user_name[1:]
        return " ".join(f'{name} asked: "{" ".join(said)}"' if role == "User" else
                        " ".join(said) if role in ("Tool", "Assistant") else f"{role}: {' '.join(said)}"
                        for role, _t, said in groups)


class LLMSummarizer:
    """The entity's chat model (:class:`pps_core.chat.ChatModel`, from whichever plugin provides one)."""

    name = "llm"

    def __init__(self, client: ChatModel, sentences: int = 3, max_input_chars: int = 24_000,
                 user_name: str = "the user") -> None:
        self.client = client
        self.model = client.name
        self.sentences = sentences
        self.max_input_chars = max_input_chars
        self.user_name = user_name
        self.fallback = ExtractiveSummarizer(user_name=user_name)
        self.failures: list[str] = []

    def end_state(self, turns) -> str:
        """The WHERE I LEFT OFF line from the session's last turns; extractive when the LLM fails."""
        from pps_core.errors import Unavailable

        tail = Chunk(list(turns)[-END_TURNS * 2:]).text[-self.max_input_chars:]
        try:
            answer = " ".join(self.client.complete(END_PROMPT, tail).split())
        except Unavailable as exc:
            self.failures.append(exc.message)
            answer = ""
        if answer:
            self.end_state_kind = "llm"
            return answer
        self.end_state_kind = "extractive"
        return extractive_end_state(turns, self.user_name)

    def summarize(self, chunk: Chunk) -> str:
        from pps_core.errors import Unavailable

        text = chunk.text
        if len(text) > self.max_input_chars:
            half = self.max_input_chars // 2
            text = text[:half] + "\n[...]\n" + text[-half:]
        try:
            return " ".join(self.client.complete(PROMPT.format(sentences=self.sentences), text).split())
        except Unavailable as exc:
            self.failures.append(exc.message)
            return self.fallback.summarize(chunk)


def make_summarizer(chat: ChatModel | None, kind: str = "auto", user_name: str = "the user"):
    """``auto``: the entity's chat model when a plugin provides one, else extractive. ``llm`` without one is an
    error. ``user_name``: how the recap names the user (:func:`user_name_of`)."""
    from pps_core.errors import Unavailable

    if kind == "extractive" or (kind == "auto" and chat is None):
        return ExtractiveSummarizer(user_name=user_name)
    if chat is None:
        raise Unavailable("summarizer 'llm' needs a chat model: [llm] base_url and model in the entity's pps.toml "
                          "(or use summarizer 'extractive')")
    return LLMSummarizer(chat, user_name=user_name)
