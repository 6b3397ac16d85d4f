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
        await raw.db.run(lambda: raw.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)"))
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
