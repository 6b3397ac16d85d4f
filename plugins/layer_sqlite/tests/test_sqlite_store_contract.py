"""The SQLite store passes the turn store contract (pps_turns.testing), called directly."""

from pps_sqlite.db import Database
from pps_sqlite.store import SQLiteStore
from pps_turns.testing import TurnStoreContract


class TestSQLiteStoreContract(TurnStoreContract):
    async def open_store(self, tmp_path, request):
        return SQLiteStore(Database(tmp_path / "pps.db"), tmp_path)
