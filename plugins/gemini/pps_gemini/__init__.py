"""pps-gemini: Gemini CLI as a host of the PPS hook core (:mod:`pps_gemini.host`)."""
