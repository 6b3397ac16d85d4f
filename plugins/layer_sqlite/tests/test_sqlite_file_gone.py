"""The database file deleted or replaced under a running memory: writes are refused (503), health says so,
and nothing is acknowledged into a file that is gone."""

import os
import shutil

import pytest

from pps_core import Unavailable

TURN = {"content": "a turn", "author_name": "Jeff", "channel": "terminal"}


async def test_deleted_database_refuses_writes_and_fails_health(make_memory):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_message", TURN)
    assert (await m.call("pps_health"))["ok"]
    os.unlink(m.home / "pps.db")
    with pytest.raises(Unavailable) as refused:
        await m.call("store_message", {**TURN, "content": "into the void"})
    assert refused.value.status == 503 and "deleted" in refused.value.message
    health = await m.call("pps_health")
    assert not health["ok"]
    for layer in ("raw_capture", "message_summaries"):
        assert not health["layers"][layer]["available"]
        assert "deleted" in health["layers"][layer]["detail"]


async def test_replaced_database_refuses_writes(make_memory, tmp_path):
    m = await make_memory(plugins=["sqlite"])
    await m.call("store_message", TURN)
    copy = tmp_path / "copy.db"
    shutil.copy(m.home / "pps.db", copy)
    os.replace(copy, m.home / "pps.db")
    with pytest.raises(Unavailable) as refused:
        await m.call("store_message", TURN)
    assert "replaced" in refused.value.message
    assert not (await m.call("pps_health"))["layers"]["raw_capture"]["available"]
