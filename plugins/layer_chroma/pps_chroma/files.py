"""Word-photo files: markdown with a YAML front matter (title, date, tags, location). The source of truth."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from pps_core.atomic import NotPlainFile, read_plain
from pps_core.errors import InvalidParams
from pps_core.timeutil import to_storage

MAX_STEM = 80
_UNSAFE = re.compile(r"[^\w\-]+", re.UNICODE)


class Unreadable(Exception):
    """The file cannot be used (empty, not UTF-8, unreadable); it is reported in health and skipped."""


@dataclass
class Photo:
    """One parsed word-photo file."""

    filename: str
    title: str
    body: str
    sha256: str
    date: str | None = None
    tags: list[str] = field(default_factory=list)
    location: str | None = None
    warning: str | None = None


def check_title(title: str, param: str = "title") -> str:
    """Refuse empty and path-like titles: a title names a file in word_photos/, never a path."""
    t = unicodedata.normalize("NFC", title or "").strip()
    if not t:
        raise InvalidParams(f"{param}: must not be empty", param=param)
    if "/" in t or "\\" in t or "\x00" in t or t.startswith(".") or t in ("..", "."):
        raise InvalidParams(f"{param}: {title!r} looks like a path; give a plain title such as "
                            f"'The first snow'", param=param)
    return t


def slugify(title: str) -> str:
    """'Café at dawn: the first snow!' -> 'café-at-dawn-the-first-snow' (letters of any script kept)."""
    words = _UNSAFE.sub(" ", unicodedata.normalize("NFC", title).lower()).split()
    stem = "-".join(words).strip("-_")
    while len(stem.encode("utf-8")) > MAX_STEM * 2 or len(stem) > MAX_STEM:
        stem = stem[:-1]
    return stem.strip("-_") or "word-photo"


def check_filename(name: str, param: str = "filename") -> str:
    """A word-photo's file name as given by a caller: a plain name in word_photos/, '.md' optional."""
    n = unicodedata.normalize("NFC", (name or "").strip())
    if not n:
        raise InvalidParams(f"{param}: must not be empty", param=param)
    if "/" in n or "\\" in n or "\x00" in n or n.startswith("."):
        raise InvalidParams(f"{param}: {name!r} is not a plain file name in word_photos/", param=param)
    n = n if n.endswith(".md") else n + ".md"
    if len(n.encode("utf-8")) > 255:
        raise InvalidParams(f"{param}: longer than a file name may be (255 bytes)", param=param)
    return n


def render(title: str, body: str, when: datetime, tags: list[str], location: str | None) -> str:
    import yaml

    meta: dict = {"title": title, "date": to_storage(when)}
    if tags:
        meta["tags"] = list(tags)
    if location:
        meta["location"] = location
    front = yaml.safe_dump(meta, allow_unicode=True, sort_keys=False, width=10_000)
    return f"---\n{front}---\n\n{body.strip()}\n"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_bytes(path: Path) -> bytes:
    """The bytes of a plain file in the folder, never through a link (:func:`pps_core.atomic.read_plain`: a link
    could make a read return a file outside the folder, ``ln -s ../token word_photos/t.md``)."""
    try:
        return read_plain(path)
    except NotPlainFile as exc:
        raise Unreadable(str(exc).split(": ", 1)[-1]) from None
    except OSError as exc:
        raise Unreadable(f"cannot read: {exc.strerror or exc}") from None


def read_photo(path: Path, tz: ZoneInfo) -> Photo:
    """Parse one file; raises Unreadable for a file that cannot be used at all (links included)."""
    return photo_from_bytes(path.name, read_bytes(path), tz, path.stem)


def photo_from_bytes(filename: str, data: bytes, tz: ZoneInfo, stem: str | None = None) -> Photo:
    """Parse a word-photo's bytes (a file's, or a PostgreSQL row's); raises Unreadable as :func:`read_photo`."""
    digest = sha256(data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise Unreadable(f"not UTF-8 text (byte {exc.start})") from None
    if "\x00" in text:
        raise Unreadable("binary content (NUL bytes)")
    text = text.replace("\r\n", "\n")
    meta, body, warning = split_front_matter(text)
    title = _text(meta.get("title")) or _heading(body) or stem or filename.removesuffix(".md")
    if not body.strip() and not _text(meta.get("title")):
        raise Unreadable("empty")
    when, date_warning = _date(meta.get("date"), tz)
    tags = meta.get("tags") or []
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    tags = [str(t) for t in tags] if isinstance(tags, list) else []
    return Photo(filename=filename, title=title, body=body.strip(), sha256=digest, date=when,
                 tags=tags, location=_text(meta.get("location")), warning=warning or date_warning)


def split_front_matter(text: str) -> tuple[dict, str, str | None]:
    """(metadata, body, warning). A broken front matter is a warning; the whole text is then the body."""
    if not text.startswith("---\n"):
        return {}, text, None
    end = re.search(r"^(?:---|\.\.\.)[ \t]*$", text[4:], re.MULTILINE)
    if end is None:
        return {}, text, "front matter is not closed by '---'"
    import yaml

    raw = text[4:4 + end.start()]
    body = text[4 + end.end():].lstrip("\n")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: ~10x faster on the read path
    try:
        meta = yaml.load(raw, Loader=loader) if raw.strip() else {}
    except yaml.YAMLError as exc:
        return {}, text, f"front matter is not valid YAML: {str(exc).splitlines()[0]}"
    if not isinstance(meta, dict):
        return {}, text, "front matter is not a mapping of fields"
    return meta, body, None


def _text(value) -> str | None:
    if value is None:
        return None
    s = str(value).strip()
    return s or None


def _heading(body: str) -> str | None:
    m = re.search(r"^#\s+(.+)$", body, re.MULTILINE)
    return m.group(1).strip() if m else None


def _date(value, tz: ZoneInfo) -> tuple[str | None, str | None]:
    if value is None or value == "":
        return None, None
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime(value.year, value.month, value.day)
    else:
        try:
            s = str(value).strip()
            dt = datetime.fromisoformat(s[:-1] + "+00:00" if s.endswith(("Z", "z")) else s)
        except ValueError:
            return None, f"date {value!r} is not ISO 8601; the file's mtime is used"
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    try:
        dt.astimezone(tz)  # it is shown in the entity's zone: that must exist too
        return to_storage(dt), None
    except (OverflowError, ValueError):
        return None, f"date {value!r} is out of range; the file's mtime is used"


def chunks(photo: Photo, size: int) -> list[str]:
    """Texts to embed: the title, then the body in paragraph-aligned pieces of about ``size`` characters."""
    pieces: list[str] = []
    current = ""
    for para in re.split(r"\n\s*\n", photo.body):
        para = para.strip()
        while len(para) > size:
            cut = para.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            pieces.append(para[:cut].strip())
            para = para[cut:].strip()
        if current and len(current) + len(para) + 2 > size:
            pieces.append(current)
            current = ""
        current = f"{current}\n\n{para}" if current else para
    if current:
        pieces.append(current)
    return [f"{photo.title}\n\n{p}" for p in pieces] or [photo.title]
