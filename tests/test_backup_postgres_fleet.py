"""``pps backup`` of an entity that a fleet serves (issue 37 item 6): another server keeps writing turns while one
server writes the archive; the manifest's counts are those of the rows copied (one snapshot), so ``pps restore``
into a fresh schema brings back every row and its count check passes."""

from __future__ import annotations

import json
import threading

from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures

from pps_core.testing.server import init_entity, pps, start_server


def test_a_backup_taken_while_another_server_writes_restores_with_equal_counts(tmp_path, postgres_section):  # noqa: F811
    section = postgres_section("lyra")
    roots = [tmp_path / "machine0", tmp_path / "machine1"]
    for root in roots:
        root.mkdir()
        init_entity(root, "lyra", "postgres,http", "[postgres]", f"dsn = {section['dsn']!r}",
                    f"schema = {section['schema']!r}")
    servers = [start_server(root, "--entity", "lyra") for root in roots]
    stop, written, errors = threading.Event(), [0], []

    def write() -> None:  # through the other server, all along
        while not stop.is_set():
            batch = [{"content": f"turn {written[0] + i} of a busy evening", "author_name": "Jeff",
                      "channel": "terminal:a"} for i in range(5)]
            try:
                answer = servers[1].call("store_messages", {"messages": batch}, entity="lyra")
            except Exception as exc:  # noqa: BLE001 - asserted below
                errors.append(repr(exc))
                return
            if answer.status_code != 200:
                errors.append(answer.text)
            written[0] += 5

    try:
        writer = threading.Thread(target=write)
        writer.start()
        try:
            while written[0] < 20 and writer.is_alive():
                stop.wait(0.05)
            archives = []
            for i in range(3):  # each backup races the writer
                archive = tmp_path / f"lyra{i}.tar.gz"
                pps(roots[0], "backup", str(archive), "--entity", "lyra")
                archives.append(archive)
        finally:
            stop.set()
            writer.join()
    finally:
        for server in servers:
            assert server.stop() in (0, -15)
    assert not errors and written[0] > 20
    for i, archive in enumerate(archives):  # each into a fresh schema of its own
        fresh = postgres_section(f"copy{i}")
        root = tmp_path / f"restore{i}"
        root.mkdir()
        init_entity(root, "lyra", "postgres,http", "[postgres]", f"dsn = {fresh['dsn']!r}",
                    f"schema = {fresh['schema']!r}")
        out = pps(root, "restore", str(archive), "--entity", "lyra", check=False)
        assert out.returncode == 0, out.stdout + out.stderr
        health = json.loads(pps(root, "call", "--entity", "lyra", "pps_health").stdout)
        assert health["layers"]["raw_capture"]["counts"]["messages"] > 0
