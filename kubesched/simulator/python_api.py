"""The Python API for notebooks and scripts: ``kubesched.simulate``, ``simulate_async``,
``capacity`` and ``compare`` mirror the commands, taking manifests as paths or as objects and a
configuration as a path, a document or a loaded ``SchedulerConfiguration``.

Simulations run on their own virtual-time event loop. Called where an event loop is already
running (a Jupyter cell, an ``async def``), that loop cannot be re-entered, so the simulation runs
in a worker thread and the call waits for it; ``simulate_async`` awaits the worker thread instead,
leaving the caller's loop free meanwhile.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubesched.api.errors import FileUnreadable, KubeschedError
from kubesched.api.manifests import check_all, load
from kubesched.contrib.registry import contrib_registry
from kubesched.scheduler import config as config_module
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.features import FeatureGates
from kubesched.scheduler.framework.registry import Registry, merge
from kubesched.scheduler.plugins.registry import in_tree_registry
from kubesched.simulator.capacity import CapacityResult
from kubesched.simulator.capacity import capacity as run_capacity
from kubesched.simulator.compare import Comparison, pending_messages, placements
from kubesched.simulator.compare import compare as run_compare
from kubesched.simulator.explain import attempt_to_json
from kubesched.simulator.scenario import Scenario, load_scenario
from kubesched.simulator.simulate import SimulationResult
from kubesched.simulator.simulate import simulate as run_simulate
from kubesched.utils.dataframes import dataframe

T = TypeVar("T")
#: Manifests: a file or directory, an object, or a list mixing both.
Manifests = str | Path | Mapping[str, Any] | Iterable[str | Path | Mapping[str, Any]]
#: A configuration: a KubeSchedulerConfiguration file, its parsed document, or a loaded one.
Config = str | Path | Mapping[str, Any] | SchedulerConfiguration | None
#: A scenario: its file, or one loaded with ``load_scenario``.
ScenarioSource = str | Path | Scenario | None
#: Columns of ``Simulation.to_dataframe()``.
POD_COLUMNS = ("namespace", "name", "node", "phase", "message")


@dataclass
class Simulation:
    """What ``simulate`` did: where each pod went, why the others did not, and why each went where it did."""

    #: Pod (``namespace/name``) -> node, for pods bound and not failed.
    placements: dict[str, str]
    #: Pod -> why it is not placed (kube-scheduler's message).
    pending: dict[str, str]
    #: Every pod at the end of the run, as the API server would return it.
    pods: list[dict]
    _result: SimulationResult

    def explain(self, pod: str) -> dict[str, Any]:
        """Every scheduling attempt of ``pod`` (``namespace/name``, or a name unique across
        namespaces): per node, the Filter outcome and each Score plugin's scores, as
        ``kubesched explain -o json`` prints them (docs/explain.md)."""
        key = self._key(pod)
        attempts = [attempt_to_json(a, self._result.preemption_of_attempt.get(i))
                    for i, a in enumerate(self._result.attempts) if a.pod == key]
        if not attempts:
            raise KubeschedError(f'pod "{key}" was never attempted (bound in the manifests, gated, or its '
                                 "schedulerName has no profile)" if self._result.attempts else
                                 "no attempts were recorded: run simulate(..., explain=True)")
        return {"pod": key, "attempts": attempts}

    def to_dataframe(self) -> Any:
        """One row per pod: namespace, name, node (None when pending), phase, message (why pending).
        Needs pandas."""
        rows = []
        for pod in self.pods:
            meta, key = pod["metadata"], f"{pod['metadata'].get('namespace', '')}/{pod['metadata']['name']}"
            rows.append({"namespace": meta.get("namespace", ""), "name": meta["name"], "node": self.placements.get(key),
                         "phase": (pod.get("status") or {}).get("phase") or "Pending", "message": self.pending.get(key)})
        return dataframe(rows, POD_COLUMNS)

    def to_html(self, path: str | Path | None = None) -> str:
        """The simulation as a self-contained HTML page, as ``simulate --report`` writes it (written
        to ``path`` when given): allocation per node by zone, the scenario's timeline, and each
        pending pod's filter reasons per node count (those need ``explain=True``)."""
        from kubesched.simulator import htmlreport

        return htmlreport.write(htmlreport.render(self._result), path)

    def _key(self, pod: str) -> str:
        known = {f"{p['metadata'].get('namespace', '')}/{p['metadata']['name']}" for p in self.pods}
        if "/" in pod:
            if pod not in known:
                raise KubeschedError(f'pod "{pod}" is not in the manifests')
            return pod
        matches = [p for p in known if p.split("/", 1)[1] == pod]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise KubeschedError(f'pod "{pod}" is not in the manifests')
        raise KubeschedError(f'pod name "{pod}" is in several namespaces ({", ".join(sorted(matches))}): say which, as NAMESPACE/NAME')


def simulate(objects_or_paths: Manifests, config: Config = None, seed: int = 0, *, explain: bool = True,
             scenario: ScenarioSource = None, feature_gates: Mapping[str, bool] | None = None) -> Simulation:
    """Schedule the manifests on an embedded cluster, as ``kubesched simulate`` does. ``explain``
    records every attempt for ``Simulation.explain`` (turn it off for large inputs); a
    ``scenario`` (a file, or a loaded ``Scenario``) changes the cluster on the virtual clock;
    ``feature_gates`` are ``--feature-gates`` (``{"GenericWorkload": True, "GangScheduling": True}``
    for gang scheduling)."""
    objects, steps, gates = manifests(objects_or_paths), scenario_of(scenario), FeatureGates(feature_gates)
    cfg = configuration(config, gates)
    return _off_the_running_loop(lambda: _simulation(run_simulate(objects, cfg, seed=seed, explain=explain,
                                                                  scenario=steps, feature_gates=gates,
                                                                  registry=registry())))


