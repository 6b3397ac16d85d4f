"""``<private>...</private>``: the one filter every boundary uses before anything is stored or sent.

Whatever enters PPS from a channel (a turn's content, its metadata, a fact given to the graph, a transcript a
recap reads, an imported export) passes :func:`drop_private` (or :func:`drop_private_deep` for JSON data)
before it is stored, indexed, embedded or sent to an LLM. Operations get it for free by typing a field
:data:`Captured` (or :data:`CapturedMetadata`).

Rules: the tag is matched in any case and may carry whitespace (``< private >``, ``</PRIVATE >``); spans
nest and the outermost wins (``a <private>b <private>c</private> d</private> e`` keeps ``a`` and ``e``); an
unclosed tag hides everything after it; a closing tag with no opening one is left as it is. A text that was
nothing but private spans keeps :data:`PRIVATE_ONLY` (someone spoke then, not what was said).

The same filter replaces **secrets nobody marked** (issue 41): well-known key and token formats (AWS access keys,
GitHub, OpenAI, Anthropic, Slack, Google and Stripe keys, JWTs, PEM private key blocks, bearer tokens, passwords in
URLs) and high-entropy values assigned to a secret-sounding name (``password=``, ``api_key:``, ``TOKEN=``) become a
marker, ``[secret:aws-access-key]``. Which detector runs is the entity's (``[privacy]`` of pps.toml: ``secrets =
false`` turns it off, ``secret_patterns`` adds named regexes): the kernel sets it for every operation call
(:func:`use_secret_scanner`); outside one, the built-in patterns run.
"""

from __future__ import annotations

import contextvars
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import AfterValidator

_TAG = re.compile(r"<\s*(/?)\s*private\s*>", re.IGNORECASE)

#: What a text that was nothing but private spans keeps.
PRIVATE_ONLY = "[private]"


def has_private(text: str) -> bool:
    """Whether ``text`` holds an opening ``<private>`` tag (cheap: most texts have no ``<`` at all)."""
    return "<" in text and any(not m.group(1) for m in _TAG.finditer(text))


def _strip(text: str) -> str:
    out: list[str] = []
    depth = 0
    pos = 0
    for m in _TAG.finditer(text):
        closing = bool(m.group(1))
        if depth == 0:
            out.append(text[pos:m.start()])
            if closing:  # a stray closing tag: not ours to hide anything for
                out.append(m.group(0))
            else:
                depth = 1
        elif closing:
            depth -= 1
        else:
            depth += 1
        pos = m.end()
    if depth == 0:
        out.append(text[pos:])
    return "".join(out)


def drop_private(text: str) -> str:
    """``text`` without its private spans (and without the blank lines they leave), its secrets replaced by
    markers (:func:`redact_secrets`, with the scanner of the entity being served)."""
    if has_private(text):
        kept = _strip(text)
        kept = re.sub(r"[ \t]+\n", "\n", re.sub(r"\n{3,}", "\n\n", kept))
        kept = re.sub(r"[ \t]{2,}", " ", kept).strip()
        text = kept or PRIVATE_ONLY
    return redact_secrets(text)


# -- secrets nobody marked ---------------------------------------------------------------------------------------

#: Names a secret pattern may have (it is shown in the marker: ``[secret:<name>]``).
SECRET_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")

#: Names whose assigned value is a secret when it looks random (detect-secrets' KeywordDetector, narrowed).
_KEYWORD = (r"(?:pass(?:word|wd|phrase)?|pwd|secret|token|api[_-]?key|apikey|access[_-]?key|auth[_-]?key"
            r"|private[_-]?key|client[_-]?secret|credentials?)")

