"""The turn domain's suite: every test here runs on each turn store: SQLite (pps_sqlite), PostgreSQL (pps_postgres,
on a real server that ``pgserver`` starts: its ``pg_dsn``/``postgres_section`` fixtures come with the package's
pytest plugin). A test that only makes sense on one is marked ``@pytest.mark.backends("sqlite")``.

``PPS_TEST_BACKENDS=sqlite`` limits the run (e.g. on a machine without pps-postgres); the default is both.
"""

import os

import pytest

BACKENDS = tuple(b for b in os.environ.get("PPS_TEST_BACKENDS", "sqlite,postgres").split(",") if b)


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
    """The pps ``make_memory``, with the postgres plugin standing in for sqlite on the postgres backend."""
    if backend == "sqlite":
        return make_memory
    section = request.getfixturevalue("postgres_section")

    async def factory(entity: str = "testentity", *args, plugins=(), **settings):
        plugins = ["postgres" if p == "sqlite" else p for p in plugins]
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
        row = (await store.fetch(f"SELECT count(*) AS n, max(vector_dims(embedding)) AS d FROM {table}"))[0]
        return row["n"], row["d"]

    return count