async def simulate_async(objects_or_paths: Manifests, config: Config = None, seed: int = 0, *,
                         explain: bool = True, scenario: ScenarioSource = None,
                         feature_gates: Mapping[str, bool] | None = None) -> Simulation:
    """``simulate`` for ``await``: the simulation runs in a worker thread, the caller's loop goes on."""
    objects, steps, gates = manifests(objects_or_paths), scenario_of(scenario), FeatureGates(feature_gates)
    cfg = configuration(config, gates)
    return await asyncio.to_thread(lambda: _simulation(run_simulate(objects, cfg, seed=seed, explain=explain,
                                                                    scenario=steps, feature_gates=gates,
                                                                    registry=registry())))


def capacity(objects_or_paths: Manifests, pods: Manifests, config: Config = None, seed: int = 0, *,
             max_copies: int | None = None, preemption: bool = False, explain: bool = True) -> CapacityResult:
    """How many copies of each pod of ``pods`` the cluster takes, in turn, as ``kubesched capacity``:
    ``result.pods[i].count``, ``.stop_reason``, ``.stop_message``, ``.per_node``. ``explain`` keeps
    the failed attempt behind each stop, for ``to_html`` (turn it off for large inputs)."""
    objects, templates, cfg = manifests(objects_or_paths), manifests(pods), configuration(config)
    return _off_the_running_loop(lambda: run_capacity(objects, templates, cfg, seed=seed, max_copies=max_copies,
                                                      preemption=preemption, explain=explain,
                                                      registry=registry()))


def compare(objects_or_paths: Manifests, config_a: Config, config_b: Config, seed: int = 0, *,
            scenario: ScenarioSource = None, explain: bool = True) -> Comparison:
    """The manifests under two configurations, as ``kubesched compare``: ``.moved``,
    ``.pending_only``, ``.utilisation``, with a ``scenario`` ``.steps`` (and ``.to_json()``,
    ``.to_html()``). ``explain`` records the attempts behind the pending pods' reasons in
    ``to_html`` (turn it off for large inputs)."""
    objects, steps = manifests(objects_or_paths), scenario_of(scenario)
    labelled = [(_label(c, i), configuration(c)) for i, c in enumerate((config_a, config_b))]
    return _off_the_running_loop(lambda: run_compare(objects, labelled, seed=seed, scenario=steps, explain=explain,
                                                     registry=registry()))


def scenario_of(source: ScenarioSource) -> Scenario | None:
    """A loaded scenario from a file or a ``Scenario``; a clear error for anything else."""
    if source is None or isinstance(source, Scenario):
        return source
    if isinstance(source, (str, Path)):
        return load_scenario(source)
    raise KubeschedError(f"scenario: expected a path to a scenario file or a Scenario, not {type(source).__name__}")


def manifests(source: Manifests) -> list[dict]:
    """Objects from paths and objects, validated, copied (a simulation changes the objects it creates)."""
    items: Iterable[Any] = [source] if isinstance(source, (str, Path, Mapping)) else source
    objects: list[dict] = []
    for item in items:
        if isinstance(item, (str, Path)):
            objects += load([item])
        elif isinstance(item, Mapping):
            obj = copy.deepcopy(dict(item))
            kind = obj.get("kind")
            if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and "items" in obj):
                objects += manifests(obj.get("items") or [])
                continue
            check_all([obj], "objects")
            objects.append(obj)
        else:
            raise KubeschedError(f"manifests: expected a path or an object (a dict), not {type(item).__name__}")
    return objects


def registry() -> Registry:
    """The plugins configurations may name here: the in-tree ones and the bundled scheduler-plugins
    (the commands add installed packages' and ``--plugin`` ones)."""
    return merge(in_tree_registry(), contrib_registry())


def configuration(config: Config, gates: FeatureGates | None = None) -> SchedulerConfiguration:
    """A loaded configuration from any of the accepted forms (None: kube-scheduler's defaults),
    defaulted with ``gates`` (the default profile follows them)."""
    if config is None:
        return config_module.default_configuration(feature_gates=gates)
    if isinstance(config, SchedulerConfiguration):
        return config
    if isinstance(config, (str, Path)):
        try:
            text = Path(config).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise FileUnreadable("config", str(config), e if isinstance(e, OSError) else OSError(str(e))) from e
        return config_module.load_text(text, registry=registry(), source=str(config), feature_gates=gates)
    return config_module.load_dict(dict(config), registry=registry(), source="config", feature_gates=gates)


def _label(config: Config, index: int) -> str:
    if isinstance(config, (str, Path)):
        return Path(config).name
    return "default" if config is None and index == 0 else f"config {'AB'[index]}"


def _simulation(result: SimulationResult) -> Simulation:
    return Simulation(placements(result), pending_messages(result), result.pods(), result)


def _off_the_running_loop(work: Callable[[], T]) -> T:
    """``work()`` here, or in a worker thread when this thread already runs an event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kubesched-simulation") as pool:
        return pool.submit(work).result()
