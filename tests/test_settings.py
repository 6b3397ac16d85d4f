import pytest

from pps_core.errors import ConfigError
from pps_core.settings import EntitySettings, PluginSettings, load_settings


def write_toml(home, text):
    home.mkdir(parents=True, exist_ok=True)
    (home / "pps.toml").write_text(text)


def test_defaults_name_the_entity_and_leave_the_package_to_the_layers(pps_home):
    s = load_settings("lyra", pps_home)
    assert s.entity == "lyra" and "focal_entity" not in EntitySettings.model_fields  # the graph plugin's
    assert s.startup.sections is None and s.startup.add == [] and s.startup.omit == []


def test_precedence_init_over_env_over_toml_over_defaults(pps_home, monkeypatch):
    write_toml(pps_home, 'timezone = "Europe/Paris"\nidentity = "FromToml"\n')
    s = load_settings("lyra", pps_home)
    assert s.timezone == "Europe/Paris" and s.identity == "FromToml"
    monkeypatch.setenv("PPS_IDENTITY", "FromEnv")
    s = load_settings("lyra", pps_home)
    assert s.identity == "FromEnv" and s.timezone == "Europe/Paris"
    s = load_settings("lyra", pps_home, identity="FromInit")
    assert s.identity == "FromInit" and s.timezone == "Europe/Paris"


def test_nested_env_reaches_startup_composition(pps_home, monkeypatch):
    write_toml(pps_home, "[limits]\nmax_batch = 7\n")
    monkeypatch.setenv("PPS_LIMITS__MAX_PAGE", "33")
    s = load_settings("lyra", pps_home)
    assert s.limits.max_batch == 7 and s.limits.max_page == 33


def test_plugin_section_precedence(pps_home, monkeypatch):
    class ThingSettings(PluginSettings, env_prefix="PPS_THING_"):
        size: int = 1
        colour: str = "red"

    write_toml(pps_home, "[thing]\nsize = 5\ncolour = 'green'\n")
    s = load_settings("lyra", pps_home)
    assert s.plugin_settings(ThingSettings, "thing").size == 5
    monkeypatch.setenv("PPS_THING_SIZE", "9")
    got = s.plugin_settings(ThingSettings, "thing")
    assert (got.size, got.colour) == (9, "green")
    assert s.plugin_settings(ThingSettings, "thing", size=2).size == 2


def test_unknown_timezone_is_a_clear_error(pps_home):
    write_toml(pps_home, 'timezone = "Mars/Olympus"\n')
    with pytest.raises(ConfigError, match="unknown time zone 'Mars/Olympus'"):
        load_settings("lyra", pps_home)


def test_broken_toml_names_the_file(pps_home):
    write_toml(pps_home, "plugins = [unclosed\n")
    with pytest.raises(ConfigError, match="pps.toml"):
        load_settings("lyra", pps_home)


def test_two_entities_keep_their_own_plugin_sets(tmp_path):
    write_toml(tmp_path / "a", 'plugins = ["sqlite"]\n')
    write_toml(tmp_path / "b", 'plugins = ["crystals"]\ntimezone = "Asia/Tokyo"\n')
    a, b = load_settings("a", tmp_path / "a"), load_settings("b", tmp_path / "b")
    assert a.plugins == ["sqlite"] and b.plugins == ["crystals"]
    assert a.timezone != b.timezone


def test_a_plugin_setting_spelled_differently_in_pps_toml_is_read_under_the_plugins_prefix(monkeypatch):
    """Issue 37: a field with an alias (``schema_name``, written ``schema`` in pps.toml) is read from
    ``PPS_<PLUGIN>_SCHEMA``, never from a bare ``SCHEMA`` of the environment."""
    from pydantic import Field

    from pps_core import PluginSettings

    class Spelled(PluginSettings, env_prefix="PPS_SPELLED_"):
        schema_name: str = Field("", alias="schema")

    monkeypatch.setenv("SCHEMA", "not_mine")
    assert Spelled.from_section({}).schema_name == ""
    assert Spelled.from_section({"schema": "from_toml"}).schema_name == "from_toml"
    monkeypatch.setenv("PPS_SPELLED_SCHEMA", "from_env")
    assert Spelled.from_section({"schema": "from_toml"}).schema_name == "from_env"


def test_a_misspelled_section_or_key_is_named_with_what_was_meant(pps_home):
    """A `[postgress]` table or a `timezon` key was accepted and silently ignored (its settings never applied);
    `pps doctor` now says which was meant. A third party's own section, close to no known name, is left alone."""
    from pps_core.settings import misspelled, settings_check

    home = pps_home / "lyra"
    home.mkdir(parents=True)
    (home / "pps.toml").write_text('timezon = "UTC"\n\n[postgress]\ndsn = "postgresql://x"\n\n[embedding]\n'
                                   'provider = "onnx"\n\n[acme_memory]\nsize = 3\n\n[postgres]\nschema = "s"\n')
    settings = load_settings(home=home)
    assert misspelled(settings) == [("embedding", "embeddings"), ("postgress", "postgres"), ("timezon", "timezone")]
    status, name, detail = settings_check(settings)
    assert status == "warn" and "did you mean `postgres`?" in detail and "acme_memory" not in detail
    (home / "pps.toml").write_text('timezone = "UTC"\n\n[postgres]\nschema = "s"\n')
    assert settings_check(load_settings(home=home)) is None
