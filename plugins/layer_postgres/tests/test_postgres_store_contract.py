"""The PostgreSQL store passes the turn store contract (pps_turns.testing), called directly, on a real server."""

from pps_postgres import retrieval
from pps_postgres.settings import PostgresSettings
from pps_postgres.store import PostgresStore
from pps_turns.testing import TurnStoreContract


class TestPostgresStoreContract(TurnStoreContract):
    async def open_store(self, tmp_path, request):
        section = request.getfixturevalue("postgres_section")("contract")
        return PostgresStore(PostgresSettings(**section), "contract")


async def test_a_channel_too_large_to_scan_whole_gives_the_same_best(postgres_section, monkeypatch):
    """``channel_similarities`` on a channel past ``CHANNEL_SCAN`` (every channel here): its nearest by their own
    vector from a channel-filtered scan, rescored with context, give the contract's answer on a small history."""
    monkeypatch.setattr(retrieval, "CHANNEL_SCAN", 1)
    store = PostgresStore(PostgresSettings(**postgres_section("large")), "large")
    await store.open()
    try:
        await TurnStoreContract().test_a_channels_own_best_by_meaning_are_drawn_however_far_down_the_whole_history(
            store)
    finally:
        await store.close()
