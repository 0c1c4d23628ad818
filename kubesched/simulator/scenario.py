"""The scenario file of ``kubesched simulate --scenario``: timed steps that change the cluster while
it runs on the virtual clock (docs/scenarios.md describes the format).

::

    apiVersion: kubesched.io/v1alpha1
    kind: Scenario
    steps:
    - at: 90s
      drain: {nodes: [node-a]}

Every step has ``at`` (a Go duration from the start of scheduling) and exactly one operation. The
whole file is checked before the simulation starts: manifests it applies are read and validated,
and every error names the step and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from kubesched.api.apierrors import APIError
from kubesched.api.errors import KubeschedError
from kubesched.api.golang import DurationError, format_duration, parse_duration
from kubesched.api.kinds import Kind, kind_for, kind_named
from kubesched.api.manifests import check_all, load
from kubesched.api.selectors import LabelSelector
from kubesched.apiserver.selectors import parse_label_selector_string

NANOSECONDS = 1e9


class ScenarioError(KubeschedError, ValueError):
    """A scenario file that cannot be read or is not valid: every problem, each with its field path."""

    def __init__(self, source: str, problems: list[str]) -> None:
        super().__init__(f"{source}: invalid scenario: " + "; ".join(problems))
        self.source = source
        self.problems = problems


def seconds(text: str) -> float:
    """A non-negative Go duration in seconds, with ``time.ParseDuration``'s messages."""
    try:
        ns = parse_duration(text)
    except DurationError as e:
        raise ValueError(str(e)) from None
    if ns < 0:
        raise ValueError(f"must not be negative, got {text}")
    return ns / NANOSECONDS


def describe_seconds(value: float) -> str:
    """Virtual seconds as Go prints durations (``1m30s``)."""
    return format_duration(round(value * NANOSECONDS))


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class NodeSelection(_Model):
    """Which nodes an operation applies to: by name, or every node a label selector matches."""

    nodes: list[Annotated[str, Field(min_length=1)]] = []
    selector: str | None = None

    @field_validator("selector")
    @classmethod
    def _selector_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                if parse_label_selector_string(value) is None:
                    raise ValueError("must not be empty (name the nodes instead, or select them by label)")
            except APIError as e:
                raise ValueError(str(e)) from None
        return value

    @model_validator(mode="after")
    def _one_way(self) -> NodeSelection:
        if bool(self.nodes) == (self.selector is not None):
            raise ValueError("give either nodes (names) or selector (a label selector), not both and not neither")
        return self

    def label_selector(self) -> LabelSelector | None:
        return parse_label_selector_string(self.selector) if self.selector is not None else None

    def describe(self) -> str:
        return ", ".join(self.nodes) if self.nodes else f"nodes matching {self.selector}"


class Drain(NodeSelection):
    """``kubectl drain --ignore-daemonsets --delete-emptydir-data --force``: cordon, then evict."""

    timeout: str | None = None
    grace_period_seconds: int | None = Field(default=None, alias="gracePeriodSeconds", ge=0)

    @field_validator("timeout")
    @classmethod
    def _timeout_parses(cls, value: str | None) -> str | None:
        if value is not None and seconds(value) == 0:
            raise ValueError("must be positive (leave it out to wait as long as the simulation runs)")
        return value

    def timeout_seconds(self) -> float | None:
        return seconds(self.timeout) if self.timeout is not None else None


Effect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class TaintSpec(_Model):
    key: str = Field(min_length=1)
    value: str = ""
    effect: Effect

    def describe(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


class TaintRef(_Model):
    """A taint to remove: ``key`` with one effect, or every effect when ``effect`` is left out."""

    key: str = Field(min_length=1)
    effect: Effect | None = None

    def describe(self) -> str:
        return f"{self.key}:{self.effect}-" if self.effect else f"{self.key}-"


class Taint(NodeSelection):
    taints: list[TaintSpec] = Field(min_length=1)


class Untaint(NodeSelection):
    taints: list[TaintRef] = Field(min_length=1)


class ObjectRef(_Model):
    """An object by kind and name (``namespace`` is ignored for cluster-scoped kinds)."""

    kind: str
    name: str = Field(min_length=1)
    namespace: str = "default"
    api_version: str | None = Field(default=None, alias="apiVersion")

    @model_validator(mode="after")
    def _kind_served(self) -> ObjectRef:
        self.resolve()
        return self

    def resolve(self) -> Kind:
        """The served kind, from ``apiVersion`` and ``kind`` or (without ``apiVersion``) the kind alone."""
        found = kind_for(self.api_version, self.kind) if self.api_version else kind_named(self.kind)
        if found is None:
            served = f"{self.api_version} {self.kind}" if self.api_version else self.kind
            raise ValueError(f"kind {served} is not served by kubesched")
        return found

    def describe(self) -> str:
        scoped = f"{self.namespace}/" if self.resolve().namespaced else ""
        return f"{self.kind} {scoped}{self.name}"


class Scale(_Model):
    kind: Literal["Deployment", "ReplicaSet", "StatefulSet", "ReplicationController"]
    name: str = Field(min_length=1)
    namespace: str = "default"
    replicas: int = Field(ge=0)

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name} to {self.replicas} replicas"


