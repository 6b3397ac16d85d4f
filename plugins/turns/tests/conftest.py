"""The turn-operation suite: every test here runs on each turn store, through the operations and layers of
pps_turns: SQLite (pps_sqlite), PostgreSQL (pps_postgres, on a real server that ``pgserver`` starts: its
``pg_dsn``/``postgres_section`` fixtures come with that package's pytest plugin) and the in-memory example
(examples/pps_memstore). Tests are written with ``plugins=["sqlite"]``; each backend's plugin stands in for it.
A test that needs what only some stores have is marked ``@pytest.mark.backends(...)``.

``PPS_TEST_BACKENDS=sqlite`` limits the run (e.g. on a machine without pps-postgres); the default is all three.
"""

import os

import pytest

BACKENDS = tuple(b for b in os.environ.get("PPS_TEST_BACKENDS", "sqlite,postgres,memstore").split(",") if b)


def pytest_configure(config):
    config.addinivalue_line("markers", "backends(*names): run this test only on these turn-store backends")


def pytest_generate_tests(metafunc):
    if "make_memory" in metafunc.fixturenames:
        marker = metafunc.definition.get_closest_marker("backends")
        names = [b for b in BACKENDS if marker is None or b in marker.args]
        metafunc.parametrize("backend", names, indirect=True)


@pytest.fixture
def backend(request):
    return request.param


@pytest.fixture
def make_memory(make_memory, backend, request):
    """The pps ``make_memory``, with the backend's plugin standing in for sqlite."""
    if backend == "sqlite":
        return make_memory
    section = request.getfixturevalue("postgres_section") if backend == "postgres" else None

    async def factory(entity: str = "testentity", *args, plugins=(), **settings):
        plugins = [backend if p == "sqlite" else p for p in plugins]
        if section is not None:
            settings.setdefault("postgres", section(entity))
        return await make_memory(entity, *args, plugins=plugins, **settings)

    return factory


@pytest.fixture
def stored_vectors(backend):
    """``await stored_vectors(memory, "message_vectors")``: (rows, dimension) of a vector table, on either store."""

    async def count(memory, table: str) -> tuple[int, int | None]:
        store = memory.require_layer("raw_capture").backend  # the adapter's own tables: test-only access
        if backend == "sqlite":
            return await store.db.run(lambda c: tuple(c.execute(
                f"SELECT COUNT(*), MAX(LENGTH(vector)) / 4 FROM {table}").fetchone()), store.db.conn)
        if backend == "memstore":
            kept = store.d["tv" if table == "message_vectors" else "sv"].values()
            return len(kept), max((len(v) // 4 for _m, v in kept), default=None)
        row = (await store.fetch(f"SELECT count(*) AS n, max(vector_dims(embedding)) AS d FROM {table}"))[0]
        return row["n"], row["d"]

    return count
