"""HTTP scheduler extenders (upstream ``pkg/scheduler/extender.go`` and the wire types of
``k8s.io/kube-scheduler/extender/v1``).

Each configured extender is an ``HTTPExtender``: a JSON POST to ``urlPrefix/verb`` per call, with
upstream's argument and result shapes (Go field names; answers are read case-insensitively, as
Go's JSON decoder does). The scheduling cycle calls them on the feasible set after the Filter
plugins (``find_nodes_that_pass_extenders``), adds their weighted scores to the plugins' totals
(``extender_scores``), lets a binder replace the Bind plugins (``bind_with_extenders``), and
DefaultPreemption asks preempt-capable ones to narrow its candidates.

Calls go through aiohttp on the scheduler's own loop; on a simulation's virtual-time loop they
are marked as real I/O, so ``httpTimeout`` is measured in real seconds. aiohttp is imported at the
first call: a scheduler without extenders (most, and every ``simulate`` without one) does not pay
its tenth of a second of start-up.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import ssl
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.api.types import NodeInfo, PodInfo
from kubesched.scheduler.framework.diagnosis import NodeToStatus
from kubesched.scheduler.framework.extender import Extender, ExtenderError, FilterOutcome, VictimPods
from kubesched.scheduler.framework.interface import MAX_NODE_SCORE
from kubesched.scheduler.framework.status import Code, Status
from kubesched.scheduler.nodetable.table import NodeTable
from kubesched.utils.clock import awaiting_real_io

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger(__name__)

#: Used when ``httpTimeout`` is zero or unset (upstream ``DefaultExtenderTimeout``).
DEFAULT_EXTENDER_TIMEOUT = 5.0
#: Extenders score 0 to this; their scores are scaled to the plugins' 0 to MAX_NODE_SCORE.
MAX_EXTENDER_PRIORITY = 10


class HTTPExtender:
    """One ``extenders:`` entry of a KubeSchedulerConfiguration (already validated)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.url_prefix = str(config.get("urlPrefix") or "")
        self.filter_verb = str(config.get("filterVerb") or "")
        self.prioritize_verb = str(config.get("prioritizeVerb") or "")
        self.preempt_verb = str(config.get("preemptVerb") or "")
        self.bind_verb = str(config.get("bindVerb") or "")
        self.weight = int(config.get("weight") or 0)
        self.node_cache_capable = bool(config.get("nodeCacheCapable"))
        self.managed_resources = frozenset(str(r.get("name", "")) for r in config.get("managedResources") or [])
        self._ignorable = bool(config.get("ignorable"))
        self.timeout = float(config.get("httpTimeout") or 0) or DEFAULT_EXTENDER_TIMEOUT
        self.ssl_context = _ssl_context(self.url_prefix, bool(config.get("enableHTTPS")), config.get("tlsConfig"))
        #: The name the server's certificate must carry, when not the URL's host (``tlsConfig.serverName``).
        self.server_name = str((config.get("tlsConfig") or {}).get("serverName") or "") or None
        self._sessions: dict[asyncio.AbstractEventLoop, aiohttp.ClientSession] = {}

    def __repr__(self) -> str:
        return f"HTTPExtender({self.url_prefix})"

    # --- what it does ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.url_prefix

    @property
    def ignorable(self) -> bool:
        return self._ignorable

    def is_filter(self) -> bool:
        return bool(self.filter_verb)

    def is_prioritizer(self) -> bool:
        return bool(self.prioritize_verb)

    def is_binder(self) -> bool:
        return bool(self.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.preempt_verb)

    def is_interested(self, pod: PodInfo) -> bool:
        """``IsInterested``: a container or init container requests or limits a managed resource."""
        if not self.managed_resources:
            return True
        spec = pod.pod.get("spec") or {}
        for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
            resources = container.get("resources") or {}
            for names in (resources.get("requests") or {}, resources.get("limits") or {}):
                if not self.managed_resources.isdisjoint(names):
                    return True
        return False

    # --- verbs -------------------------------------------------------------------------------
    async def filter(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> FilterOutcome:
        """``Filter``: the nodes the extender keeps (a subset of ``nodes``) and why it dropped others."""
        if not self.filter_verb:
            return FilterOutcome([n.name for n in nodes])
        result = _folded(await self._send(self.filter_verb, self._args(pod, nodes)), "ExtenderFilterResult")
        error = result.get("error")
        if error:
            raise ExtenderError(str(error))
        if self.node_cache_capable and result.get("nodenames") is not None:
            kept = _strings(result["nodenames"], "ExtenderFilterResult.NodeNames")
        elif result.get("nodes") is not None:
            kept = _node_list_names(result["nodes"])
        else:
            kept = []
        given = {n.name for n in nodes}
        for name in kept:
            if name not in given:
                raise ExtenderError(f"extender {_quote(self.url_prefix)} claims a filtered node {_quote(name)} "
                                    "which is not found in the input node list")
        return FilterOutcome(kept, _failed_map(result.get("failednodes"), "FailedNodes"),
                             _failed_map(result.get("failedandunresolvablenodes"), "FailedAndUnresolvableNodes"))

    async def prioritize(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> tuple[list[tuple[str, int]], int]:
        """``Prioritize``: host scores and this extender's weight (zeros, weight 0, without a verb)."""
        if not self.prioritize_verb:
            return [(n.name, 0) for n in nodes], 0
        answer = await self._send(self.prioritize_verb, self._args(pod, nodes))
        if not isinstance(answer, list):
            raise ExtenderError(f"extender {self.url_prefix} answered {self.prioritize_verb} with "
                                f"{type(answer).__name__}, not a HostPriorityList")
        scores = []
        for entry in answer:
            item = _folded(entry, "HostPriority")
            host, score = item.get("host"), item.get("score", 0)
            if not isinstance(host, str) or not isinstance(score, int) or isinstance(score, bool):
                raise ExtenderError(f"extender {self.url_prefix}: HostPriority needs a string Host and an integer "
                                    f"Score, got {json.dumps(entry)}")
            scores.append((host, score))
        return scores, self.weight

    async def process_preemption(self, pod: PodInfo, victims: Mapping[str, VictimPods],
                                 table: NodeTable) -> dict[str, VictimPods]:
        """``ProcessPreemption``: send the candidates (whole pods, or UIDs when node-cache-capable)
        and map the UIDs of the answer back to the pods on those nodes."""
        if not self.preempt_verb:
            raise ExtenderError(f"preempt verb is not defined for extender {self.url_prefix} but run into ProcessPreemption")
        args: dict[str, Any] = {"Pod": pod.pod}
        if self.node_cache_capable:
            args["NodeNameToMetaVictims"] = {node: _meta_victims(v) for node, v in victims.items()}
        else:
            args["NodeNameToVictims"] = {node: {"Pods": [p.pod for p in pods], "NumPDBViolations": violations}
                                         for node, (pods, violations) in victims.items()}
        result = _folded(await self._send(self.preempt_verb, args), "ExtenderPreemptionResult")
        chosen = result.get("nodenametometavictims") or {}
        if not isinstance(chosen, dict):
            raise ExtenderError(f"extender {self.url_prefix}: NodeNameToMetaVictims must be an object")
        return {node: self._victims(node, meta, table) for node, meta in chosen.items()}

    async def bind(self, pod: PodInfo, node: str) -> None:
        """``Bind``: the extender binds the pod; an ``Error`` in its answer fails the binding."""
        if not self.bind_verb:
            raise ExtenderError("unexpected empty bindVerb in extender")
        args = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node}
        result = _folded(await self._send(self.bind_verb, args), "ExtenderBindingResult")
        if result.get("error"):
            raise ExtenderError(str(result["error"]))

    # --- wire --------------------------------------------------------------------------------
    def _args(self, pod: PodInfo, nodes: Sequence[NodeInfo]) -> dict[str, Any]:
        """``ExtenderArgs``: node names only for a node-cache-capable extender, else whole Nodes."""
        if self.node_cache_capable:
            return {"Pod": pod.pod, "Nodes": None, "NodeNames": [n.name for n in nodes]}
        items = [n.node for n in nodes if n.node is not None]
        return {"Pod": pod.pod, "Nodes": {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": items},
                "NodeNames": None}

    def _victims(self, node: str, meta: Any, table: NodeTable) -> VictimPods:
        """``convertToVictims``: the extender may only name pods that run on that node."""
        info = table.get(node)
        if info is None:
            raise ExtenderError(f"nodeinfo not found for node name {_quote(node)}")
        folded = _folded(meta, "MetaVictims")
        by_uid = {p.uid: p for p in info.pods.values()}
        pods = []
        for entry in folded.get("pods") or []:
            uid = str(_folded(entry, "MetaPod").get("uid", ""))
            if uid not in by_uid:
                raise ExtenderError(f"extender: {self.url_prefix} claims to preempt pod (UID: {uid}) on node: {node}, "
                                    "but the pod is not found on that node")
            pods.append(by_uid[uid])
        violations = folded.get("numpdbviolations", 0)
        return pods, int(violations) if isinstance(violations, int) else 0

    def _session(self) -> aiohttp.ClientSession:
        """One connection pool per event loop (tests and ``simulate`` may run several loops in turn)."""
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            http = _aiohttp()
            session = http.ClientSession(timeout=http.ClientTimeout(total=self.timeout))
            self._sessions[loop] = session
        return session

    async def _send(self, verb: str, args: Mapping[str, Any]) -> Any:
        """POST ``args`` to ``urlPrefix/verb`` and decode the JSON answer (upstream ``send``)."""
        url = self.url_prefix.rstrip("/") + "/" + verb
        body = json.dumps(args, separators=(",", ":"))
        aiohttp = _aiohttp()
        with awaiting_real_io():
            try:
                async with self._session().post(url, data=body, headers={"Content-Type": "application/json"},
                                                ssl=self.ssl_context if self.ssl_context is not None else True,
                                                server_hostname=self.server_name) as response:
                    if response.status != 200:
                        raise ExtenderError(f"failed {verb} with extender at URL {url}, code {response.status}")
                    raw = await response.read()
            except TimeoutError as e:
                raise ExtenderError(f'Post {_quote(url)}: context deadline exceeded (Client.Timeout exceeded while '
                                    f"awaiting headers after {self.timeout:g}s)") from e
            except aiohttp.ClientConnectorCertificateError as e:
                raise ExtenderError(f"Post {_quote(url)}: tls: failed to verify certificate: {_verify_message(e)}") from e
            except aiohttp.ClientConnectorError as e:
                raise ExtenderError(f"Post {_quote(url)}: dial tcp {e.host}:{e.port}: connect: {_reason(e.os_error)}") from e
            except aiohttp.ClientError as e:
                raise ExtenderError(f"Post {_quote(url)}: {e}") from e
        try:
            return json.loads(raw)
        except ValueError as e:
            raise ExtenderError(f"extender {self.url_prefix} answered {verb} with invalid JSON: {e}") from e

    async def close(self) -> None:
        """Close the running loop's connection pool (pools of loops already closed went with them)."""
        session = self._sessions.pop(asyncio.get_running_loop(), None)
        self._sessions = {loop: other for loop, other in self._sessions.items() if not loop.is_closed()}
        if session is not None:
            await session.close()


# --- building ----------------------------------------------------------------------------------


def build_extenders(configs: Iterable[Mapping[str, Any]]) -> list[HTTPExtender]:
    """``buildExtenders``: one HTTPExtender per entry, the ignorable ones moved to the end so a
    failure that may be skipped never comes before one that decides."""
    extenders = []
    for i, config in enumerate(configs):
        try:
            extenders.append(HTTPExtender(config))
        except (ValueError, OSError) as e:
            raise ExtenderError(f"extenders[{i}] ({config.get('urlPrefix', '')}): {e}") from e
    return [e for e in extenders if not e.ignorable] + [e for e in extenders if e.ignorable]


def ignored_by_scheduler(configs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Managed resources marked ``ignoredByScheduler``: NodeResourcesFit leaves them to the extender."""
    return [str(r.get("name", "")) for c in configs for r in c.get("managedResources") or [] if r.get("ignoredByScheduler")]


def _ssl_context(url: str, enable_https: bool, tls: Mapping[str, Any] | None) -> ssl.SSLContext | None:
    """The client TLS settings of ``makeTransport``: HTTPS without a CA (in the file or the data)
    skips verification, as upstream; certData/keyData/caData are base64, as Go's []byte in JSON."""
    tls = tls or {}
    if not url.startswith("https://") and not enable_https and not tls:
        return None
    has_ca = bool(tls.get("caFile") or tls.get("caData"))
    try:
        context = ssl.create_default_context(cafile=tls.get("caFile") or None,
                                             cadata=_decoded(tls["caData"], "caData").decode() if tls.get("caData") else None)
    except (OSError, UnicodeDecodeError) as e:
        raise ValueError(f"tlsConfig.{'caFile' if tls.get('caFile') else 'caData'}: no usable CA certificate ({e})") from e
    if tls.get("insecure") or (enable_https and not has_ca):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        _load_client_certificate(context, tls)
    except OSError as e:
        fields = "certFile/keyFile" if tls.get("certFile") else "certData/keyData"
        raise ValueError(f"tlsConfig.{fields}: no usable client certificate and key ({e})") from e
    return context


def _load_client_certificate(context: ssl.SSLContext, tls: Mapping[str, Any]) -> None:
    if tls.get("certFile"):
        context.load_cert_chain(tls["certFile"], tls.get("keyFile") or None)
    elif tls.get("certData"):  # ssl loads certificates from files only
        with tempfile.NamedTemporaryFile("wb", suffix=".pem") as cert, tempfile.NamedTemporaryFile("wb", suffix=".pem") as key:
            cert.write(_decoded(tls["certData"], "certData"))
            key.write(_decoded(tls.get("keyData") or "", "keyData"))
            cert.flush()
            key.flush()
            context.load_cert_chain(cert.name, key.name if tls.get("keyData") else None)


def _decoded(value: str, field: str) -> bytes:
    """A []byte field of the configuration (base64 in JSON and YAML, as Go encodes it)."""
    try:
        return base64.b64decode(value, validate=True)
    except ValueError as e:
        raise ValueError(f"tlsConfig.{field}: not base64 ({e})") from e


# --- the scheduling cycle's calls ---------------------------------------------------------------


async def find_nodes_that_pass_extenders(extenders: Sequence[Extender], pod: PodInfo, table: NodeTable,
                                         feasible: np.ndarray, statuses: NodeToStatus,
                                         removed_by: dict[str, str] | None = None) -> np.ndarray:
    """``findNodesThatPassExtenders``: each interested filter extender in turn narrows the feasible
    rows; the nodes it rejects get its reason (unresolvable ones take precedence), under the
    extender's name so explanations show whose verdict it was. ``removed_by`` (when given) gets
    the extender that removed each node, reason or not. An ignorable extender's failure is
    skipped; any other's raises ExtenderError."""
    for extender in extenders:
        if len(feasible) == 0:
            break
        if not extender.is_filter() or not extender.is_interested(pod):
            continue
        try:
            outcome = await extender.filter(pod, [table.infos[int(r)] for r in feasible])
        except ExtenderError as e:
            if extender.ignorable:
                log.info("Skipping extender %s as it returned error and has ignorable flag set: %s", extender.name, e)
                continue
            raise
        for name, message in outcome.failed_and_unresolvable.items():
            _set_status(statuses, table, name, Status(Code.UnschedulableAndUnresolvable, message, plugin=extender.name))
        for name, message in outcome.failed.items():
            if name not in outcome.failed_and_unresolvable:
                _set_status(statuses, table, name, Status(Code.Unschedulable, message, plugin=extender.name))
        kept = np.array([table.row_of[name] for name in outcome.feasible], dtype=np.int64)
        if removed_by is not None:
            for row in np.setdiff1d(feasible, kept):
                removed_by[table.names[int(row)]] = extender.name
        feasible = kept
    return feasible


def _set_status(statuses: NodeToStatus, table: NodeTable, name: str, status: Status) -> None:
    """Record an extender's reason for a node of the cluster (it may name nodes it was not sent)."""
    if name in table.row_of:
        statuses.set(name, status)


async def extender_scores(extenders: Sequence[Extender], pod: PodInfo,
                          nodes: Sequence[NodeInfo]) -> list[tuple[str, np.ndarray, int]]:
    """Per interested extender, its raw scores of ``nodes`` (in order) and its weight; the
    extenders are asked concurrently and one that fails gives no score (upstream ignores
    prioritize errors, ignorable or not)."""
    asked = [e for e in extenders if e.is_prioritizer() and e.is_interested(pod)]
    if not asked:
        return []
    answers = await asyncio.gather(*(e.prioritize(pod, nodes) for e in asked), return_exceptions=True)
    position = {n.name: i for i, n in enumerate(nodes)}
    out = []
    for extender, answer in zip(asked, answers, strict=True):
        if isinstance(answer, BaseException):
            if not isinstance(answer, ExtenderError | _aiohttp().ClientError):
                raise answer
            log.info("Failed to run extender %s's priority function, no score given by it: %s", extender.name, answer)
            continue
        hosts, weight = answer
        raw = np.zeros(len(nodes), dtype=np.int64)
        for host, score in hosts:
            if host in position:
                raw[position[host]] += score
        out.append((extender.name, raw, weight))
    return out


def scaled(raw: np.ndarray, weight: int) -> np.ndarray:
    """An extender's contribution to the totals: score * weight * (MaxNodeScore / MaxExtenderPriority)."""
    return raw * weight * (MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY)


async def bind_with_extenders(extenders: Sequence[Extender], pod: PodInfo, node: str) -> tuple[bool, Status | None]:
    """``extendersBinding``: the first interested binder binds the pod (True); an ignorable one
    that fails is skipped. False: no extender bound it, the Bind plugins run."""
    for extender in extenders:
        if not extender.is_binder() or not extender.is_interested(pod):
            continue
        try:
            await extender.bind(pod, node)
        except ExtenderError as e:
            if extender.ignorable:
                log.info("Skipping extender %s in bind as it returned error and has ignorable flag set: %s", extender.name, e)
                continue
            return True, Status.from_error(e)
        return True, None
    return False, None


# --- decoding helpers --------------------------------------------------------------------------


def _folded(value: Any, what: str) -> dict[str, Any]:
    """An answer object with lower-cased keys (Go decodes field names case-insensitively)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ExtenderError(f"extender answer: {what} must be a JSON object, got {json.dumps(value)[:200]}")
    return {str(k).lower(): v for k, v in value.items()}


def _strings(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ExtenderError(f"extender answer: {what} must be a list of strings")
    return value


def _node_list_names(value: Any) -> list[str]:
    items = _folded(value, "ExtenderFilterResult.Nodes").get("items") or []
    if not isinstance(items, list):
        raise ExtenderError("extender answer: ExtenderFilterResult.Nodes.items must be a list")
    names = []
    for item in items:
        name = _folded(_folded(item, "Node").get("metadata"), "Node.metadata").get("name")
        if not isinstance(name, str):
            raise ExtenderError("extender answer: every node of ExtenderFilterResult.Nodes needs metadata.name")
        names.append(name)
    return names


def _failed_map(value: Any, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise ExtenderError(f"extender answer: ExtenderFilterResult.{what} must map node names to messages")
    return {str(k): v for k, v in value.items()}


def _meta_victims(victims: VictimPods) -> dict[str, Any]:
    pods, violations = victims
    return {"Pods": [{"UID": p.uid} for p in pods], "NumPDBViolations": violations}


def _aiohttp() -> ModuleType:
    """aiohttp, imported on first use (see the module docstring)."""
    import aiohttp

    return aiohttp


def _verify_message(error: aiohttp.ClientConnectorCertificateError) -> str:
    cause = error.certificate_error
    return str(getattr(cause, "verify_message", "") or cause)


def _reason(error: OSError) -> str:
    """An OS error as Go words it (``connection refused``)."""
    return os.strerror(error.errno).lower() if error.errno else str(error)


def _quote(text: str) -> str:
    """Go's %q for the plain strings in these messages."""
    return json.dumps(text)
