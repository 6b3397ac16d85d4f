"""One entity = one settings object: init args > env ``PPS_*`` > ``<home>/pps.toml`` > defaults."""

from __future__ import annotations

import contextvars
import os
import tomllib
from pathlib import Path
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic_settings import BaseSettings, InitSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict

from .errors import ConfigError
from .models import SectionConfig
from .params import StorePath
from .privacy import SecretPatternError, SecretScanner

_FILE_VALUES: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("pps_file_values",
                                                                                    default=None)


class LateNight(BaseModel):
    """Lines under the startup clock late at night, in the entity's own voice: none unless configured
    (``[startup.late_night] asleep = "..."``, as the demo entity has it). The kernel keeps the hours, never the
    words."""

    asleep: str | None = Field(None, description="shown 1:00-4:59")
    late: str | None = Field(None, description="shown 23:00-0:59")


class StartupConfig(BaseModel):
    #: Keys of older configs stay readable by the plugin they belong to (``model_extra``): ``recap = false``.
    model_config = ConfigDict(extra="allow")

    clock: bool = True
    late_night: LateNight | None = Field(default_factory=LateNight)
    health: bool = True
    manifest: bool = True
    sections: list[SectionConfig] | None = Field(
        None, description="the whole package, in order; None = every loaded layer's default sections")
    add: list[SectionConfig] = Field(default_factory=list, description="sections added after the defaults")
    omit: list[str] = Field(default_factory=list, description="section or layer names left out of the package")
    #: The original design's package is 15,000-50,000 characters (reference/000, "Typical Response Size"); 20,000
    #: (about 5,000 tokens) keeps its every section and about fifteen turns of 1,000 characters, and a bulk import
    #: no longer turns "every unsummarized turn" into 300,000 characters. What is cut is listed with its call.
    budget: int = Field(20_000, ge=0, description="most characters of a startup package that names no budget, on "
                                                  "every path (MCP, HTTP, pps call, pps://startup, wake_up); "
                                                  "0 = no limit")


