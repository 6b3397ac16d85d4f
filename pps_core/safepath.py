"""The working directory stays off ``sys.path``: in the ``pps`` command and in every process it starts.

Claude Code starts ``pps serve mcp`` (and users run ``pps``) in a project folder, and a repository is untrusted.
The ``pps`` console script runs with its own folder first on ``sys.path``, not the working directory, but Python
starts children differently: multiprocessing's fork server (the word-photo index) and its resource tracker run as
``python -c ...``, which puts the working directory first, so a project's ``multiprocessing/`` or ``fcntl.py``
would run in them; ``python -m`` puts it first in the command itself. :func:`keep_cwd_off_path`, the first thing
``pps`` does:

- drops from ``sys.path`` what names the working directory (``''``, relative entries, the folder itself) and the
  folder Python put first (what ``-P`` leaves out), so nothing imported from then on comes from the project, and
  the children multiprocessing starts, which get the parent's ``sys.path``, do not either;
- sets ``PYTHONSAFEPATH=1`` for every child (``python -c``, ``-m``, a script: nothing put first);
- under ``python -E`` (children then ignore ``PYTHONSAFEPATH``: multiprocessing passes them ``-E``), starts the
  command again with ``-P`` added, which they inherit as a flag.

What ``python -m pps_core.cli`` imports before any PPS code runs comes from the working directory by Python's own
rule: ``pps`` (or ``python -P -m``) is the way to start it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator


def off_cwd(path: list[str], cwd: str | None, script: str | None, prepended: bool) -> list[str]:
    """``path`` without the entries that name the working directory ``cwd`` (``''``, relative ones, ``cwd``
    itself) and, when Python ``prepended`` a folder (no ``-P``), that first entry if it is the script's folder
    (``script``: ``sys.argv[0]``)."""
    here = os.path.realpath(cwd) if cwd else None
    folder = os.path.realpath(os.path.dirname(os.path.abspath(script))) if script and os.path.isfile(script) else None
    kept = []
    for i, entry in enumerate(path):
        if not entry or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if real == here or (prepended and i == 0 and real == folder):
            continue
        kept.append(entry)
    return kept


def keep_cwd_off_path() -> None:
    """Called first by the ``pps`` command (see the module doc): the working directory, and the folder Python put
    first, leave ``sys.path``; every child starts with neither."""
    flags = sys.flags
    if flags.ignore_environment and not flags.safe_path and sys.executable and len(sys.orig_argv) > 1:
        os.execv(sys.executable, [sys.executable, "-P", *sys.orig_argv[1:]])
    try:
        cwd: str | None = os.getcwd()
    except OSError:  # the folder was removed: only '' and relative entries can name it
        cwd = None
    sys.path[:] = off_cwd(sys.path, cwd, sys.argv[0] if sys.argv else None, prepended=not flags.safe_path)
    os.environ["PYTHONSAFEPATH"] = "1"


@contextlib.contextmanager
def safe_children() -> Iterator[None]:
    """Children started inside this block (multiprocessing's fork server and resource tracker, which run as
    ``python -c ...`` in the working directory) get ``PYTHONSAFEPATH=1``: nothing is put first on their
    ``sys.path``, whoever started this process (``pps`` sets it for good; a program that embeds PPS does not).
    Under ``python -E`` the variable is ignored, but multiprocessing then passes the parent's ``-P``/``-I``."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONSAFEPATH", None)
        else:
            os.environ["PYTHONSAFEPATH"] = before
