"""Issue 37: PgBouncer in transaction mode is refused with a clear error, session mode works.

PPS keeps session state on its connections (``search_path`` set once per connection, session advisory locks for
fleet claims and index builds). Behind a transaction-pooling PgBouncer each transaction may run on another server
connection, so that state would silently apply to somebody else's transactions. A real PgBouncer (Debian's
``pgbouncer``; the test is skipped without it) in front of the test's PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

PGBOUNCER = shutil.which("pgbouncer") or ("/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None)
pytestmark = pytest.mark.skipif(PGBOUNCER is None, reason="pgbouncer is not installed (apt-get install pgbouncer)")


def _user() -> str:
    """Who pgbouncer runs as when the test runs as root: pgserver's user (its socket folder is that user's)."""
    import pwd

    try:
        return pwd.getpwnam("pgserver").pw_name
    except KeyError:
        return "nobody"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def pgbouncer(pg_dsn):
    """``start(mode)``: a PgBouncer on loopback in front of the session's PostgreSQL; its DSN."""
    procs: list[subprocess.Popen] = []
    folder = Path(tempfile.mkdtemp(prefix="pps-pgbouncer-"))
    folder.chmod(0o755)  # pgbouncer will not run as root: it runs as another user and reads its files here
    socket_dir = parse_qs(urlparse(pg_dsn).query)["host"][0]

    def start(mode: str) -> str:
        port = _free_port()
        ini = folder / f"{mode}.ini"
        (folder / "users.txt").write_text('"postgres" ""\n')
        ini.write_text(f"""[databases]
* = host={socket_dir}
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {port}
unix_socket_dir =
auth_type = trust
auth_file = {folder}/users.txt
pool_mode = {mode}
default_pool_size = 20
max_client_conn = 200
ignore_startup_parameters = extra_float_digits,options
""")
        for f in folder.iterdir():
            f.chmod(0o644)
        cmd = [PGBOUNCER, str(ini)] + (["-u", _user()] if os.geteuid() == 0 else [])
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            pytest.fail("pgbouncer did not start")
        return f"postgresql://postgres@127.0.0.1:{port}/postgres"

    yield start
    for p in procs:
        p.terminate()
        p.wait(10)
    shutil.rmtree(folder, ignore_errors=True)


async def test_transaction_pooling_is_refused_and_session_pooling_works(make_memory, postgres_section, pgbouncer,
                                                                         tmp_path):
    section = postgres_section("lyra")
    through = {**section, "dsn": pgbouncer("transaction")}
    m = await make_memory("lyra", home=tmp_path / "a", plugins=["postgres"], postgres=through)
    health = await m.layer("raw_capture").health()
    assert not health.available
    assert "transaction" in health.detail and "pool_mode = session" in health.detail, health.detail
    await m.close()

    kept = {**section, "dsn": pgbouncer("session")}
    m = await make_memory("lyra", home=tmp_path / "b", plugins=["postgres"], postgres=kept)
    assert (await m.layer("raw_capture").health()).available
    await m.call("store_message", {"content": "through a session pooler", "author_name": "Jeff", "channel": "t"})
    assert (await m.call("raw_search", {"query": "session pooler"}))["count"] == 1