#: Built-in detectors, modelled on detect-secrets' plugins (AWSKeyDetector, GitHubTokenDetector, OpenAIDetector,
#: SlackDetector, StripeDetector, JwtTokenDetector, PrivateKeyDetector, BasicAuthDetector, KeywordDetector) with
#: anchors and minimum lengths that keep ordinary prose out. A pattern with a group named ``secret`` replaces only
#: that group (``Authorization: Bearer [secret:bearer-token]``); otherwise the whole match.
BUILTIN_SECRET_PATTERNS: dict[str, str] = {
    "private-key": r"-----BEGIN[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----(?s:.*?)"
                   r"(?:-----END[A-Z0-9 ]{0,40} PRIVATE KEY(?: BLOCK)?-----|\Z)",
    "aws-access-key": r"(?<![A-Za-z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z0-9]{16}(?![A-Za-z0-9])",
    "github-token": r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9])",
    "anthropic-key": r"(?<![A-Za-z0-9])sk-ant-[A-Za-z0-9_-]{20,}",
    "openai-key": r"(?<![A-Za-z0-9])sk-(?=[A-Za-z0-9_-]*\d)(?!ant-)[A-Za-z0-9_-]{20,}",
    "slack-token": r"(?<![A-Za-z0-9])xox[abposre]-[A-Za-z0-9-]{10,}",
    "slack-webhook": r"https://hooks\.slack\.com/services/T[A-Za-z0-9_]+/B[A-Za-z0-9_]+/[A-Za-z0-9_]+",
    "google-api-key": r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])",
    "stripe-key": r"(?<![A-Za-z0-9])[rs]k_(?:live|test)_[0-9A-Za-z]{20,}(?![A-Za-z0-9])",
    "jwt": r"(?<![A-Za-z0-9])eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*",
    "bearer-token": r"(?i:\bauthorization[\"']?\s*[:=]\s*[\"']?\s*(?:bearer|token|basic)\s+)"
                    r"(?P<secret>[A-Za-z0-9._~+/-]{8,}=*)"
                    r"|(?i:\bbearer\s+)(?P<secret2>(?=[A-Za-z0-9._~+/-]*\d)(?=[A-Za-z0-9._~+/-]*[A-Za-z])"
                    r"[A-Za-z0-9._~+/-]{20,}=*)",
    "url-password": r"\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:/@\[\]]{1,100}:(?P<secret>[^\s:/@\[\]]{3,200})@",
    "assigned-secret": r"(?i:(?<!\[)" + _KEYWORD + r"[A-Za-z0-9_.-]{0,40}[\"']?[ \t]*(?::=|=>|=|:)[ \t]*[\"']?)"
                       r"(?P<secret>[^\s\"'`,;<>()\[\]{}$%]{8,200})",
}

#: Lowercase words one of which a text must hold for a built-in pattern to run at all (a substring test is far
#: cheaper than a regex: ordinary text runs none of them).
_TRIGGERS: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",),
    "aws-access-key": ("akia", "asia", "abia", "acca", "a3t"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "slack-token": ("xox",),
    "slack-webhook": ("hooks.slack.com",),
    "google-api-key": ("aiza",),
    "stripe-key": ("k_live_", "k_test_"),
    "jwt": ("eyj",),
    "bearer-token": ("bearer", "authorization"),
    "url-password": ("://",),
    "assigned-secret": ("pass", "pwd", "secret", "token", "key", "credential"),
}

_ANY_TRIGGER = re.compile("|".join(re.escape(w) for w in sorted({w for ws in _TRIGGERS.values() for w in ws})))

#: Checks a candidate must pass besides its regex (the value must look random, not like a word).
_CHECKS: dict[str, Callable[[str], bool]] = {}


def _entropy(value: str) -> float:
    """Shannon entropy of ``value``, in bits per character."""
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _looks_random(value: str) -> bool:
    """An assigned value that is a secret, not a word, a name, code or a placeholder: letters and digits (or both
    cases over 20 characters), nearly as random as its length allows (at least ``min(3, 0.85 * log2(length))``
    bits of entropy per character: not a repeat like ``xxxx1111``).
    ``request.form`` and ``os.environ.get`` (code naming where a secret comes from) are kept."""
    if value.lower() in {"password", "changeme", "redacted", "required", "optional", "none", "null", "true", "false"}:
        return False
    has_digit = any(c.isdigit() for c in value)
    has_alpha = any(c.isalpha() for c in value)
    mixed_case = any(c.islower() for c in value) and any(c.isupper() for c in value)
    if not has_alpha or not (has_digit or (mixed_case and len(value) >= 20)):
        return False
    return _entropy(value) >= min(3.0, 0.85 * math.log2(len(value)))


_CHECKS["assigned-secret"] = _looks_random


class SecretPatternError(ValueError):
    """An added secret pattern that cannot be used: the message names it and says why."""


