"""Tool descriptions the model sees are capped: only prose is cut, never a name, type, enum or default."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift_rlfactory.tools.base import ToolSpec
from swift_rlfactory.tools.toolset import capped_spec

NOTE = " [description cut: {n} characters, the first {k} shown]"


def test_only_descriptions_longer_than_the_cap_are_cut_and_the_original_is_left_alone():
    long, exact = "L" * 11, "E" * 10
    parameters = {
        "type": "object",
        "description": long,
        "properties": {
            "description": {"type": "string", "description": exact, "default": long, "examples": [long]},
            "mode": {"enum": [long], "description": long},
            "items": {
                "type": "array",
                "items": {"description": long},
                "prefixItems": [{"description": long}],
            },
            "either": {"anyOf": [{"$ref": "#/$defs/D"}, {"type": "null", "description": long}]},
        },
        "$defs": {"D": {"type": "object", "description": long, "properties": {"x": {"description": long}}}},
        "definitions": {"E": {"not": {"description": long}, "additionalProperties": {"description": long}}},
    }
    written = json.dumps(parameters)
    spec, cuts = capped_spec(ToolSpec("t", "d" * 11, parameters), 10)
    assert json.dumps(parameters) == written  # the server's schema is not changed under it
    cut = "L" * 10 + NOTE.format(n=11, k=10)
    assert spec.description == "d" * 10 + NOTE.format(n=11, k=10)
    p = spec.parameters
    assert p["description"] == cut
    assert p["properties"]["description"] == {
        "type": "string",
        "description": exact,
        "default": long,
        "examples": [long],
    }
    assert p["properties"]["mode"] == {"enum": [long], "description": cut}
    assert p["properties"]["items"]["items"] == {"description": cut}
    assert p["properties"]["items"]["prefixItems"] == [{"description": cut}]
    assert p["properties"]["either"]["anyOf"] == [{"$ref": "#/$defs/D"}, {"type": "null", "description": cut}]
    assert p["$defs"]["D"]["description"] == cut and p["$defs"]["D"]["properties"]["x"] == {
        "description": cut
    }
    assert p["definitions"]["E"] == {
        "not": {"description": cut},
        "additionalProperties": {"description": cut},
    }
    assert sorted(cuts) == sorted([
        "description", "parameters", "properties/mode", "properties/items/items", "properties/items/prefixItems/0",
        "properties/either/anyOf/1", "$defs/D", "$defs/D/properties/x", "definitions/E/not",
        "definitions/E/additionalProperties",
    ])  # fmt: skip


@pytest.mark.parametrize("limit", [None, 10])
def test_a_spec_with_nothing_too_long_is_returned_as_it_is(limit):
    spec = ToolSpec(
        "t", "short", {"type": "object", "properties": {"q": {"type": "string", "description": "q"}}}
    )
    assert capped_spec(spec, limit) == (spec, []) and capped_spec(spec, limit)[0] is spec


_SCHEMA = st.recursive(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["string", "object"]),
            "description": st.text(max_size=30),
            "default": st.text(max_size=30),
        },
    ),  # fmt: skip
    lambda inner: st.fixed_dictionaries(
        {},
        optional={
            "description": st.text(max_size=30),
            "properties": st.dictionaries(
                st.sampled_from(["description", "items", "q", "anyOf"]), inner, max_size=3
            ),
            "items": inner | st.lists(inner, max_size=2),
            "anyOf": st.lists(inner, max_size=2),
            "$defs": st.dictionaries(st.text(max_size=4), inner, max_size=2),
            "enum": st.lists(st.text(max_size=30), max_size=2),
        },
    ),
    max_leaves=12,
)


def _strip(schema, limit):
    """``schema`` with every description that capping may touch replaced by what it should become."""
    if isinstance(schema, list):
        return [_strip(item, limit) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "description" and isinstance(value, str):
            out[key] = value if len(value) <= limit else value[:limit] + NOTE.format(n=len(value), k=limit)
        elif key in ("properties", "$defs"):
            out[key] = {name: _strip(child, limit) for name, child in value.items()}
        elif key in ("items", "anyOf"):
            out[key] = _strip(value, limit)
        else:
            out[key] = value  # data: enums, defaults
    return out


@settings(max_examples=200, deadline=None)
@given(_SCHEMA, st.integers(1, 20))
def test_capping_changes_descriptions_only_and_each_as_the_rule_says(schema, limit):
    spec, cuts = capped_spec(ToolSpec("t", "", schema), limit)
    assert spec.parameters == _strip(schema, limit)
    assert bool(cuts) == (spec.parameters != schema)
