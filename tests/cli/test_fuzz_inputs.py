"""Property: no manifest or configuration, however broken, gets a traceback from the CLI.

Valid inputs (the examples, small built objects, scheduler configurations with plugin args) are
mutated at a random place (a wrong type, a missing field, a huge number, unicode, deep nesting,
a random key, a duplicated key) and fed to the real entry point in-process. Every run must
either succeed or exit non-zero with a single ``error:`` line naming the file and the object or
field, and nothing may log an exception (a controller crashing in the background counts).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

from kubesched.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"zone": "a"}},
        "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]},
        "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "shop", "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "100m"}},
                                "ports": [{"containerPort": 80, "hostPort": 8080}]}],
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "nodeSelector": {"zone": "a"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 10, "podAffinityTerm": {
                        "topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "web"}}}}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"app": "web"}}}]}}
TEMPLATE = {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "c", "image": "pg"}]}}
DEPLOYMENT = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
              "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "db"}}, "template": TEMPLATE,
                       "strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}}
STATEFULSET = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "db"},
               "spec": {"replicas": 1, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}}, "template": TEMPLATE,
                        "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                            "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
                            "resources": {"requests": {"storage": "1Gi"}}}}]}}
STORAGE = [
    {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "local"},
     "provisioner": "kubernetes.io/no-provisioner", "volumeBindingMode": "WaitForFirstConsumer"},
    {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": "pv1"},
     "spec": {"capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "local",
              "hostPath": {"path": "/data"}}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c1"},
     "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "local", "resources": {"requests": {"storage": "1Gi"}}}},
]
PRIORITY = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 1000},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "shop"},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}}]
CLAIMS = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}},
          {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "rc", "namespace": "shop"},
           "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu"}}]}}},
          {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "q", "namespace": "shop"},
           "spec": {"containers": [{"name": "c", "image": "i"}], "resourceClaims": [{"name": "g", "resourceClaimName": "rc"}]}}]


def _example_documents() -> list[list[dict]]:
    sets = []
    for directory in ("examples/cluster", "examples/preemption"):
        docs = [d for f in sorted((ROOT / directory).glob("*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
        sets.append(docs)
    return sets


MANIFESTS: list[list[dict]] = [[NODE, POD], [NODE, DEPLOYMENT], [NODE, STATEFULSET, *STORAGE], [NODE, *PRIORITY, POD],
                               [NODE, *CLAIMS], *_example_documents()]

#: Which manifest set each example starts from: the small built sets more often than the
#: examples, whose simulations take several times longer.
MANIFEST_DRAWS = [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 6]

CONFIG = "kubescheduler.config.k8s.io/v1"
CONFIGS: list[dict] = [
    {"apiVersion": CONFIG, "kind": "KubeSchedulerConfiguration"},
    {"apiVersion": CONFIG, "kind": "KubeSchedulerConfiguration", "percentageOfNodesToScore": 50, "parallelism": 4,
     "profiles": [{"schedulerName": "default-scheduler", "plugins": {
         "score": {"enabled": [{"name": "NodeResourcesBalancedAllocation", "weight": 2}], "disabled": [{"name": "ImageLocality"}]}},
         "pluginConfig": [
             {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated",
                                                                       "resources": [{"name": "cpu", "weight": 1}]}}},
             {"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
                 {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}]}},
             {"name": "InterPodAffinity", "args": {"hardPodAffinityWeight": 5}},
             {"name": "DefaultPreemption", "args": {"minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 50}},
             {"name": "NodeAffinity", "args": {"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                 "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}}}},
             {"name": "VolumeBinding", "args": {"bindTimeoutSeconds": 600}},
         ]}]},
    {"apiVersion": CONFIG, "kind": "KubeSchedulerConfiguration",
     "leaderElection": {"leaderElect": False, "leaseDuration": "15s"},
     "profiles": [{"schedulerName": "a"}, {"schedulerName": "b", "plugins": {"multiPoint": {"disabled": [{"name": "*"}]}}}],
     "extenders": [{"urlPrefix": "http://127.0.0.1:1", "filterVerb": "filter", "weight": 1}]},
]

#: Reproducible (a fixed seed), no deadline, and no shrinking: a failing input is reported as
#: found, which is readable enough here and keeps a failing run as short as a passing one.
FUZZ: dict[str, Any] = {
    "derandomize": True, "deadline": None, "database": None, "phases": (Phase.explicit, Phase.generate),
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
}

_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_SCALARS = st.one_of(
    st.none(), st.booleans(), _TEXT,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, 10**30, 1.5, -0.0, 1e308]),
    st.sampled_from(["x", "", "all", "yes", "three", "abc", "1Gi", "100m", "-1", "1e3", "25%", "NaN", "ünïcødé", "a" * 300]),
)
_VALUES = st.recursive(_SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                        st.dictionaries(_TEXT, inner, max_size=3)), max_leaves=8)


def _deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"a": [value]}
    return value


@st.composite
def _mutation(draw: st.DrawFn) -> tuple[str, Any, int]:
    """(operation, new value or size, where): ``where`` picks the node to change, modulo the node
    count. ``same_type`` carries a value of each JSON type and applies the one of the node's type
    (so that the input still decodes and reaches validation, controllers and the scheduler).
    Deep and huge values are drawn as their size and built when applied, so that a report of the
    input stays printable."""
    operation = draw(st.sampled_from(["replace", "replace", "same_type", "same_type", "same_type", "delete", "add_key",
                                      "deep", "huge_string"]))
    value: Any = None
    if operation in ("replace", "add_key"):
        value = draw(_VALUES)
    elif operation == "same_type":
        value = {"int": draw(st.one_of(st.integers(min_value=-3, max_value=3), st.sampled_from([-(2**31), 2**31 - 1, 10**6]))),
                 "str": draw(st.one_of(_TEXT, st.sampled_from(["", "0", "-1", "1e3", "25%", "Exists", "NoSchedule", "a/b"]))),
                 "bool": draw(st.booleans()), "list": draw(st.sampled_from(["empty", "twice"]))}
    elif operation == "deep":
        value = draw(st.integers(min_value=10, max_value=200))
    elif operation == "huge_string":
        value = draw(st.sampled_from([70_000, 300_000]))
    return operation, value, draw(st.integers(min_value=0, max_value=10_000))


def _same_type(node: Any, values: dict[str, Any]) -> Any:
    """A value of the node's own JSON type (a list emptied or its first item given twice)."""
    if isinstance(node, bool):
        return values["bool"]
    if isinstance(node, int):
        return values["int"]
    if isinstance(node, str):
        return values["str"]
    if isinstance(node, list):
        return [] if values["list"] == "empty" or not node else [node[0], *node]
    return {} if isinstance(node, dict) else node


