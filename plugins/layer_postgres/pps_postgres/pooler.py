"""A pooler in transaction mode (PgBouncer ``pool_mode = transaction``) is refused with a clear error.

PPS keeps session state on its connections: ``search_path`` and ``synchronous_commit`` set once per connection,
session advisory locks for fleet claims (``Memory.claim``) and index builds. Through a transaction-pooling
PgBouncer each transaction may run on another server connection, so that state would apply to other clients'
transactions and the locks would not be held: refused, not half-supported. Session pooling keeps all of it.

How it is told, without asking the pooler (its admin console is another database): a setting made on one
connection must still be there for that connection's next transaction while another client holds a transaction
open (which takes the server connection the first one just released, as PgBouncer hands out the most recently
used one).
"""

from __future__ import annotations

import os

from pps_core.errors import ConfigError

REFUSED = ("[postgres] dsn leads to a connection pooler in transaction mode (PgBouncer pool_mode = transaction?): "
           "PPS keeps session state on its connections (search_path, advisory locks for claims and index builds), "
           "which such a pooler hands to other clients. Point the dsn at PostgreSQL itself, or at a PgBouncer "
           "database with pool_mode = session")


async def refuse_transaction_pooling(dsn: str, connect_timeout_s: float) -> None:
    """:class:`ConfigError` (:data:`REFUSED`) when ``dsn`` keeps no session state across transactions."""
    import psycopg

    timeout = max(1, int(connect_timeout_s))
    mark = os.urandom(8).hex()  # (not the secrets module: bench/ has a secrets.py on its path)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=timeout,
                                                     prepare_threshold=None) as one:
        await one.execute("SELECT set_config('pps.session_probe', %s, false)", (mark,))
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True, connect_timeout=timeout,
                                                         prepare_threshold=None) as other:
            async with other.transaction():
                await other.execute("SELECT 1")
                row = await (await one.execute("SELECT current_setting('pps.session_probe', true)")).fetchone()
    if row is None or row[0] != mark:
        raise ConfigError(REFUSED)
