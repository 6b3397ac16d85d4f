"""How PPS starts a Python process: never importing from the folder it is started in (standard library only).

Agent hosts (Claude Code, Codex, Gemini CLI, Copilot CLI) run the hooks, and start the MCP server, with the user's project as working directory, and a
repository is untrusted: ``python -m x`` or ``python -c ...`` puts that directory first on ``sys.path``, so its
``numpy.py`` or ``json.py`` would run inside the process that holds the entity's memory and token. Every
process PPS starts gets :func:`flags`:

- ``-I`` (isolated: no working directory or script folder on ``sys.path``, no ``PYTHON*`` variables, no user
  site-packages), and a working directory that is the entity's home, not the project;
- ``-E -P`` when PPS itself is installed in the user site-packages (``pip install --user``): ``-I`` would hide
  the very packages it runs from. ``-P`` keeps the working directory off ``sys.path``, ``-E`` ignores
  ``PYTHONPATH`` and the other ``PYTHON*`` variables; the user site stays (the user's own folder, not the
  project's).

Environment variables pass unchanged either way (``PPS_*`` settings are not ``PYTHON*`` variables).
"""

from __future__ import annotations

import os
import sys


def _in_user_site() -> bool:
    import site

    try:
        user_site = os.path.realpath(site.getusersitepackages())
    except Exception:  # noqa: BLE001 - no home directory: there is no user site either
        return False
    here = os.path.realpath(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return here == user_site or here.startswith(user_site + os.sep)


def flags() -> list[str]:
    """The interpreter flags every Python process PPS starts gets (see the module doc)."""
    return ["-E", "-P"] if _in_user_site() else ["-I"]


def python(*args: str) -> list[str]:
    """``[this interpreter, isolating flags, *args]``."""
    return [sys.executable, *flags(), *args]
