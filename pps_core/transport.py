"""The transport contract: a way to serve an entity's catalog (``pps serve <name>``)."""

from __future__ import annotations

import argparse
from typing import Protocol, runtime_checkable


@runtime_checkable
class Transport(Protocol):
    """``pps serve <name>`` calls ``add_arguments`` to build its options, then ``serve``."""

    name: str
    help: str

    def add_arguments(self, parser: argparse.ArgumentParser) -> None: ...

    def serve(self, args: argparse.Namespace) -> int:
        """Run until stopped; return the process exit code."""
        ...
