"""Reach an entity from a short-lived command: kept for its importers; the answer lives in :mod:`pps_core.reach`."""

from __future__ import annotations

from .reach import EntityClient, run_call

__all__ = ["EntityClient", "run_call"]