class Apply(_Model):
    """Manifests to create, or to replace when they exist: files (relative to the scenario file)
    and inline objects. ``manifests`` holds both, read and validated when the file is loaded."""

    files: list[str] = []
    objects: list[dict[str, Any]] = []
    _manifests: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def manifests(self) -> list[dict[str, Any]]:
        return self._manifests

    @model_validator(mode="after")
    def _something(self) -> Apply:
        if not self.files and not self.objects:
            raise ValueError("give files or objects to apply")
        return self

    def describe(self) -> str:
        kinds: dict[str, int] = {}
        for obj in self.manifests:
            kinds[str(obj.get("kind"))] = kinds.get(str(obj.get("kind")), 0) + 1
        return ", ".join(f"{n} {kind}" for kind, n in kinds.items())


class AddNodes(_Model):
    """``count`` nodes made from ``template`` (a Node manifest without a name), named
    ``prefix`` followed by the first free numbers from 1."""

    count: int = Field(ge=1, le=100_000)
    prefix: str = Field(min_length=1, max_length=200)
    template: dict[str, Any]

    @model_validator(mode="after")
    def _template_is_a_node(self) -> AddNodes:
        template = self.template
        if template.get("kind", "Node") != "Node" or template.get("apiVersion", "v1") != "v1":
            raise ValueError("template must be a v1 Node")
        if (template.get("metadata") or {}).get("name"):
            raise ValueError("template.metadata.name must not be set: the names come from prefix")
        return self

    def node(self, name: str) -> dict[str, Any]:
        """The template as the Node called ``name``."""
        metadata = {**(self.template.get("metadata") or {}), "name": name}
        return {**self.template, "apiVersion": "v1", "kind": "Node", "metadata": metadata}

    def describe(self) -> str:
        return f"{self.count} node(s) named {self.prefix}<n>"


#: The operations, by the key a step names them with.
OPERATIONS: dict[str, str] = {
    "apply": "apply", "delete": "delete", "scale": "scale", "cordon": "cordon", "uncordon": "uncordon",
    "drain": "drain", "taint": "taint", "untaint": "untaint", "failNode": "fail_node",
    "recoverNode": "recover_node", "addNodes": "add_nodes", "removeNodes": "remove_nodes",
}


