"""Progress bars for long jobs (import, reindex, recap): tqdm on stderr, silent when it is not a terminal."""

from __future__ import annotations

import sys
from typing import Any, TextIO


def progress(total: int | None, desc: str, unit: str = "turn", file: TextIO | None = None) -> Any:
    """A tqdm bar on stderr, silent when stderr is not a terminal."""
    from tqdm import tqdm

    stream = file or sys.stderr
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=not stream.isatty(), leave=False)
