"""The forget lineage (pps_core.lineage) and the one <private> filter (pps_core.privacy), on fake plugins."""

import pytest

from pps_core import ConfigError, ForgottenTurns, TurnCopy, hookimpl
from pps_core.privacy import PRIVATE_ONLY, drop_private, drop_private_deep


class Keeper:
    """A plugin that keeps a copy of every turn's text (a cache) and declares it."""

    __pps_name__ = "keeper"

    def __init__(self):
        self.kept: dict[int, str] = {1: "alpha canary", 2: "beta", 3: "gamma canary"}
        self.seen: list[ForgottenTurns] = []

    @hookimpl
    def pps_turn_copies(self, memory):
        async def forget(turns: ForgottenTurns):
            self.seen.append(turns)
            for i in turns.ids:
                self.kept.pop(i, None)

        return [TurnCopy("turn cache", "memory of the keeper", "the forgotten turns' entries are deleted", forget)]


class Silent:
    """Observes every stored turn and declares nothing: the kind of plugin that keeps a copy unseen."""

    __pps_name__ = "silent"

    @hookimpl
    def pps_message_stored(self, memory, message):
        pass


class Broken:
    __pps_name__ = "broken"

    @hookimpl
    def pps_turn_copies(self, memory):
        def forget(turns):
            raise RuntimeError("index offline")

        return [TurnCopy("remote index", "elsewhere", "deleted", forget)]


async def test_hook_pps_turn_copies(make_memory):
    keeper = Keeper()
    memory = await make_memory(plugins=[], extra_plugins=[keeper])
    problems = await memory.events.messages_forgotten([1, 3], texts=["alpha canary", "gamma canary"],
                                                      requested_by="test")
    assert problems == []
    assert keeper.kept == {2: "beta"}
    assert keeper.seen[0].texts == ("alpha canary", "gamma canary")
    listed = await memory.call("turn_copies")
    assert listed["copies"] == [{"plugin": "keeper", "name": "turn cache", "where": "memory of the keeper",
                                 "how": "the forgotten turns' entries are deleted", "origin": False, "owed": 0}]


async def test_a_plugin_that_observes_turns_without_declaring_its_copies_is_refused(make_memory):
    with pytest.raises(ConfigError, match="'silent' observes turns but declares no copies"):
        await make_memory(plugins=[], extra_plugins=[Silent()])


async def test_a_copy_that_fails_to_forget_is_reported_and_the_others_still_forget(make_memory):
    keeper = Keeper()
    memory = await make_memory(plugins=[], extra_plugins=[Broken(), keeper])
    problems = await memory.events.messages_forgotten([1])
    assert problems == ["broken/remote index: RuntimeError: index offline"]
    assert 1 not in keeper.kept


@pytest.mark.parametrize(("text", "kept"), [
    ("my key is <private>pvq</private>", "my key is"),
    ("a <private>b <private>c</private> d</private> e", "a e"),  # the outermost span wins
    ("a <PRIVATE>b</Private> c", "a c"),
    ("a < private >b</ private > c", "a c"),
    ("unclosed <private>secret to the end", "unclosed"),
    ("<private>all of it</private>", PRIVATE_ONLY),
    ("a stray </private> stays", "a stray </private> stays"),
    ("line one\n<private>x</private>\n\n\n\nline two", "line one\n\nline two"),
    ("no tags at all < 3", "no tags at all < 3"),
])
def test_drop_private(text, kept):
    assert drop_private(text) == kept


def test_drop_private_deep_filters_every_string_keys_included():
    data = {"note": "ok <private>k1</private>", "<private>k2</private>key": [1, "x <private>k3</private>"],
            "n": {"deep": "<private>k4</private> y"}}
    out = drop_private_deep(data)
    assert "k1" not in repr(out) and "k2" not in repr(out) and "k3" not in repr(out) and "k4" not in repr(out)
    assert out["note"] == "ok" and out["n"]["deep"] == "y" and out["key"] == [1, "x"]


async def test_the_turn_store_accounts_for_its_own_copies(make_memory):
    memory = await make_memory(plugins=["sqlite"])
    listed = {c["name"]: c for c in (await memory.call("turn_copies"))["copies"] if c["plugin"] == "sqlite"}
    assert set(listed) == {"turns", "summaries", "turn vectors", "authors", "turn vector index"}
    assert all(c["origin"] for c in listed.values())
    assert "tombstoned" in listed["turns"]["how"] and "backlog" in listed["summaries"]["how"]
    assert listed["turn vector index"]["where"].endswith("pps.db.turns.usearch (and .turns.json)")