def _nodes(doc: Any, path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    yield path, doc
    if isinstance(doc, dict):
        for key, value in doc.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(doc, list):
        for i, value in enumerate(doc):
            yield from _nodes(value, (*path, i))


def _mutate(doc: Any, mutation: tuple[str, Any, int], key: str) -> Any:
    operation, value, where = mutation
    if operation == "deep":
        value = _deep(value)
    elif operation == "huge_string":
        value = "x" * value
    nodes = [(p, n) for p, n in _nodes(doc) if p]
    if not nodes:
        return value
    path, node = nodes[where % len(nodes)]
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if operation == "delete":
        del parent[last]
    elif operation == "same_type":
        parent[last] = _same_type(node, value)
    elif operation == "add_key" and isinstance(node, dict):
        node[key] = value
    else:
        parent[last] = value
    return doc


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


class _Tracebacks(logging.Handler):
    """Log records that carry an exception: a component crashed even if the command succeeded."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info:
            self.records.append(record)


@pytest.fixture(scope="module")
def tracebacks() -> Iterator[_Tracebacks]:
    handler = _Tracebacks()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


#: A log line as ``--logging-format text`` writes it (``W kubesched.scheduler.scheduler] ...``).
KLOG_LINE = re.compile(r"^[IWEF]\S* ?\S*\] ")


def _assert_clean(code: int, err: str, source: Path, tracebacks: _Tracebacks, names: set[str]) -> None:
    """Success, or one ``error:`` line naming the file, or the object (errors raised after loading
    name it as their upstream counterparts do: the store's by kind, the framework's by profile)."""
    event(f"exit code {code}")  # --hypothesis-show-statistics shows how many inputs got how far
    logged = [r.getMessage() for r in tracebacks.records]
    tracebacks.records.clear()
    assert not logged, f"exception logged: {logged}"
    assert "Traceback" not in err
    if code == 0:
        return
    # Log records (klog's "W..." lines, e.g. a configuration's warnings) may come before the error.
    lines = [line for line in err.splitlines() if line.strip() and not KLOG_LINE.match(line)]
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), lines[0]
    assert str(source) in lines[0] or any(name in lines[0] for name in names), lines[0]


def _write(directory: Path, docs: list, mutations: list[tuple[str, Any, int]], duplicate: bool) -> Path:
    """The documents as YAML, or as JSON when deeply nested (PyYAML's writer recurses per level);
    with ``duplicate``, the first object's ``kind`` is given twice."""
    if any(operation == "deep" for operation, _, _ in mutations):
        path, text = directory / "input.json", "\n".join(json.dumps(doc, ensure_ascii=False) for doc in docs)
        if duplicate:
            text = text.replace('"kind": ', '"kind": "List", "kind": ', 1)
    else:
        path, text = directory / "input.yaml", yaml.dump_all(docs, Dumper=_Dumper, allow_unicode=True, width=10**9)
        if duplicate:
            text = text.replace("kind:", "kind: List\nkind:", 1)
    path.write_text(text, encoding="utf-8")
    return path


@settings(max_examples=1100, **FUZZ)
@given(base=st.sampled_from(MANIFEST_DRAWS), mutations=st.lists(_mutation(), min_size=1, max_size=2),
       key=st.sampled_from(["nodeSelecter", "resource", "", "ü", "spec", "x" * 64]), duplicate=st.booleans())
def test_mutated_manifests_succeed_or_name_the_object_and_field(tmp_path, tracebacks, base, mutations, key, duplicate):
    docs = copy.deepcopy(MANIFESTS[base])
    for mutation in mutations:
        docs = _mutate(docs, mutation, key)
    source = _write(tmp_path, docs if isinstance(docs, list) else [docs], mutations, duplicate)
    code, _, err = _run(["simulate", "-f", str(source)])
    _assert_clean(code, err, source, tracebacks, {d["kind"] for d in MANIFESTS[base]})


@settings(max_examples=1000, **FUZZ)
@given(base=st.sampled_from(range(len(CONFIGS))), mutations=st.lists(_mutation(), min_size=1, max_size=2),
       key=st.sampled_from(["percentageOfNodesToScore", "profile", "", "ü", "args"]), duplicate=st.booleans(),
       command=st.sampled_from(["config validate", "config validate", "config validate", "simulate --config"]))
def test_mutated_configurations_succeed_or_name_the_field(tmp_path, tracebacks, base, mutations, key, duplicate, command):
    doc = copy.deepcopy(CONFIGS[base])
    for mutation in mutations:
        doc = _mutate(doc, mutation, key)
    source = _write(tmp_path, [doc], mutations, duplicate)
    if command == "simulate --config":
        manifest = tmp_path / "cluster.yaml"
        manifest.write_text(yaml.dump_all([NODE, POD], Dumper=_Dumper))
        code, _, err = _run(["simulate", "--config", str(source), "-f", str(manifest)])
        _assert_clean(code, err, source, tracebacks, {"KubeSchedulerConfiguration", "profile"})
        return
    code, out, err = _run(["config", "validate", "-f", str(source)])
    event(f"exit code {code}")
    assert not [r.getMessage() for r in tracebacks.records]
    assert "Traceback" not in out + err
    assert code == 0 or (code == 1 and str(source) in out + err), out + err
