"""XML call values typed through the schemas third-party tools send: references wrapped the ways pydantic,
FastMCP and zod-to-json-schema write them, and Python-style objects the model writes for them."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swift_rlfactory.tools.calls import parse_xml_tool_calls

WHERE = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
CAT = {"type": "object", "properties": {"kind": {"const": "cat", "type": "string"}}}
DOG = {"type": "object", "properties": {"kind": {"const": "dog", "type": "string"}}}
NODE = {  # pydantic's recursive model: the reference back to Node is inside a property, not the type
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
    },
}
DEFS = {
    "Where": WHERE,
    "Cat": CAT,
    "Dog": DOG,
    "Node": NODE,
    "Unit": {"enum": ["c", "f"], "type": "string"},
    "Alias": {"$ref": "#/$defs/Where"},  # a reference to a reference
    "Alias2": {"allOf": [{"$ref": "#/$defs/Alias"}], "description": "twice removed"},
    "Count": {"type": "integer"},
    "Outer": {"type": "object", "$defs": {"Inner": {"type": "array", "items": {"type": "integer"}}}},
    "Loop": {"$ref": "#/$defs/Loop2"},
    "Loop2": {"$ref": "#/$defs/Loop"},
    "SelfAll": {"allOf": [{"$ref": "#/$defs/SelfAll"}]},
    "SelfAny": {"anyOf": [{"$ref": "#/$defs/SelfAny"}, {"type": "null"}]},
}


def call(schema: dict, text: str, *, root: dict | None = None) -> object:
    """What a qwen3_coder value ``text`` for a parameter ``x`` of ``schema`` reaches the tool as."""
    parameters = {"type": "object", "properties": {"x": schema}, "$defs": DEFS, **(root or {})}
    tools = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    [parsed] = parse_xml_tool_calls(
        f"<tool_call>\n<function=f>\n<parameter=x>\n{text}\n</parameter>\n</function>\n</tool_call>", tools
    )
    assert parsed.error is None, parsed.error
    return parsed.arguments["x"]


PARIS = '{"city": "Paris"}'


@pytest.mark.parametrize(
    "schema, text, value",
    [
        # pydantic v2 before 2.9 (and FastMCP servers on it): a model field with a description or default
        ({"allOf": [{"$ref": "#/$defs/Where"}], "description": "the place"}, PARIS, {"city": "Paris"}),
        ({"allOf": [{"$ref": "#/$defs/Where"}], "default": {"city": "Rome"}}, PARIS, {"city": "Paris"}),
        ({"$ref": "#/$defs/Where", "description": "the place"}, PARIS, {"city": "Paris"}),  # pydantic 2.9+
        # Optional[Model], bare and with a description wrapped once more
        ({"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}]}, PARIS, {"city": "Paris"}),
        ({"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}]}, "null", None),
        ({"anyOf": [{"allOf": [{"$ref": "#/$defs/Where"}]}, {"type": "null"}]}, PARIS, {"city": "Paris"}),
        ({"allOf": [{"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}]}]}, PARIS, {"city": "Paris"}),
        # a discriminated union
        ({"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}]}, '{"kind": "dog"}', {"kind": "dog"}),
        # nested $defs, and draft-07's definitions (zod-to-json-schema)
        ({"$ref": "#/$defs/Outer/$defs/Inner"}, "[1, 2]", [1, 2]),
        ({"$ref": "#/definitions/Where"}, PARIS, {"city": "Paris"}),
        ({"allOf": [{"$ref": "#/definitions/Where"}]}, PARIS, {"city": "Paris"}),
        # zod-to-json-schema's "root" strategy: a schema used twice is a reference to its first place
        ({"$ref": "#/properties/first"}, PARIS, {"city": "Paris"}),
        # references to references
        ({"$ref": "#/$defs/Alias"}, PARIS, {"city": "Paris"}),
        ({"$ref": "#/$defs/Alias2"}, PARIS, {"city": "Paris"}),
        ({"allOf": [{"$ref": "#/$defs/Alias2"}], "description": "thrice"}, PARIS, {"city": "Paris"}),
        ({"allOf": [{"$ref": "#/$defs/Count"}]}, "3", 3),
        # a recursive model is still an object
        (
            {"allOf": [{"$ref": "#/$defs/Node"}]},
            '{"name": "a", "children": []}',
            {"name": "a", "children": []},
        ),
        # allOf narrows: every branch must allow the type
        ({"allOf": [{"type": "number"}, {"type": "integer"}]}, "3", 3),
        ({"type": "object", "allOf": [{"$ref": "#/$defs/Where"}]}, PARIS, {"city": "Paris"}),
        # a value that is not JSON stays text: the tool's own check judges it
        ({"allOf": [{"$ref": "#/$defs/Where"}]}, "Paris", "Paris"),
        ({"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}]}, "Paris", "Paris"),
        # whatever may be a string stays text
        ({"allOf": [{"$ref": "#/$defs/Unit"}]}, "c", "c"),
        ({"allOf": [{"$ref": "#/$defs/Unit"}], "description": "unit"}, '"c"', '"c"'),
        ({"anyOf": [{"allOf": [{"$ref": "#/$defs/Where"}]}, {"type": "string"}]}, PARIS, PARIS),
        ({"allOf": [{"$ref": "#/$defs/Where"}, {}]}, PARIS, {"city": "Paris"}),  # {} allows anything
        # an enum or const without "type" (pydantic before 2.7 for Literal) has the type of its values
        ({"enum": [1, 2]}, "2", 2),
        ({"const": 3}, "3", 3),
        ({"enum": ["a", 1]}, "1", "1"),
        ({"allOf": [{"enum": [True, False]}]}, "true", True),
    ],
)
def test_xml_values_are_typed_through_wrapped_references(schema, text, value):
    root = {"properties": {"x": schema, "first": {"$ref": "#/$defs/Where"}}, "definitions": {"Where": WHERE}}
    assert call(schema, text, root=root) == value


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#/$defs/Loop"},
        {"allOf": [{"$ref": "#/$defs/Loop"}]},
        {"$ref": "#/$defs/SelfAll"},
        {"allOf": [{"$ref": "#/$defs/SelfAll"}]},
        {"anyOf": [{"$ref": "#/$defs/SelfAny"}, {"type": "null"}]},
        {"allOf": [{"$ref": "#/$defs/Missing"}]},
        {"allOf": [{"$ref": "https://example.com/where.json"}]},
        {"allOf": "not a list"},
        {"allOf": [{"type": "integer"}, {"type": "object"}]},  # no value is both
    ],
)
def test_xml_values_whose_wrapped_reference_gives_no_type_stay_text(schema):
    """A cycle, a dangling or remote reference, or branches no value satisfies: text, and nothing loops."""
    assert call(schema, "[1]") == "[1]"


@pytest.mark.parametrize("wrap", ["$ref", "allOf", "anyOf"])
def test_xml_typing_survives_reference_chains_and_nesting_of_any_length(wrap):
    """A hostile server's schema (a chain of ten thousand references, or as many nested ``allOf``/``anyOf``)
    neither raises nor hangs; a chain of reasonable length still types its values."""

    def chain(n: int) -> tuple[dict, dict]:
        defs = {f"d{i}": {"$ref": f"#/$defs/d{i + 1}"} for i in range(n)} | {f"d{n}": {"type": "integer"}}
        schema: dict = {"$ref": "#/$defs/d0"}
        if wrap != "$ref":
            schema, defs = {"type": "integer"}, {}
            for _ in range(n):
                schema = {wrap: [schema]}
        return schema, defs

    for n, typed in [(20, 3), (10_000, "3")]:
        schema, defs = chain(n)
        parameters = {"type": "object", "properties": {"x": schema}, "$defs": defs}
        tools = [{"name": "f", "parameters": parameters}]
        [parsed] = parse_xml_tool_calls("<tool_call><function=f><parameter=x>3</parameter></function>", tools)
        assert (parsed.error, parsed.arguments) == (None, {"x": typed})


# -- every wrapping of every type: what the model writes for it reaches the tool as its JSON -------------
_BASES = {
    "object": {"a": [1, "x"]},
    "array": [1, {"b": None}],
    "integer": 7,
    "number": 2.5,
    "boolean": False,
    "string": "7",
}


@st.composite
def _wrapped(draw) -> tuple[str, dict, dict]:
    """A base type, a schema for it wrapped in a random stack of references and combinators, its defs."""
    base = draw(st.sampled_from(sorted(_BASES)))
    schema: dict = {"type": base, "description": "the base"}
    defs: dict = {}
    for i, how in enumerate(draw(st.lists(st.sampled_from(["$defs", "definitions", "allOf", "anyOf_null",
                                                            "oneOf", "described", "nested"]), max_size=6))):  # fmt: skip
        name = f"T{i}"
        if how in ("$defs", "definitions"):
            defs.setdefault(how, {})[name] = schema
            schema = {"$ref": f"#/{how}/{name}"}
        elif how == "allOf":
            schema = {"allOf": [schema], "description": "wrapped"}
        elif how == "anyOf_null":
            schema = {"anyOf": [schema, {"type": "null"}], "default": None}
        elif how == "oneOf":
            schema = {"oneOf": [schema]}
        elif how == "described":
            defs.setdefault("$defs", {})[name] = schema
            schema = {"allOf": [{"$ref": f"#/$defs/{name}"}], "title": name}
        else:  # a definition nested in another definition
            box = defs.setdefault("$defs", {}).setdefault("Box", {"type": "object", "$defs": {}})
            box["$defs"][name] = schema
            schema = {"$ref": f"#/$defs/Box/$defs/{name}"}
    return base, schema, defs


@settings(max_examples=300, deadline=None)
@given(_wrapped())
def test_any_stack_of_wrappers_types_a_value_as_its_base_type_does(case):
    base, schema, defs = case
    text = json.dumps(_BASES[base])
    parameters = {"type": "object", "properties": {"x": schema}, **defs}
    [parsed] = parse_xml_tool_calls(
        f"<tool_call>\n<function=f>\n<parameter=x>\n{text}\n</parameter>\n</function>\n</tool_call>",
        [{"name": "f", "parameters": parameters}],
    )
    assert parsed.error is None
    assert parsed.arguments == {"x": text if base == "string" else _BASES[base]}


# -- Python-style values for parameters that take objects, arrays, booleans or null ----------------------
PLACE = {"anyOf": [{"$ref": "#/$defs/Where"}, {"type": "null"}]}
SCHEMAS = {
    "object": {"type": "object"},
    "array": {"type": "array", "items": {"type": "string"}},
    "boolean": {"type": "boolean"},
    "maybe_int": {"type": ["integer", "null"]},
    "place": PLACE,
    "text": {"type": "string"},
    "text_or_object": {"type": ["object", "string"]},
}


@pytest.mark.parametrize(
    "kind, text, value",
    [
        ("object", "{'year': 2020}", {"year": 2020}),
        (
            "object",
            "{'q': \"it's\", 'ok': True, 'none': None, 'no': False}",
            {"q": "it's", "ok": True, "none": None, "no": False},
        ),
        ("object", "{'a': [1, {'b': 'x\\'y'}], 'c': 2.5,}", {"a": [1, {"b": "x'y"}], "c": 2.5}),
        ("object", "```python\n{'a': 1}\n```", {"a": 1}),  # fenced, as the model writes code
        (
            "object",
            "{'path': 'C:\\\\tmp', 'tag': '</tool_call>', '城市': '北京'}",
            {"path": "C:\\tmp", "tag": "</tool_call>", "城市": "北京"},
        ),
        ("array", "['x', 'y']", ["x", "y"]),
        ("array", "['x', \"y's\",]", ["x", "y's"]),
        ("array", "[True, None]", [True, None]),  # the tool's own check judges the item types
        ("boolean", "True", True),
        ("boolean", "False", False),
        ("maybe_int", "None", None),
        ("place", "{'city': 'Paris'}", {"city": "Paris"}),
        ("place", "None", None),
        # a string is not what these parameters take: the text is kept, for the tool's check to judge
        ("object", "'abc'", "'abc'"),
        ("array", "'x'", "'x'"),
        ("boolean", "'True'", "'True'"),
        ("maybe_int", "'3'", "'3'"),
        # nothing that would change what the model wrote: unquoted words, tuples, text after the value
        ("object", "{a: 1}", "{a: 1}"),
        ("object", "{'a': x}", "{'a': x}"),
        ("object", "{'a': (1, 2)}", "{'a': (1, 2)}"),
        ("object", "{'a': 1} and more", "{'a': 1} and more"),
        ("object", "{'a': 1} {'b': 2}", "{'a': 1} {'b': 2}"),
        ("array", "'x', 'y'", "'x', 'y'"),
        ("object", "{'a': 1", "{'a': 1"),  # cut: the end may be missing more than a bracket
        ("object", "{'a': NaN}", "{'a': NaN}"),
        ("boolean", "TRUE", "TRUE"),
        # parameters that may be strings keep their text, whatever it looks like
        ("text", "{'a': 1}", "{'a': 1}"),
        ("text", "True", "True"),
        ("text_or_object", "{'a': 1}", "{'a': 1}"),
    ],
)
def test_python_style_values_are_typed_when_the_schema_takes_their_type(kind, text, value):
    """The model writes ``{'a': 1}``, ``['x']``, ``True``, ``None`` (Python's habit); where the schema takes an
    object, array, boolean or null, the repair that hermes calls get (single quotes, Python literals,
    trailing commas, a fence; nothing that changes a value) types it; anything else stays text."""
    assert call(SCHEMAS[kind], text) == value


@pytest.mark.parametrize(
    "text, message",
    [("{'a': 1, 'a': 2}", "twice"), ("{'a': 1e400}", "out of range"), ("[" * 101 + "]" * 101, "deeper")],
)
def test_python_style_values_that_would_lose_a_value_are_errors_as_json_ones_are(text, message):
    tools = [
        {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": ["object", "array"]}}}}
    ]
    [parsed] = parse_xml_tool_calls(
        f"<tool_call><function=f><parameter=x>{text}</parameter></function>", tools
    )
    assert parsed.error is not None and message in parsed.error, parsed


_PRINTABLE = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)).filter(str.isprintable), max_size=8
)
_PYTHONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**15), 10**15)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _PRINTABLE,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_PRINTABLE, inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(_PRINTABLE, _PYTHONISH, max_size=3) | st.lists(_PYTHONISH, max_size=3))
def test_what_python_prints_for_an_object_or_array_reaches_the_tool_as_that_value(value):
    """``repr`` of any JSON value made of printable text (Python's quotes, ``\\'``, ``\\\\``, ``True``,
    ``None``, exponents) is read back exactly for a parameter that takes objects and arrays."""
    text = repr(value)
    if "</parameter>" in text:
        return
    assert call({"type": ["object", "array"]}, text) == value


def test_a_python_tool_taking_models_runs_on_the_python_style_call_the_model_writes():
    """End to end through a real tool's pydantic schema: ``{'city': 'Paris'}`` and ``None`` reach it typed."""
    import asyncio

    from pydantic import BaseModel

    from swift_rlfactory.tools.python_tool import PythonTool

    class Where(BaseModel):
        city: str
        days: int = 1

    def forecast(
        where: Where, backup: Where | None = None, hourly: bool = False, tags: list[str] | None = None
    ) -> str:
        """The forecast for a place."""
        return f"{where.city} {where.days} {backup} {hourly} {tags}"

    tool = PythonTool(forecast)
    body = "".join(
        f"<parameter={k}>\n{v}\n</parameter>\n"
        for k, v in {
            "where": "{'city': 'Paris', 'days': 2,}",
            "backup": "None",
            "hourly": "True",
            "tags": "['rain', \"it's\"]",
        }.items()  # fmt: skip
    )
    [parsed] = parse_xml_tool_calls(
        f"<tool_call>\n<function=forecast>\n{body}</function>", [tool.spec.openai_schema()]
    )
    assert parsed.error is None
    assert asyncio.run(tool.call(parsed.arguments)) == "Paris 2 None True ['rain', \"it's\"]"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "values",
    [
        {"where": '{"city": "Paris", "days": 2}', "pet": '{"kind": "dog"}', "backup": '{"city": "Lyon"}',
         "stops": '[{"city": "Dijon"}]', "tree": '{"name": "r", "children": [{"name": "a"}]}', "hourly": "true"},
        {"where": "{'city': 'Paris', 'days': 2}", "pet": "{'kind': 'dog'}", "backup": "{'city': 'Lyon',}",
         "stops": "[{'city': 'Dijon'}]", "tree": "{'name': 'r', 'children': [{'name': 'a'}]}", "hourly": "True"},
    ],
    ids=["json", "python"],
)  # fmt: skip
def test_a_fastmcp_server_taking_models_gets_them_typed_from_xml_calls(values):
    """End to end with a real MCP server (the SDK derives its schema from pydantic models): every model, an
    optional one, a discriminated union, a list of models and a recursive model arrive as objects."""
    from swift_rlfactory.tools import ToolExecutor
    from swift_rlfactory.tools.calls import call_parser
    from swift_rlfactory.tools.mcp import McpProvider
    from swift_rlfactory.tools.mcp.config import McpServerConfig
    from tests.test_mcp import ROOT

    server = McpServerConfig(command="python", args=[str(ROOT / "tests" / "servers" / "models_server.py")])
    with ToolExecutor([McpProvider("models", server)]) as executor:
        schemas = executor.schemas()
        assert "$ref" in json.dumps(schemas) and "anyOf" in json.dumps(schemas)  # the shapes under test
        body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in values.items())
        calls = call_parser("qwen3_coder", schemas)(
            f"<tool_call>\n<function=plan>\n{body}</function>\n</tool_call>"
        )
        [record] = executor.execute(calls)
    assert record.error is None, record.error
    assert json.loads(record.observation) == {
        "where": {"city": "Paris", "days": 2},
        "pet": "Dog",
        "backup": {"city": "Lyon", "days": 1},
        "stops": ["Dijon"],
        "tree": ["a"],
        "hourly": True,
    }
