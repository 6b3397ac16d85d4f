"""The chroma plugin's settings: ``[chroma]`` in pps.toml, ``PPS_CHROMA_*`` in the environment."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr

from pps_core import PluginSettings, StorePath


class ChromaSettings(PluginSettings, env_prefix="PPS_CHROMA_"):
    store: Literal["files", "postgres"] = Field(
        "files", description="files = markdown files in the home, indexed in Chroma (mode); postgres = rows and "
                             "pgvector columns of the entity's schema, shared by every server (pip install "
                             "'pps[postgres]')")
    dsn: str = Field("", description="store = postgres: libpq connection string; default: [postgres] dsn")
    schema_name: str = Field("", alias="schema", max_length=63,
                             description="store = postgres: the schema; default: [postgres] schema, else pps_<entity>")
    directory: StorePath = Field("word_photos", description="folder of word-photo files under the entity's home")
    index_dir: StorePath = Field("chroma", description="folder of the ChromaDB index under the entity's home")
    watch: bool = Field(True, description="learn which files changed from inotify (Linux); else stat every file")
    scan_interval_s: float = Field(
        0.0, ge=0, description="without a watch: a search stats every file at most this often (0 = every "
                               "search; a file added, removed or replaced is noticed on every search anyway). "
                               "With a watch: how often every file is still checked, as a safety net (0 = 60 s)")
    chunk_chars: int = Field(1200, ge=200, le=20_000, description="a long word-photo is indexed in pieces")
    timeout_s: float = Field(30.0, gt=0, le=3600, description="a call into the Chroma index that takes longer "
                                                              "(a full disk can hang it) answers 503; the index "
                                                              "process is restarted")
    mode: Literal["embedded", "http"] = Field(
        "embedded", description="embedded: the index is a folder in the home; http: a `chroma run` server")
    host: str = Field("127.0.0.1", description="(mode http) the Chroma server's host")
    port: int = Field(8000, ge=1, le=65535, description="(mode http) its port")
    ssl: bool = Field(False, description="(mode http) https")
    token: SecretStr | None = Field(None, description="(mode http) sent as 'Authorization: Bearer <token>'")
    collection: str = Field("", max_length=63, description="(mode http) collection name; default "
                                                           "word_photos_<entity> (entities share a server)")

    def server(self, entity: str) -> dict | None:
        """The index process's server spec, or None when embedded."""
        if self.mode != "http":
            return None
        import re

        name = self.collection or "word_photos_" + re.sub(r"[^A-Za-z0-9_-]", "_", entity)
        return {"host": self.host, "port": self.port, "ssl": self.ssl, "collection": name[:63],
                "token": self.token.get_secret_value() if self.token else None}
