"""Issue 37, item 7: ``PPS_POSTGRES_SCHEMA`` (as the README documents) picks the schema; a bare ``SCHEMA`` variable,
which any shell or tool may set for its own reasons, does not."""

from pps_postgres.settings import PostgresSettings, schema_for


def test_the_documented_variable_picks_the_schema_and_a_bare_one_does_not(monkeypatch):
    monkeypatch.setenv("SCHEMA", "someone_elses")
    section = {"dsn": "postgresql://db.example/pps"}
    assert schema_for(PostgresSettings.from_section(section), "lyra") == "pps_lyra"
    monkeypatch.setenv("PPS_POSTGRES_SCHEMA", "lyra_live")
    assert schema_for(PostgresSettings.from_section(section), "lyra") == "lyra_live"
    # the environment is above pps.toml, as for every other PPS_POSTGRES_* setting
    assert schema_for(PostgresSettings.from_section({**section, "schema": "lyra_toml"}), "lyra") == "lyra_live"
    monkeypatch.delenv("PPS_POSTGRES_SCHEMA")
    assert schema_for(PostgresSettings.from_section({**section, "schema": "lyra_toml"}), "lyra") == "lyra_toml"
