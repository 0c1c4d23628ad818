"""Limits on what a request body may become once decoded, so a small body cannot grow into a large
object (alias expansion, JSON patch copies), nest deeper than the server can encode, or hold more
than a stored object may.

* Bodies are limited before decoding (``MAX_BODY``, kube-apiserver's 3 MiB ``MaxRequestBodyBytes``).
* A decoded object, and the object a patch produces, may not encode to more than ``MAX_OBJECT``
  bytes of JSON either: 413 RequestEntityTooLarge with the body limit's message, the answer a
  client already knows. (etcd refuses such objects behind kube-apiserver; here the limit is the
  same as the body's, so everything a valid body carries fits.)
* Nesting is limited to ``MAX_DEPTH`` levels. Go's decoders stop at 10000; kubesched's JSON
  encoder stops at 254, so an object deeper than that could be stored but never served again.
  Real objects nest a few dozen levels at most.
* YAML aliases expand under go-yaml's rule (``document contains excessive aliasing``: beyond 100
  alias-driven nodes in documents of over 1000 nodes, aliases may drive at most 99% of the nodes,
  falling to 10% between 400k and 4M nodes), and the text their scalars expand to counts towards
  ``MAX_OBJECT``, which go-yaml's node count alone would not catch (one 1 MiB scalar aliased a
  thousand times).
"""

from __future__ import annotations

import math
from typing import Any, cast

import orjson
import yaml
from yaml.error import Mark
from yaml.events import AliasEvent, MappingEndEvent, MappingStartEvent, ScalarEvent, SequenceEndEvent, SequenceStartEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kubesched.api.apierrors import BadRequest, TooLarge
from kubesched.api.manifests import construct_mapping_with_duplicates

#: kube-apiserver's ``MaxRequestBodyBytes``.
MAX_BODY = 3 * 1024 * 1024
#: The largest object (as JSON) a body may decode or a patch may grow to.
MAX_OBJECT = MAX_BODY
#: The deepest nesting accepted in a decoded body or a patched object; what the server sends holds
#: it a few levels deeper (a list's items, a watch event, a Table row), within the encoder's limit.
MAX_DEPTH = 200
_ENCODER_DEPTH = 254

_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


def too_large() -> TooLarge:
    """kube-apiserver's 413 for a body past its limit, also given for what a body decodes to."""
    return TooLarge(f"Request entity too large: limit is {MAX_BODY}")


def check_depth(value: Any) -> bytes | None:
    """Raise 400 when ``value`` nests deeper than ``MAX_DEPTH``. The JSON encoder, which stops at
    its own limit, measures it (wrapped so its limit falls at ``MAX_DEPTH``): no Python recursion.
    Returns that encoding (``value``'s JSON inside brackets), or None when the encoder cannot
    write ``value`` (an integer past 64 bits)."""
    wrapped = value
    for _ in range(_ENCODER_DEPTH - MAX_DEPTH):
        wrapped = [wrapped]
    try:
        return orjson.dumps(wrapped)
    except TypeError as e:
        too_deep = "Recursion" in str(e) if "Integer" not in str(e) else _deeper_than(value, MAX_DEPTH)
        if too_deep:
            raise BadRequest(f"exceeded max depth of {MAX_DEPTH}") from None
        return None


def _deeper_than(value: Any, limit: int) -> bool:
    """The depth check for what the encoder cannot measure (an integer past 64 bits), as a loop."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth >= limit:
                return True
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return False


def allowed_alias_ratio(decoded: int) -> float:
    """go-yaml's ``allowedAliasRatio``: the share of decoded nodes aliases may account for."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


