"""Timestamps: stored as UTC ISO-8601 (one format), rendered in the entity's zone, naive input read there."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from .errors import InvalidParams

#: The one stored format: millisecond precision, always UTC, always 'Z' (sortable as text).
STORAGE_FORMAT_HINT = "ISO 8601, e.g. 2026-01-26T07:30:00 (entity's zone) or 2026-01-26T07:30:00-05:00"

_RELATIVE = re.compile(r"^\s*(\d+)\s*(m|min|h|d|w)\s*$", re.IGNORECASE)
_UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days", "w": "weeks"}
#: Timestamps outside these years are refused: every zone (UTC-12..UTC+14) can render what is inside.
MIN_YEAR, MAX_YEAR = 2, 9998


def now_utc() -> datetime:
    return datetime.now(UTC)


def to_storage(dt: datetime) -> str:
    """Canonical stored form: '2026-01-26T14:23:05.123Z'."""
    dt = dt.astimezone(UTC)
    # Not strftime: glibc writes year 999 as '999', which neither sorts nor parses back.
    return (f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}."
            f"{dt.microsecond // 1000:03d}Z")


def from_storage(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(UTC)


def parse_timestamp(value: str | datetime, tz: ZoneInfo, param: str = "timestamp", *,
                    relative: bool = False) -> datetime:
    """Parse user input to an aware UTC datetime; naive input is read in the entity's zone.

    With ``relative``, '24h', '7d', '30m' and '2w' mean that long before now.
    """
    if isinstance(value, datetime):
        dt = value
    else:
        if not isinstance(value, str) or not value.strip():
            raise InvalidParams(f"{param}: expected {STORAGE_FORMAT_HINT}, got {value!r}", param=param)
        text = value.strip()
        if relative:
            m = _RELATIVE.match(text)
            if m:
                try:
                    return now_utc() - timedelta(**{_UNITS[m.group(2).lower()]: int(m.group(1))})
                except (OverflowError, ValueError):
                    raise InvalidParams(f"{param}: {value!r} reaches before the year 1", param=param) from None
        try:
            dt = datetime.fromisoformat(text.replace("z", "Z").replace("Z", "+00:00") if text.endswith(("Z", "z")) else text)
        except ValueError:
            hint = " or a duration like '24h', '7d'" if relative else ""
            raise InvalidParams(f"{param}: cannot parse {value!r}; expected {STORAGE_FORMAT_HINT}{hint}",
                                param=param) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz)
    try:
        utc = dt.astimezone(UTC)
    except (OverflowError, ValueError):
        utc = None
    if utc is None or not MIN_YEAR <= utc.year <= MAX_YEAR:
        raise InvalidParams(f"{param}: {value!r} is out of range (years {MIN_YEAR:04d} to {MAX_YEAR})",
                            param=param) from None
    return utc


def local(value: str | datetime, tz: ZoneInfo) -> datetime:
    """In the entity's zone; a stored time the zone cannot render (an older version's edge-of-calendar row)
    stays in UTC rather than failing the read."""
    # a stored time carries its offset: converted once, straight to the zone (from_storage's UTC step is the same)
    dt = datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else value
    try:
        return dt.astimezone(tz)
    except (OverflowError, ValueError):
        return dt


def minute_text(dt: datetime) -> str:
    """``dt`` as '2026-01-26 14:23' (its own zone): what ``strftime("%Y-%m-%d %H:%M")`` writes, at a third of the
    cost (the startup package renders every unsummarized turn's time); strftime for years before 1000, which glibc
    writes unpadded."""
    return dt.isoformat(" ", "minutes")[:16] if dt.year >= 1000 else dt.strftime("%Y-%m-%d %H:%M")


def render_minute(value: str, tz: ZoneInfo) -> str:
    """'2026-01-26 14:23' in the entity's zone (the turn-line format of the startup package)."""
    return minute_text(local(value, tz))


def render_day(value: str, tz: ZoneInfo) -> str:
    return minute_text(local(value, tz))[:-6]


def render_iso_local(value: str, tz: ZoneInfo) -> str:
    """Full ISO-8601 in the entity's zone, offset included: what JSON answers show."""
    return local(value, tz).isoformat(timespec="seconds")
