"""``minute_text`` writes what ``strftime("%Y-%m-%d %H:%M")`` writes (the startup package renders every
unsummarized turn's time with it, issue 26): the same bytes in every zone, for every year a turn can carry."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from pps_core.timeutil import minute_text, render_day, render_minute, to_storage


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe",
                                  "Europe/Amsterdam", "Pacific/Kiritimati"])
def test_minute_text_is_strftime(zone: str) -> None:
    tz = ZoneInfo(zone)
    rng = random.Random(zone)
    start = datetime(2, 1, 1, tzinfo=UTC)
    for _ in range(3000):
        dt = (start + timedelta(seconds=rng.randrange(0, 9996 * 365 * 86400))).astimezone(tz)
        assert minute_text(dt) == dt.strftime("%Y-%m-%d %H:%M")
        stored = to_storage(dt)
        assert render_minute(stored, tz) == dt.strftime("%Y-%m-%d %H:%M")
        assert render_day(stored, tz) == dt.strftime("%Y-%m-%d")
