"""The kernel names no plugin: not in its imports (import-linter, `make lint`), not in its logic (grep).

`make lint` runs the import contracts of pyproject.toml ([tool.importlinter]): pps_core is layered with no
import cycle (imports inside functions included) and imports no plugin package. These tests keep that
contract's list of plugin packages complete, and check that no bundled plugin's layer, operation, table
or file is named in the kernel's code.
"""

import re
import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Issue 12's "done when": names of bundled plugins' layers, operations, tables and files.
PLUGIN_NAMES = ("raw_capture|message_summaries|crystallization|core_anchors|rich_texture|session_recap|"
                "get_crystals|anchor_list|summarize_messages|store_summary|summary_stats|get_turns_since_summary|"
                "get_recent_summaries|ingest_batch_to_graphiti|word_photos|crystal_|Last session")
#: The bundled plugins' names, quoted in code (issue 24 item 6: the default plugin list came from the kernel).
PLUGIN_IDS = r"""["'](sqlite|crystals|chroma|embeddings|graphiti|recap|upkeep|claude_code|explorer|postgres|llm)["']"""


def test_the_kernel_names_no_bundled_layer_operation_table_or_file():
    # The grep, with -I: stale bytecode of deleted modules in a developer's __pycache__ is not code.
    out = subprocess.run(["grep", "-rnIE", PLUGIN_NAMES, "pps_core"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    found = out.stdout.splitlines()
    assert found == [], "the kernel names a bundled plugin's layer, operation, table or file:\n" + "\n".join(found)


def test_the_kernel_names_no_plugin_in_its_code():
    out = subprocess.run(["grep", "-rnIE", "--include=*.py", PLUGIN_IDS, "pps_core"], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode in (0, 1), out.stderr
    code = [line for line in out.stdout.splitlines()
            if re.search(PLUGIN_IDS, line.split(":", 2)[2].split("#", 1)[0])]  # comments may give an example
    assert code == [], "the kernel names a plugin (let the plugin declare it):\n" + "\n".join(code)


def _plugin_packages() -> set[str]:
    """Top-level packages of every plugin distribution in the repository (plugins/*, examples/*)."""
    found = set()
    for pyproject in [*ROOT.glob("plugins/*/pyproject.toml"), *ROOT.glob("examples/*/pyproject.toml")]:
        for init in pyproject.parent.glob("*/__init__.py"):
            if init.parent.name not in {"tests", "build"}:
                found.add(init.parent.name)
    return found


def test_the_import_contract_forbids_every_plugin_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    forbidden = next(c for c in config["contracts"] if c["type"] == "forbidden"
                     and c["source_modules"] == ["pps_core"])["forbidden_modules"]
    packages = _plugin_packages()
    assert "pps_sqlite" in packages and "pps_http" in packages  # the scan sees the bundled plugins
    missing = sorted(packages - set(forbidden))
    assert missing == [], f"add {missing} to the forbidden contract in pyproject.toml [tool.importlinter]"



#: Issue 24 item 6: words and thresholds of the applications (the turn domain's summarizing advice, the graph's
#: ingestion advice, an entity's late-night voice, the chat client of an LLM provider) are the plugins' own.
APPLICATION_TEXT = (r"unsummarized messages|summariz(e|ation) (soon|available|recommended)|ingest(ion)? "
                    r"(soon|recommended)|uningested to|middle of the night|getting late|asleep, love|"
                    r"/chat/completions|summaries are off|graph ingestion")


def test_the_kernel_holds_no_application_text_or_threshold():
    out = subprocess.run(["grep", "-rnIiE", "--include=*.py", APPLICATION_TEXT, "pps_core"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr
    found = [line for line in out.stdout.splitlines() if not line.startswith("pps_core/testing/")]
    assert found == [], "application text in the kernel (let its plugin word it):\n" + "\n".join(found)
