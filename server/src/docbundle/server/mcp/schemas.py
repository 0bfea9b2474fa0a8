"""The published tool schemas, made tight: what pydantic generates, minus what only costs a model tokens.

pydantic's JSON Schema for a tool's arguments and result carries a generated ``title`` on every
property ("Libraryid", "Maxtokens"), spells every optional field ``anyOf [X, {"type": "null"}]`` and
marks nothing required that has a default. ``tidy_input`` and ``tidy_output`` rewrite that, and the
tests pin the result (``tests/server/test_server_mcp_surface.py``), so a schema changes only on purpose.
``publish`` applies them to a tool as ``tools/list`` gives it (the SDK's own ``Tool`` is left as built):

- no ``title`` keywords (the tool has one title, the properties have names and descriptions);
- an argument that may be omitted is published as its type, without ``null`` and without
  ``"default": null`` (leaving it out means the same; the server still accepts an explicit null);
- a result field that may be null is ``"type": [T, "null"]``; result schemas carry the structure only:
  no descriptions and no defaults (the tool's description and docs/server.md say what the fields mean),
  and no ``required`` (every result carries all of its fields); a part used once is written in place
  rather than as a ``$defs`` entry. That is what keeps tools/list within its budget
  (``TOOLS_LIST_BUDGET``; output schemas were two thirds of it).

The server validates structured content against the pydantic model, and clients validate it against
the published schema: both must accept every result (the tests call every tool and check both).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from mcp.types import Tool as MCPTool

# The size budget of a tools/list answer, in bytes of compact JSON (a test holds it). 12 KiB until
# list_libraries' result gained `provenance` (issue 34: 85 bytes, 12,363 in all); 12.5 KiB since.
TOOLS_LIST_BUDGET = 12 * 1024 + 512

# Keywords whose value is a mapping of names to schemas, or a list of schemas.
_NAMED = ("properties", "$defs", "patternProperties")
_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SINGLE = ("items", "additionalProperties", "not")


def publish(tool: MCPTool, required: tuple[str, ...] = ()) -> MCPTool:
    """``tool`` with tight schemas; ``required`` arguments (optional in the function, because another
    argument can stand in for them) are published as required too."""
    schema = copy.deepcopy(tool.input_schema)
    require(schema, required)
    update: dict[str, Any] = {"input_schema": tidy_input(schema)}
    if tool.output_schema is not None:
        update["output_schema"] = tidy_output(tool.output_schema)
    return tool.model_copy(update=update)


def require(schema: dict[str, Any], names: tuple[str, ...]) -> None:
    """Publish arguments as required that the function takes as optional (another can stand in)."""
    props = schema.get("properties", {})
    for name in names:
        prop = props[name]
        prop.pop("default", None)
        branches = [b for b in prop.pop("anyOf", []) if b.get("type") != "null"]
        if len(branches) == 1:
            prop.update(branches[0])
    schema["required"] = [*schema.get("required", []), *names]


def tidy_input(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's argument schema without generated titles, nullable branches or null defaults."""
    return _walk(schema, output=False, root=True)


def tidy_output(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's result schema without titles and docstrings; nullable fields as ``[T, "null"]``."""
    return _inline_single_use(_walk(schema, output=True, root=True))


def _inline_single_use(schema: dict[str, Any]) -> dict[str, Any]:
    """Write each ``$defs`` entry referenced once where it is referenced."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict):
        return schema
    text = json.dumps(schema)
    once = {name for name in defs if text.count(f'"#/$defs/{name}"') == 1}

    def put(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if isinstance(ref, str) and ref.removeprefix("#/$defs/") in once:
                return put(defs[ref.removeprefix("#/$defs/")])
            # A nullable reference, once written in place, is a nullable object: ``[object, "null"]``.
            return _collapse_null({k: put(v) for k, v in node.items() if k != "$defs"}, output=True)
        if isinstance(node, list):
            return [put(v) for v in node]
        return node

    out: dict[str, Any] = put(schema)
    kept = {name: put(sub) for name, sub in defs.items() if name not in once}
    if kept:
        out["$defs"] = kept
    return out


def _walk(node: dict[str, Any], *, output: bool, root: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue
        if key == "description" and output:
            continue
        if key in _NAMED and isinstance(value, dict):
            out[key] = {name: _walk(sub, output=output) for name, sub in value.items()}
        elif key in _LISTS and isinstance(value, list):
            out[key] = [_walk(sub, output=output) for sub in value]
        elif key in _SINGLE and isinstance(value, dict):
            out[key] = _walk(value, output=output)
        else:
            out[key] = value
    out = _collapse_null(out, output=output)
    if output:
        out.pop("default", None)
        out.pop("required", None)
    elif out.get("default", 0) is None:
        del out["default"]
    if root and not output:
        out["required"] = out.pop("required", [])  # last, wherever pydantic put it
    return out


def _collapse_null(node: dict[str, Any], *, output: bool) -> dict[str, Any]:
    """``anyOf [..., {"type": "null"}]``: the other branch(es), or ``[T, "null"]`` in a result."""
    branches = node.get("anyOf")
    if not isinstance(branches, list) or {"type": "null"} not in branches:
        return node
    rest = [b for b in branches if b != {"type": "null"}]
    merged = {k: v for k, v in node.items() if k != "anyOf"}
    if len(rest) != 1:
        if output:
            return node  # several non-null branches: keep the null one too
        merged["anyOf"] = rest
        return merged
    (only,) = rest
    if not output:
        return {**only, **merged}
    kind = only.get("type")
    if not isinstance(kind, str) or "$ref" in only:
        return node  # a nullable reference stays an anyOf
    nullable = {**only, **merged, "type": [kind, "null"]}
    if "enum" in nullable:
        nullable["enum"] = [*nullable["enum"], None]
    return nullable
