from pps_postgres.testing import pg_dsn, postgres_section  # noqa: F401 - fixtures
