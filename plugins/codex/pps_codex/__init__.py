"""pps-codex: Codex CLI as a host of the PPS hook core (:mod:`pps_codex.host`)."""