class RecallConfig(BaseModel):
    budget: int = Field(6_000, ge=0, description="most characters of a search recall that names no budget "
                                                 "(0 = no limit)")
    layer_timeout_s: float = Field(3.0, gt=0, description="per-layer timeout (recall, health) for a layer that has "
                                                        "answered before in this process: one past it is stuck")
    warmup_timeout_s: float = Field(60.0, gt=0, description="the budget of a layer's first answer of a kind in a "
                                                            "process (a cold start loads its model, starts its "
                                                            "index): past it the layer is reported as warming up")
    layer_budget_ms: dict[str, float] = Field(
        default_factory=dict, description="layer -> its own time budget in a non-startup recall, in milliseconds "
                                          "(over layer_timeout_s): the layers search at once, and one past its "
                                          "budget is reported as a timeout while the others answer")

    @field_validator("layer_budget_ms")
    @classmethod
    def _positive_budgets(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [name for name, ms in v.items() if not ms > 0 or ms == float("inf")]
        if bad:
            raise ValueError(f"budgets must be positive finite milliseconds: {', '.join(sorted(bad))}")
        return v
    layers: list[str] | None = Field(None, description="layers searched by non-startup recall; None = all")
    skip_in_text: list[str] = Field(default_factory=list, description="layers searched but not rendered")
    min_score: dict[str, float] = Field(default_factory=dict,
                                        description="layer -> lowest score shown in recall (overrides the layer's "
                                                    "own min_recall_score)")


class Limits(BaseModel):
    max_content_chars: int = Field(100_000, ge=1, description="longest turn or document accepted")
    max_batch: int = Field(1_000, ge=1, description="most turns in one store_messages call")
    max_request_bytes: int = Field(8 * 1024 * 1024, ge=1024)
    max_page: int = Field(1_000, ge=1, description="most items one read returns")


class BackupConfig(BaseModel):
    """Where ``pps_backup`` may write when asked over the wire (the CLI moves its archive anywhere after)."""

    dir: StorePath = Field("backups", description="folder under the entity's home for archives (never backed up)")
    allowed_dirs: list[str] = Field(default_factory=list,
                                    description="absolute folders outside the home where archives may be written")


class PrivacyConfig(BaseModel):
    """``[privacy]``: what the one capture filter replaces besides ``<private>`` spans (pps_core.privacy)."""

    secrets: bool = Field(True, description="replace detected secrets (API keys, tokens, private keys, passwords "
                                            "assigned in text) by [secret:<kind>] before anything is stored")
    secret_patterns: dict[str, str] = Field(
        default_factory=dict, description="name -> regex of more secrets to replace by [secret:<name>] (a group "
                                          "named 'secret' replaces only that part)")

    @field_validator("secret_patterns")
    @classmethod
    def _valid_patterns(cls, v: dict[str, str]) -> dict[str, str]:
        try:
            SecretScanner.build(v)
        except SecretPatternError as exc:
            raise ValueError(str(exc)) from None
        return v

    def scanner(self) -> SecretScanner:
        return SecretScanner.build(self.secret_patterns, enabled=self.secrets)


def _system_timezone() -> str:
    tz = os.environ.get("TZ")
    if tz and "/" in tz:
        return tz.lstrip(":")
    try:
        target = os.path.realpath("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return "UTC"


class _FileSource(InitSettingsSource):
    """The entity's pps.toml, read below the environment."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls, dict(_FILE_VALUES.get() or {}))


class PluginSettings(BaseSettings):
    """Base for a plugin's own settings section: init > env (its own prefix) > ``[section]`` of pps.toml.

    A field spelled differently in pps.toml (``schema_name``, alias ``schema``) is read from the environment under
    the prefix too (``PPS_POSTGRES_SCHEMA``), never from the bare alias (``SCHEMA``)."""

    model_config = SettingsConfigDict(extra="ignore", env_nested_delimiter="__", env_prefix_target="all")

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings],
                                   init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource,
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _FileSource(settings_cls))

    @classmethod
    def from_section(cls, section: dict[str, Any] | None, **overrides: Any) -> Self:
        token = _FILE_VALUES.set(dict(section or {}))
        try:
            return cls(**overrides)
        finally:
            _FILE_VALUES.reset(token)


S = TypeVar("S", bound=PluginSettings)


def _default_plugins() -> list[str]:
    from .hookspecs import default_plugins

    return default_plugins()


class EntitySettings(PluginSettings):
    """Everything that makes one entity: names, home, plugins, startup composition, zone, limits."""

    model_config = SettingsConfigDict(env_prefix="PPS_", extra="allow", env_nested_delimiter="__")

    entity: str = Field("default", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    home: Path
    identity: str | None = Field(None, description="one line shown at the top of a budgeted recall")
    plugins: list[str] = Field(default_factory=_default_plugins,
                               description="plugin names, in order; default: those installed that say so (PPS_DEFAULT)")
    timezone: str = Field(default_factory=_system_timezone)
    startup: StartupConfig = Field(default_factory=StartupConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    rankers: dict[str, list[str]] = Field(default_factory=dict, description="layer -> ranker names, in order")
    limits: Limits = Field(default_factory=Limits)
    backup: BackupConfig = Field(default_factory=BackupConfig)
    privacy: PrivacyConfig = Field(default_factory=PrivacyConfig)

    @field_validator("entity", mode="before")
    @classmethod
    def _entity_name(cls, value: object) -> object:
        if isinstance(value, str) and not _valid_name(value):  # said in words, before the pattern's regex
            raise ValueError(f"{value[:80]!r} is not an entity name: use letters, digits, '.', '_' and '-', "
                             "starting with a letter or digit, at most 64 characters (e.g. 'lyra')")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (use an IANA name like 'America/Chicago')") from None
        return value

    def section(self, name: str) -> dict[str, Any]:
        """The raw ``[name]`` table of pps.toml (a plugin's own settings section)."""
        extra = self.model_extra or {}
        value = extra.get(name) or {}
        return value if isinstance(value, dict) else {}

    def section_with_env(self, name: str) -> dict[str, Any]:
        """The ``[name]`` table with what the environment sets under ``PPS_<NAME>_`` over it (``PPS_POSTGRES_DSN``
        is ``dsn``), as the plugin that owns the section reads it: for a plugin defaulting to another's settings (a
        store's ``dsn`` defaulting to ``[postgres]``'s), so both land where the operator said."""
        values = dict(self.section(name))
        prefix = f"PPS_{name.upper()}_"
        for key, value in os.environ.items():
            if key.startswith(prefix) and len(key) > len(prefix) and "__" not in key[len(prefix):]:
                values[key[len(prefix):].lower()] = value
        return values

    def redirected(self, name: str, key: str) -> str | None:
        """What the environment sets for ``[name] key`` (``PPS_<NAME>_<KEY>``) when it differs from pps.toml's: the
        operator pointed that section elsewhere (a restore into another database); None otherwise."""
        told = self.section_with_env(name).get(key)
        return str(told) if told is not None and told != self.section(name).get(key) else None

    def database_place(self, layer: str, dsn: str, schema: str, shared: str) -> tuple[str, str]:
        """``(dsn, schema)`` of a layer kept in a shared SQL database beside the turns: its own ``[layer] dsn`` /
        ``schema`` (given), each defaulting to ``[shared]``'s (``PPS_<SHARED>_*`` too), the schema to
        :func:`database_schema` of the entity. Every layer in the database names its schema by this one rule."""
        common = self.section_with_env(shared)
        dsn = dsn or str(common.get("dsn") or "")
        if not dsn:
            raise ConfigError(f'{layer}.dsn: store = "{shared}" needs a dsn (or a [{shared}] dsn), e.g. '
                              f'"postgresql://pps@db/pps"')
        name = schema or str(common.get("schema") or "") or database_schema(self.entity)
        return dsn, checked_schema(name, f"{layer}.schema")

    def follows(self, layer: str, own: dict[str, str], name: str) -> None:
        """Refuse (:class:`ConfigError`) when ``[name]``'s ``dsn``/``schema`` was pointed elsewhere by the environment
        (:meth:`redirected`) while ``layer``'s own value of that key (``own``, from ``[layer]`` or ``PPS_<LAYER>_*``)
        names another place: its data would not land where the operator said."""
        for key, value in own.items():
            told = self.redirected(name, key)
            if told is not None and value and value != told:
                raise ConfigError(
                    f"[{layer}] {key} names another place than PPS_{name.upper()}_{key.upper()}: the {layer} rows "
                    f"would land elsewhere than the rest; set PPS_{layer.upper()}_{key.upper()} to the same value, "
                    f"or remove [{layer}] {key}")

    def plugin_settings(self, cls: type[S], section: str, **overrides: Any) -> S:
        """``cls`` (a :class:`PluginSettings`) read from the ``[section]`` table of pps.toml.

        A bad value is a :class:`ConfigError` naming ``[section] field`` (one line, no traceback)."""
        try:
            return cls.from_section(self.section(section), **overrides)
        except ValueError as exc:
            raise ConfigError(f"invalid [{section}] settings for entity at {self.home}: {_brief(exc)}") from None


def misspelled(settings: EntitySettings) -> list[tuple[str, str]]:
    """Top-level keys and tables of pps.toml that nothing reads and that look like a misspelling of one something
    does read: ``(written, meant)`` pairs, e.g. ``("timezon", "timezone")``. Known names are the kernel's
    settings and the installed plugins' names (a plugin's section is named as the plugin); a key close to none of
    them (a third-party plugin's own section) is left alone."""
    import difflib
    from importlib.metadata import entry_points

    known = set(EntitySettings.model_fields) | {ep.name.replace("-", "_") for ep in entry_points(group="pps.plugins")}
    out = []
    for key in sorted(settings.model_extra or {}):
        if key in known:
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.8)
        if close:
            out.append((key, close[0]))
    return out


def settings_check(settings: EntitySettings) -> tuple[str, str, str] | None:
    """``pps doctor``'s line for pps.toml's own spelling (entry point group ``pps.checks``)."""
    found = misspelled(settings)
    if not found:
        return None
    return "warn", "settings", "; ".join(f"`{k}` in pps.toml is read by nothing: did you mean `{m}`?"
                                         for k, m in found)


def pps_root() -> Path:
    return Path(os.environ.get("PPS_ROOT") or Path.home() / ".pps").expanduser()


def entity_home(entity: str | None = None, home: str | Path | None = None) -> Path:
    if home:
        return Path(home).expanduser().resolve()
    if os.environ.get("PPS_HOME"):
        return Path(os.environ["PPS_HOME"]).expanduser().resolve()
    name = entity or os.environ.get("PPS_ENTITY") or "default"
    return (pps_root() / name).resolve()


def read_toml(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (tomllib.TOMLDecodeError, OSError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from None


def load_settings(entity: str | None = None, home: str | Path | None = None, *, must_exist: bool = False,
                  **overrides: Any) -> EntitySettings:
    """Settings for one entity. ``entity``/``home`` select it; ``overrides`` win over everything.

    With ``must_exist`` (the CLI, servers, hooks) an entity without a ``pps.toml`` is an error, so a
    misspelled name never quietly starts a new, empty memory.
    """
    path = entity_home(entity, home)
    if must_exist and not (path / "pps.toml").exists():
        known = sorted(p.parent.name for p in pps_root().glob("*/pps.toml"))
        name = entity or os.environ.get("PPS_ENTITY") or path.name
        raise ConfigError(f"no entity {name!r} at {path}: run `pps init --entity {name}` first"
                          + (f" (entities in {pps_root()}: {', '.join(known)})" if known else ""))
    values = read_toml(path / "pps.toml")
    if entity:
        overrides.setdefault("entity", entity)
    elif "entity" not in values and not os.environ.get("PPS_ENTITY"):
        overrides.setdefault("entity", path.name if _valid_name(path.name) else "default")
    try:
        return EntitySettings.from_section(values, home=path, **overrides)
    except ValueError as exc:
        raise ConfigError(f"invalid settings for entity at {path}: {_brief(exc)}") from None


def validate_values(values: dict[str, Any], home: Path) -> EntitySettings:
    """Check settings values (``pps init`` does, before it writes them); ConfigError names the field."""
    try:
        return EntitySettings.from_section(values, home=home)
    except ValueError as exc:
        raise ConfigError(f"invalid settings for entity at {home}: {_brief(exc)}") from None


def _brief(exc: ValueError) -> str:
    """'timezone: unknown time zone ...' rather than pydantic's multi-line report with a URL."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ())) or "settings"
        parts.append(f"{where}: {err.get('msg', '').removeprefix('Value error, ')}")
    return "; ".join(parts)


def _valid_name(name: str) -> bool:
    import re

    return bool(re.match(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$", name))


#: The longest SQL identifier PostgreSQL keeps (bytes; longer ones are cut silently).
IDENTIFIER_MAX = 63


def database_schema(entity: str) -> str:
    """The default schema of an entity in a shared SQL database (PostgreSQL), the one rule every layer kept there
    follows (turns, crystals, word-photos, the recap): ``pps_`` + the name folded to [a-z0-9_]; a digest of the
    name is added when folding changed it ('Lyra.x' and 'lyra_x' must not share tables) or when it had to be cut
    to :data:`IDENTIFIER_MAX`."""
    import hashlib
    import re

    folded = "pps_" + re.sub(r"[^a-z0-9_]", "_", entity.lower())
    if folded == "pps_" + entity and len(folded) <= IDENTIFIER_MAX:
        return folded
    digest = hashlib.sha1(entity.encode()).hexdigest()[:8]
    return folded[:IDENTIFIER_MAX - len(digest) - 1] + "_" + digest


def checked_schema(name: str, key: str) -> str:
    """``name`` if it is a plain identifier the database keeps whole; else :class:`ConfigError` naming ``key``."""
    import re

    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,62}", name):
        raise ConfigError(f"{key}: {name!r} is not a plain identifier (letters, digits, _; at most 63)")
    return name