class _Frame:
    """A collection being composed: its node, its anchor, the key awaiting its value (mappings),
    and the nodes and text it expands to so far."""

    __slots__ = ("anchor", "key", "node", "size", "text")

    def __init__(self, node: Node, anchor: str | None) -> None:
        self.node = node
        self.anchor = anchor
        self.key: Node | None = None
        self.size = 1
        self.text = 2


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader with an iterative composer that bounds depth, alias expansion and the
    expanded text, and refuses an alias to a node still being composed (a cycle)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._sizes: dict[int, tuple[int, int]] = {}
        self._decoded = 0
        self._aliased = 0
        self._text = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        """PyYAML's recursive composer, as a loop over an explicit stack (``parent``/``index`` only
        serve path resolvers, which the safe loader has none of)."""
        stack: list[_Frame] = []
        open_anchors: set[str] = set()
        while True:
            finished, size, text = self._next_node(stack, open_anchors)
            if finished is None:
                continue
            if not stack:
                return finished
            self._attach(stack[-1], finished, size, text)

    def _next_node(self, stack: list[_Frame], open_anchors: set[str]) -> tuple[Node | None, int, int]:
        """Consume one event: a finished node with its expanded size and text, or None after
        opening a collection."""
        event = self.get_event()
        if isinstance(event, AliasEvent):
            return self._alias(event, open_anchors)
        if isinstance(event, ScalarEvent):
            tag = event.tag if event.tag not in (None, "!") else self.resolve(ScalarNode, event.value, event.implicit)
            node: Node = ScalarNode(tag, event.value, _mark(event.start_mark), _mark(event.end_mark), style=event.style)
            return self._finish(node, event.anchor, 1, len(event.value) + 2)
        if isinstance(event, (SequenceStartEvent, MappingStartEvent)):
            if len(stack) >= MAX_DEPTH:
                raise BadRequest(f"error converting YAML to JSON: yaml: exceeded max depth of {MAX_DEPTH}")
            cls = SequenceNode if isinstance(event, SequenceStartEvent) else MappingNode
            tag = event.tag if event.tag not in (None, "!") else self.resolve(cls, None, event.implicit)
            stack.append(_Frame(cls(tag, [], _mark(event.start_mark), None, flow_style=event.flow_style), event.anchor))
            if event.anchor is not None:
                open_anchors.add(event.anchor)
            return None, 0, 0
        assert isinstance(event, (SequenceEndEvent, MappingEndEvent))
        frame = stack.pop()
        frame.node.end_mark = event.end_mark
        if frame.anchor is not None:
            open_anchors.discard(frame.anchor)
        return self._finish(frame.node, frame.anchor, frame.size, frame.text)

    def _alias(self, event: AliasEvent, open_anchors: set[str]) -> tuple[Node, int, int]:
        anchor = event.anchor
        if anchor in open_anchors:
            raise BadRequest(f"error converting YAML to JSON: yaml: anchor '{anchor}' value contains itself")
        if anchor not in self.anchors:
            raise BadRequest(f"error converting YAML to JSON: yaml: unknown anchor '{anchor}' referenced")
        node = self.anchors[anchor]
        size, text = self._sizes[id(node)]
        self._decoded += size
        self._aliased += size
        self._count(0, text)
        ratio = self._aliased / self._decoded
        if self._aliased > 100 and self._decoded > 1000 and ratio > allowed_alias_ratio(self._decoded):
            raise BadRequest("error converting YAML to JSON: yaml: document contains excessive aliasing")
        return node, size, text

    def _finish(self, node: Node, anchor: str | None, size: int, text: int) -> tuple[Node, int, int]:
        if anchor is not None:
            self.anchors[anchor] = node
            self._sizes[id(node)] = (size, text)
        self._count(1, text if isinstance(node, ScalarNode) else 2)
        return node, size, text

    def _count(self, nodes: int, text: int) -> None:
        self._decoded += nodes
        self._text += text
        if self._text > MAX_OBJECT:
            raise too_large()

    @staticmethod
    def _attach(frame: _Frame, child: Node, size: int, text: int) -> None:
        frame.size += size
        frame.text += text + 1
        if isinstance(frame.node, SequenceNode):
            frame.node.value.append(child)
        elif frame.key is None:
            frame.key = child
        else:
            frame.node.value.append((frame.key, child))
            frame.key = None


def _scalar_text(loader: BoundedLoader, node: ScalarNode) -> Any:
    """A timestamp stays the text it was, as go-yaml leaves it for JSON."""
    return loader.construct_scalar(node)


def _binary_text(loader: BoundedLoader, node: ScalarNode) -> str:
    """``!!binary``: its decoded bytes as text (invalid UTF-8 replaced, as Go's JSON encoder does)."""
    return loader.construct_yaml_binary(node).decode("utf-8", "replace")


def _set_map(loader: BoundedLoader, node: MappingNode) -> Any:
    """``!!set``: the mapping of members to null it is written as."""
    data: dict = {}
    yield data
    data.update(loader.construct_mapping(node))


def _sequence(loader: BoundedLoader, node: SequenceNode) -> Any:
    """``!!omap`` and ``!!pairs``: the sequence of one-key mappings they are written as."""
    return loader.construct_yaml_seq(node)


BoundedLoader.add_constructor("tag:yaml.org,2002:timestamp", _scalar_text)
BoundedLoader.add_constructor("tag:yaml.org,2002:binary", _binary_text)
BoundedLoader.add_constructor("tag:yaml.org,2002:set", _set_map)
BoundedLoader.add_constructor("tag:yaml.org,2002:omap", _sequence)
BoundedLoader.add_constructor("tag:yaml.org,2002:pairs", _sequence)


def _json_key(key: Any) -> str:
    """A mapping key as JSON needs it, converted as sigs.k8s.io/yaml converts keys."""
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        text = {math.inf: ".inf", -math.inf: "-.inf"}.get(key, ".nan" if math.isnan(key) else repr(key))
        return text[:-2] if text.endswith(".0") else text
    shown = "null" if key is None else type(key).__name__
    raise BadRequest(f"error converting YAML to JSON: unsupported map key of type: {shown}")


def _jsonable(root: Any) -> None:
    """Make the decoded document what its JSON would be, in place: keys become strings; a value
    JSON cannot hold (an infinity, NaN) is the encoder's error."""
    stack, seen = [root], set()
    while stack:
        item = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            shown = "NaN" if math.isnan(item) else ("+Inf" if item > 0 else "-Inf")
            raise BadRequest(f"error converting YAML to JSON: json: unsupported value: {shown}")
        if not isinstance(item, (dict, list)) or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, dict):
            if not all(isinstance(key, str) for key in item):
                converted = {_json_key(key): value for key, value in item.items()}
                item.clear()
                item.update(converted)
            stack.extend(item.values())
        else:
            stack.extend(item)


def _mark(mark: object) -> Mark | None:
    """The pure-Python parser's marks (the C parser, which this loader does not use, has its own type)."""
    return cast(Mark | None, mark)


class StrictBoundedLoader(BoundedLoader):
    """The bounded loader whose mappings remember keys given twice (strict decoding reports them)."""


StrictBoundedLoader.add_constructor("tag:yaml.org,2002:map", construct_mapping_with_duplicates)


def load_yaml(text: str, *, duplicates: bool = False) -> Any:
    """One YAML document, decoded within the limits above; YAML errors are 400 BadRequest. With
    ``duplicates``, mappings remember keys given twice."""
    loader = (StrictBoundedLoader if duplicates else BoundedLoader)(text)
    try:
        document = loader.get_single_data()
        _jsonable(document)
        return document
    except yaml.YAMLError as e:
        raise BadRequest(f"error converting YAML to JSON: {e}") from None
    finally:
        loader.dispose()
