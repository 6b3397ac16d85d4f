"""PPS transport: HTTP."""
