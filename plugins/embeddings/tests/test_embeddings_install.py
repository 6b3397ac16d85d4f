"""Installing the plugins pulls no torch: not in the venv, not declared, not reachable through requirements."""

import importlib.metadata as md
import importlib.util
import re

import pytest

HEAVY = {"torch", "sentence-transformers", "transformers", "tensorflow", "jax"}


def _name(req: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _closure(dist: str) -> set[str]:
    seen, todo = set(), [dist]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            reqs = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        todo.extend(_name(r) for r in reqs if "extra ==" not in r)
    return seen


def test_torch_is_not_installed():
    assert importlib.util.find_spec("torch") is None


@pytest.mark.parametrize("dist", ["pps-embeddings", "pps-chroma"])
def test_declared_and_transitive_requirements_name_no_torch(dist):
    try:
        declared = {_name(r) for r in md.requires(dist) or []}
    except md.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed")
    assert not declared & HEAVY
    assert not _closure(dist) & HEAVY