@dataclass(frozen=True)
class SecretScanner:
    """Named regexes whose matches are replaced by ``[secret:<name>]``. ``enabled=False`` changes nothing."""

    patterns: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = ()
    enabled: bool = True
    #: The patterns that run on every text (the added ones: they name no trigger words).
    always: tuple[tuple[str, re.Pattern[str]], ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def build(cls, added: Mapping[str, str] | None = None, *, enabled: bool = True) -> SecretScanner:
        """The built-in patterns, then ``added`` (name -> regex; a bad name or regex is a
        :class:`SecretPatternError`, as is a regex that matches empty text)."""
        compiled = [(name, re.compile(rx), _TRIGGERS[name]) for name, rx in BUILTIN_SECRET_PATTERNS.items()]
        for name, rx in (added or {}).items():
            if not SECRET_NAME.match(name):
                raise SecretPatternError(f"secret pattern name {name!r}: use lowercase letters, digits and '-' "
                                         "(at most 40), as it is shown in the marker [secret:<name>]")
            try:
                pattern = re.compile(rx)
            except re.error as exc:
                raise SecretPatternError(f"secret pattern {name!r} is not a valid regex: {exc}") from None
            if pattern.fullmatch(""):
                raise SecretPatternError(f"secret pattern {name!r} matches empty text: it would match everywhere")
            compiled.append((name, pattern, ()))  # an added pattern always runs
        return cls(tuple(compiled), enabled, tuple((n, p) for n, p, words in compiled if not words))

    def _running(self, text: str) -> list[tuple[str, re.Pattern[str]]]:
        low = text.lower()
        if _ANY_TRIGGER.search(low) is None:  # one pass: ordinary text holds none of the words
            return list(self.always)
        return [(name, pattern) for name, pattern, words in self.patterns
                if not words or any(w in low for w in words)]

    def redact(self, text: str) -> str:
        if not self.enabled or not text:
            return text
        if not self.always and _ANY_TRIGGER.search(text.lower()) is None:  # the common case, at once
            return text
        for name, pattern in self._running(text):
            check = _CHECKS.get(name)
            text = pattern.sub(lambda m, n=name, c=check: _replace(m, n, c), text)  # type: ignore[misc]
        return text

    def find(self, text: str) -> list[str]:
        """The names of the patterns that would replace something in ``text`` (for reports: never the values)."""
        if not self.enabled:
            return []
        found = []
        for name, pattern in self._running(text):
            check = _CHECKS.get(name)
            for m in pattern.finditer(text):
                if _replace(m, name, check) != m.group(0):
                    found.append(name)
        return found


def _replace(m: re.Match[str], name: str, check: Callable[[str], bool] | None) -> str:
    groups = m.re.groupindex
    key = next((g for g in ("secret", "secret2") if g in groups and m.group(g) is not None), None)
    value = m.group(key) if key else m.group(0)
    if check is not None and not check(value):
        return m.group(0)
    marker = f"[secret:{name}]"
    if key is None:
        return marker
    start, end = m.span(key)
    base = m.start()
    whole = m.group(0)
    return whole[:start - base] + marker + whole[end - base:]


#: The built-in detector, on: what runs outside an entity's operation call.
DEFAULT_SECRET_SCANNER = SecretScanner.build()

_SCANNER: contextvars.ContextVar[SecretScanner] = contextvars.ContextVar("pps_secret_scanner",
                                                                         default=DEFAULT_SECRET_SCANNER)


def use_secret_scanner(scanner: SecretScanner) -> contextvars.Token[SecretScanner]:
    """Make ``scanner`` the one :func:`drop_private` uses in this context (the kernel does, per entity)."""
    return _SCANNER.set(scanner)


def reset_secret_scanner(token: contextvars.Token[SecretScanner]) -> None:
    _SCANNER.reset(token)


def redact_secrets(text: str) -> str:
    """``text`` with every detected secret replaced by ``[secret:<kind>]`` (the active scanner's patterns)."""
    return _SCANNER.get().redact(text)


class PrivateKeysCollide(ValueError):
    """Two keys of one JSON object are the same once filtered (private spans dropped, secrets replaced): one value
    would be lost."""


def drop_private_deep(value: Any, *, strict: bool = True) -> Any:
    """JSON data with :func:`drop_private` applied to every string in it, keys included.

    Two keys of one object that are the same once filtered (``"note"`` and ``"note<private>x</private>"``) would
    lose a value: ``strict`` raises :class:`PrivateKeysCollide` (naming the key as kept, never the private part);
    otherwise both are kept, the later ones as ``"note (2)"``, ``"note (3)"``, in the object's order (a reader of
    files that cannot refuse them: a session log)."""
    if isinstance(value, str):
        return drop_private(value)
    if isinstance(value, dict):
        out: dict[Any, Any] = {}
        for k, v in value.items():
            key = drop_private_deep(k, strict=strict)
            if key in out:
                if strict:
                    raise PrivateKeysCollide(f"two keys are the same once filtered (<private> spans dropped, "
                                             f"secrets replaced) ({key!r}): one value would be lost; rename one of "
                                             "them")
                n = 2
                while f"{key} ({n})" in out:
                    n += 1
                key = f"{key} ({n})"
            out[key] = drop_private_deep(v, strict=strict)
        return out
    if isinstance(value, (list, tuple)):
        return [drop_private_deep(v, strict=strict) for v in value]
    return value


#: Text captured from a channel: ``<private>`` spans are gone before the handler sees it. Compose with
#: :data:`pps_core.Text` and ``Field(max_length=...)`` as usual.
Captured = Annotated[str, AfterValidator(drop_private)]

def _text(value: str) -> str:  # as pps_core.params.Text (a sibling module: not imported)
    if not value.strip():
        raise ValueError("must not be blank")
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


#: As :data:`pps_core.Text` (not blank, no NUL), captured from a channel: the content of a document a client writes.
CapturedText = Annotated[str, AfterValidator(_text), AfterValidator(drop_private)]

#: JSON metadata captured from a channel: every string in it, keys included, filtered (keys that collide once
#: filtered are refused: :class:`PrivateKeysCollide`, a 422 naming the parameter).
CapturedMetadata = Annotated[dict[str, Any], AfterValidator(drop_private_deep)]