class Step(_Model):
    at: str
    name: str | None = None
    apply: Apply | None = None
    delete: list[ObjectRef] | None = Field(default=None, min_length=1)
    scale: Scale | None = None
    cordon: NodeSelection | None = None
    uncordon: NodeSelection | None = None
    drain: Drain | None = None
    taint: Taint | None = None
    untaint: Untaint | None = None
    fail_node: NodeSelection | None = Field(default=None, alias="failNode")
    recover_node: NodeSelection | None = Field(default=None, alias="recoverNode")
    add_nodes: AddNodes | None = Field(default=None, alias="addNodes")
    remove_nodes: NodeSelection | None = Field(default=None, alias="removeNodes")

    @field_validator("at", mode="before")
    @classmethod
    def _at_parses(cls, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be a duration with a unit, such as 90s or 1m30s, got {value!r}")
        seconds(value)
        return value

    @model_validator(mode="after")
    def _one_operation(self) -> Step:
        given = self.operations()
        if len(given) != 1:
            named = ", ".join(given) if given else "none"
            raise ValueError(f"a step has exactly one operation of {', '.join(OPERATIONS)}; got {named}")
        return self

    def operations(self) -> list[str]:
        return [key for key, attr in OPERATIONS.items() if getattr(self, attr) is not None]

    @property
    def operation(self) -> str:
        return self.operations()[0]

    @property
    def argument(self) -> Any:
        return getattr(self, OPERATIONS[self.operation])

    @property
    def seconds(self) -> float:
        return seconds(self.at)

    def describe(self) -> str:
        """One line: the operation and what it applies to."""
        arg = self.argument
        if isinstance(arg, list):
            what = ", ".join(ref.describe() for ref in arg)
        elif isinstance(arg, Taint | Untaint):
            what = f"{arg.describe()}: {', '.join(t.describe() for t in arg.taints)}"
        else:
            what = arg.describe()
        label = f" ({self.name})" if self.name else ""
        return f"{self.operation} {what}{label}"


class Scenario(_Model):
    api_version: Literal["kubesched.io/v1alpha1"] = Field(alias="apiVersion")
    kind: Literal["Scenario"]
    metadata: dict[str, Any] = {}
    steps: list[Step] = Field(min_length=1)

    @model_validator(mode="after")
    def _in_time_order(self) -> Scenario:
        for index in range(1, len(self.steps)):
            before, step = self.steps[index - 1], self.steps[index]
            if step.seconds < before.seconds:
                raise ValueError(f"steps[{index}].at: {step.at} is before the previous step's {before.at}; "
                                 "list the steps in time order")
        return self


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and resolve a scenario file (``apply`` files relative to it)."""
    source = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(source, [f"cannot read: {e}"]) from e
    return parse_scenario(text, source, Path(path).parent)


def parse_scenario(text: str, source: str, base: Path | None) -> Scenario:
    """Validate and resolve a scenario's text. ``apply`` files are read relative to ``base``; with
    no ``base`` (a scenario uploaded to the web UI, which must not make the server read its files)
    naming files is an error."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ScenarioError(source, [f"not YAML: {e}"]) from e
    if not isinstance(doc, dict):
        raise ScenarioError(source, ["the file must hold one mapping (apiVersion, kind, steps)"])
    try:
        scenario = Scenario.model_validate(doc)
    except ValidationError as e:
        raise ScenarioError(source, [_problem(error, doc) for error in e.errors()]) from None
    _resolve_manifests(scenario, base, source)
    return scenario


def _problem(error: Any, doc: dict) -> str:
    """One pydantic error as ``steps[2] (at 90s): drain.timeout: message``."""
    loc = [part for part in error["loc"] if not (isinstance(part, str) and "[" in part)]
    message = str(error["msg"]).removeprefix("Value error, ")
    if len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int):
        step = (doc.get("steps") or [])[loc[1]]
        at = f" (at {step['at']})" if isinstance(step, dict) and isinstance(step.get("at"), str) else ""
        rest = _path(loc[2:])
        return f"steps[{loc[1]}]{at}: {rest + ': ' if rest else ''}{message}"
    rest = _path(loc)
    return f"{rest + ': ' if rest else ''}{message}"


def _path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _resolve_manifests(scenario: Scenario, base: Path | None, source: str) -> None:
    """Read the files of every ``apply`` step and validate all its objects, and every ``addNodes``
    template as the Node it makes, so that bad input fails before the simulation starts."""
    for index, step in enumerate(scenario.steps):
        where = f"steps[{index}] (at {step.at})"
        if base is None and step.apply is not None and step.apply.files:
            raise ScenarioError(source, [f"{where}: apply.files: an uploaded scenario cannot name files; "
                                         "put the manifests under apply.objects"])
        try:
            if step.apply is not None:
                files = [str(base / f) for f in step.apply.files] if base is not None else []
                manifests = (load(files) if files else []) + _checked_objects(step.apply.objects, f"{source} {where}")
                step.apply._manifests = manifests
            if step.add_nodes is not None:
                check_all([step.add_nodes.node(f"{step.add_nodes.prefix}1")], f"{source} {where}: addNodes.template")
        except KubeschedError as e:
            raise ScenarioError(source, [f"{where}: {e}"]) from e


def _checked_objects(objects: list[dict[str, Any]], source: str) -> list[dict[str, Any]]:
    for index, obj in enumerate(objects):
        api_version = str(obj.get("apiVersion", ""))
        custom = "/" in api_version and "." in api_version.partition("/")[0]  # a CRD's, found when the step runs
        if kind_for(api_version, str(obj.get("kind", ""))) is None and not custom:
            raise ScenarioError(source, [f"apply.objects[{index}]: kind {obj.get('apiVersion')} {obj.get('kind')} "
                                         "is not served by kubesched"])
    check_all(objects, source)
    return list(objects)
