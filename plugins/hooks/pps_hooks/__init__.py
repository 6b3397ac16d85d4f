"""pps-hooks: the host-neutral hook core (see :mod:`pps_hooks.host` for the contract a host fills)."""
