"""A handler's result leaves as JSON data: returned as it is when it already is (checked without copying it),
converted when anything in it, at any depth, is not (catalog.to_jsonable)."""

from datetime import UTC, datetime

from pps_core.catalog import to_jsonable
from pps_core.models import Pointer


def test_plain_json_is_returned_as_it_is():
    for value in (None, 1, 2.5, True, "x", [], {}, {"a": [1, [2, {"c": None, "d": [True, 1.5, "s"]}]], "e": {}}):
        assert to_jsonable(value) is value


def test_anything_else_at_any_depth_is_converted():
    when = datetime(2026, 1, 2, 3, 4, tzinfo=UTC)
    assert to_jsonable({"a": [1, {"b": (1, 2)}]}) == {"a": [1, {"b": [1, 2]}]}
    assert to_jsonable([{"p": Pointer(operation="x")}]) == [{"p": {"operation": "x", "params": {}}}]
    assert to_jsonable({"deep": [[[[{"t": when}]]]]}) == {"deep": [[[[{"t": str(when)}]]]]}
    assert to_jsonable((1, "a")) == [1, "a"]
    assert to_jsonable({"s": {1}}) == {"s": "{1}"}
