"""A third-party PPS transport: JSON-RPC 2.0 over a Unix domain socket."""
