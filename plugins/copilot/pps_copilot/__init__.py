"""pps-copilot: GitHub Copilot CLI as a host of the PPS hook core (:mod:`pps_copilot.host`)."""
