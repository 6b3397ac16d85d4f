"""Progress bars for long jobs (import, reindex, recap): tqdm on stderr, silent when it is not a terminal."""

from __future__ import annotations

import sys
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from tqdm import tqdm


def progress(total: int | None, desc: str, unit: str = "turn", file: IO[str] | None = None) -> tqdm[Any]:
    """A tqdm bar on stderr, silent when stderr is not a terminal."""
    from tqdm import tqdm

    stream = file or sys.stderr
    return tqdm(total=total, desc=desc, unit=unit, file=stream, disable=not stream.isatty(), leave=False)
