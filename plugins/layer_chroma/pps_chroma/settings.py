"""The chroma plugin's settings: ``[chroma]`` in pps.toml, ``PPS_CHROMA_*`` in the environment."""

from __future__ import annotations

from pydantic import Field

from pps_core import PluginSettings


class ChromaSettings(PluginSettings, env_prefix="PPS_CHROMA_"):
    directory: str = Field("word_photos", description="folder of word-photo files under the entity's home")
    index_dir: str = Field("chroma", description="folder of the ChromaDB index under the entity's home")
    watch: bool = Field(True, description="learn which files changed from inotify (Linux); else stat every file")
    scan_interval_s: float = Field(
        0.0, ge=0, description="without a watch: a search stats every file at most this often (0 = every "
                               "search; a file added, removed or replaced is noticed on every search anyway). "
                               "With a watch: how often every file is still checked, as a safety net (0 = 60 s)")
    chunk_chars: int = Field(1200, ge=200, le=20_000, description="a long word-photo is indexed in pieces")
    timeout_s: float = Field(30.0, gt=0, le=3600, description="a call into the Chroma index that takes longer "
                                                              "(a full disk can hang it) answers 503; the index "
                                                              "process is restarted")
