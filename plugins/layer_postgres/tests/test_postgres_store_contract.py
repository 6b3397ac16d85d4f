"""The PostgreSQL store passes the turn store contract (pps_turns.testing), called directly, on a real server."""

from pps_postgres.settings import PostgresSettings
from pps_postgres.store import PostgresStore
from pps_turns.testing import TurnStoreContract


class TestPostgresStoreContract(TurnStoreContract):
    async def open_store(self, tmp_path, request):
        section = request.getfixturevalue("postgres_section")("contract")
        return PostgresStore(PostgresSettings(**section), "contract")
