"""Bad input on every operation: a clear error naming the parameter, and nothing written."""

import hashlib
import os

import pytest

from pps_core.errors import InvalidParams

WRONG = {"integer": "not-a-number", "number": "NaN-ish", "string": 12345, "boolean": "maybe",
         "array": "not-a-list", "object": ["not", "an", "object"]}


def fingerprint(home):
    """Every file under the entity's home with its content hash (the SQLite WAL folded in by a checkpoint)."""
    out = {}
    for root, _dirs, files in os.walk(home):
        for name in files:
            if name.endswith(("-wal", "-shm")) or name == "owner.lock":
                continue
            path = os.path.join(root, name)
            out[os.path.relpath(path, home)] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    return out


async def snapshot(memory):
    raw = memory.layer("raw_capture")
    if raw is not None:
        await raw.backend.db.run(lambda: raw.backend.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
    return fingerprint(memory.home)


def field_type(schema, prop):
    spec = schema["properties"][prop]
    if "type" in spec:
        return spec["type"]
    for alt in spec.get("anyOf", []):
        if alt.get("type") not in (None, "null"):
            return alt["type"]
    return None


@pytest.fixture
async def memory(make_memory):
    m = await make_memory(plugins=["sqlite", "crystals"])
    await m.call("store_message", {"content": "seed", "author_name": "A", "channel": "c"})
    await m.call("crystallize", {"content": "seed crystal"})
    return m


async def test_every_operation_names_the_bad_parameter_and_writes_nothing(memory):
    before = await snapshot(memory)
    tried = 0
    for op in memory.catalog:
        schema = op.input_schema()
        for prop in schema.get("properties", {}):
            kind = field_type(schema, prop)
            if kind not in WRONG:
                continue
            with pytest.raises(InvalidParams) as err:
                await memory.call(op.name, {prop: WRONG[kind]})
            assert err.value.param and prop in err.value.message, (op.name, prop, err.value.message)
            tried += 1
        with pytest.raises(InvalidParams) as err:
            await memory.call(op.name, {"definitely_not_a_param": 1})
        assert "definitely_not_a_param" in err.value.message, op.name
        for required in schema.get("required", []):
            with pytest.raises(InvalidParams) as err:
                await memory.call(op.name, {})
            assert required in err.value.message
    assert tried > 40
    assert await snapshot(memory) == before


@pytest.mark.parametrize("params", [[1, 2], "text", 7, None])
async def test_params_must_be_an_object(memory, params):
    if params is None:
        with pytest.raises(InvalidParams):  # store_message has required params
            await memory.call("store_message", params)
    else:
        with pytest.raises(InvalidParams, match="must be a JSON object"):
            await memory.call("store_message", params)


async def test_non_finite_numbers_are_refused(memory):
    with pytest.raises(InvalidParams) as err:
        await memory.call("get_turns_around", {"timestamp": "2026-01-01", "before_ratio": float("nan")})
    assert err.value.param == "before_ratio"
    with pytest.raises(InvalidParams):
        await memory.call("ambient_recall", {"context": "x", "limit_per_layer": float("inf")})


async def test_oversized_and_control_character_input(memory):
    before = await snapshot(memory)
    for params, name in [({"content": "x" * 100_001, "author_name": "A", "channel": "c"}, "content"),
                         ({"content": "x", "author_name": "A\nB", "channel": "c"}, "author_name"),
                         ({"content": "x", "author_name": "A", "channel": "   "}, "channel"),
                         ({"content": "x", "author_name": "A", "channel": "c", "metadata": {"k": "v" * 70_000}},
                          "metadata")]:
        with pytest.raises(InvalidParams) as err:
            await memory.call("store_message", params)
        assert err.value.param == name
    assert await snapshot(memory) == before


async def test_unknown_operation_is_clear(memory):
    from pps_core.errors import UnknownOperation

    with pytest.raises(UnknownOperation, match="unknown operation 'texture_serch'"):
        await memory.call("texture_serch", {})


# --- deep nesting and calendar edges on every operation, then every read (issue 14 items 1-2) ---------------

EDGE_TIMES = ["9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "9999-12-31T23:59:59", "0001-01-01",
              "9998-12-31T23:30:00-12:00", "0002-01-01T00:00:00+14:00", "10000-01-01T00:00:00Z", "-0001-01-01"]
EDGE_SKIP = {"pps_regenerate_token", "pps_backup"}  # rotates the token / a time as an archive name is a file
MINIMAL = {  # valid minimal parameters where the schema's required fields need more than a placeholder
    "store_messages": {"messages": [{"content": "m", "author_name": "A", "channel": "c"}]},
    "forget_turns": {"ids": [987654]},
    "forget_range": {"channel": "nowhere", "since": "2020-01-01T00:00:00Z", "until": "2020-01-02T00:00:00Z"},
    "forget_search": {"query": "zzzqqq"},
    "get_turns_since": {"timestamp": "2026-01-01T00:00:00Z"},
    "get_turns_around": {"timestamp": "2026-01-01T00:00:00Z"},
    "get_conversation_context": {"turns": 3},
    "texture_explore": {"entity_name": "Lyra"},
    "anchor_save": {"content": "a word-photo", "title": "fuzz"},
    "poll_channels": {"consumer_key": "fuzz"},
}


def nested_dict(depth):
    root = cur = {}
    for _ in range(depth - 1):
        cur["k"] = {}
        cur = cur["k"]
    return root


def nested_list(depth):
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def minimal(op, seeded):
    if op.name in MINIMAL:
        return dict(MINIMAL[op.name])
    schema = op.input_schema()
    out = {}
    for name in schema.get("required", []):
        kind = field_type(schema, name)
        out[name] = seeded.get(name, {"string": "seed", "integer": 1, "number": 1.0, "boolean": False,
                                      "array": [], "object": {}}.get(kind))
    return out


def time_fields(op):
    schema = op.input_schema()
    return [p for p in schema.get("properties", {}) if field_type(schema, p) == "string"]


async def call_ok_or_clear(memory, name, params):
    """A call either succeeds or is refused with a clear error below 500 (never a crash or a 5xx)."""
    from pps_core.errors import PPSError

    try:
        await memory.call(name, params)
        return True
    except PPSError as exc:
        assert exc.status < 500 or exc.status == 503, (name, params, exc.status, exc)
        return False


FULL = ["sqlite", "crystals", "chroma", "embeddings", "graphiti", "recap", "upkeep"]  # the embedded defaults


@pytest.mark.parametrize("zone,plugins", [("Europe/Paris", FULL), ("America/Chicago", ["sqlite", "crystals"])],
                         ids=["paris-every-layer", "chicago-sqlite-crystals"])
async def test_deep_nesting_and_calendar_edges_on_every_operation_then_every_read(make_memory, zone, plugins):
    from pps_core.timeutil import MAX_YEAR, MIN_YEAR

    memory = await make_memory(plugins=plugins, timezone=zone, graphiti={"focal_entity": "Lyra"})
    if plugins == FULL:
        assert {"session_recap", "pps_upkeep", "texture_add_triplet", "anchor_save"} <= set(memory.catalog.names())
    await memory.call("store_message", {"content": "Lyra met Jeff", "author_name": "Jeff", "channel": "c"})
    await memory.call("crystallize", {"content": "seed crystal"})
    seeded = {}
    if "anchor_save" in memory.catalog:
        seeded["filename"] = (await memory.call("anchor_save", {"content": "seed", "title": "seed"}))["saved"]
    if "texture_add_triplet" in memory.catalog:
        await memory.call("texture_add_triplet", {"source": "Lyra", "relationship": "KNOWS", "target": "Jeff"})
    seeded["name"] = (await memory.call("crystal_list", {}))["current"][0]

    # 1. Deep nesting in every parameter of every operation is refused before anything is written.
    before = await snapshot(memory)
    deep_tried = 0
    for op in memory.catalog:
        if op.name == "pps_regenerate_token":
            continue
        base = minimal(op, seeded)
        for prop in [*op.input_schema().get("properties", {}), "metadata"]:
            for deep in (nested_dict(40), nested_list(5000), [nested_dict(33)]):
                with pytest.raises(InvalidParams, match="nest deeper"):
                    await memory.call(op.name, {**base, prop: deep})
                deep_tried += 1
    assert await snapshot(memory) == before
    assert deep_tried > 300

    # 2. A time at the calendar's edge in every text parameter: refused clearly or stored renderable.
    edge_tried = 0
    for op in memory.catalog:
        if op.name in EDGE_SKIP:
            continue
        base = minimal(op, seeded)
        for prop in time_fields(op):
            for edge in EDGE_TIMES:
                await call_ok_or_clear(memory, op.name, {**base, prop: edge})
                edge_tried += 1
    await call_ok_or_clear(memory, "store_messages", {"messages": [
        {"content": "edge", "author_name": "A", "channel": "c", "created_at": e} for e in EDGE_TIMES]})
    assert edge_tried > 200

    # 3. Nothing poison was stored: every read operation answers with valid minimal parameters.
    reads = [op for op in memory.catalog if op.read_only]
    assert {"ambient_recall", "raw_search", "list_turns", "summarize_messages"} <= {op.name for op in reads}
    for op in reads:
        if op.name == "pps_backup":  # archives a home with a pps.toml; the HTTP fuzz test reads it over the wire
            continue
        params = minimal(op, seeded)
        try:
            await memory.call(op.name, params)
        except Exception as exc:  # noqa: BLE001 - the point: no read may fail after the fuzzing above
            pytest.fail(f"{op.name}({params}) failed after the fuzz: {type(exc).__name__}: {exc}")
    startup = await memory.call("ambient_recall", {"context": "startup"})
    assert startup["text"]
    turns = (await memory.call("list_turns", {"limit": 500}))
    rows = turns.get("turns") or turns.get("results") or []
    assert rows, turns
    raw = memory.layer("raw_capture")
    stored = await raw.backend.db.run(lambda: [r[0] for r in raw.backend.db.conn.execute("SELECT created_at FROM messages")])
    assert all(MIN_YEAR <= int(str(t)[:4]) <= MAX_YEAR for t in stored), stored
