"""Broken manifests get one clean ``error:`` line naming the file, the object and the field (exit 1);
valid ones the right result. The cases are what a new user tried on ``kubesched simulate -f``."""

from __future__ import annotations

import contextlib
import io

import pytest

from kubesched.cli.main import main
from tests.cli.output import without_progress

NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {capacity: {cpu: '4', memory: 8Gi, pods: '110'}}\n---\n"
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: shop}\nspec:\n  containers: [{name: c, image: nginx}]\n"
DEPLOYMENT = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  replicas: REPLICAS\n"
              "  selector: {matchLabels: {app: web}}\n  template:\n    metadata: {labels: {app: web}}\n"
              "    spec: {containers: [{name: c, image: nginx}]}\n")
STATEFULSET = ("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: db}\nspec: {selector: {matchLabels: {app: db}}, "
               "serviceName: db, template: {metadata: {labels: {app: db}}, spec: {containers: [{name: c, image: pg}]}}, "
               "volumeClaimTemplates: x}\n")


def cannot_unmarshal(struct_field: str, go_type: str, json_type: str = "string") -> str:
    return f"json: cannot unmarshal {json_type} into Go struct field {struct_field} of type {go_type}"


CASES = [
    ("tolerations", POD + "  tolerations: all\n",
     "Pod shop/p: spec.tolerations: " + cannot_unmarshal("PodSpec.spec.tolerations", "[]v1.Toleration")),
    ("metadata", "apiVersion: v1\nkind: Pod\nmetadata: x\nspec: {containers: [{name: c, image: nginx}]}\n",
     "Pod <unnamed>: metadata: " + cannot_unmarshal("Pod.metadata", "v1.ObjectMeta")),
    ("affinity", POD + "  affinity: x\n", "Pod shop/p: spec.affinity: " + cannot_unmarshal("PodSpec.spec.affinity", "v1.Affinity")),
    ("nodeSelectorTerms", POD + "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: x}}}\n",
     "Pod shop/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: json: cannot "
     "unmarshal string into Go struct field NodeSelector.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
     ".nodeSelectorTerms of type []v1.NodeSelectorTerm"),
    ("topologySpreadConstraints", POD + "  topologySpreadConstraints: x\n",
     "Pod shop/p: spec.topologySpreadConstraints: "
     + cannot_unmarshal("PodSpec.spec.topologySpreadConstraints", "[]v1.TopologySpreadConstraint")),
    ("labelSelector", POD + "  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: z, labelSelector: x}]}}\n",
     "Pod shop/p: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector: "
     + cannot_unmarshal("PodAffinityTerm.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution.labelSelector",
                        "v1.LabelSelector")),
    ("node taints", "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\nspec: {taints: x}\n",
     "Node n2: spec.taints: " + cannot_unmarshal("NodeSpec.spec.taints", "[]v1.Taint")),
    ("node status", "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\nstatus: x\n",
     "Node n2: status: " + cannot_unmarshal("Node.status", "v1.NodeStatus")),
    ("deployment template", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {selector: {matchLabels: {app: web}}, template: x}\n",
     "Deployment web: spec.template: " + cannot_unmarshal("DeploymentSpec.spec.template", "v1.PodTemplateSpec")),
    ("volumeClaimTemplates", STATEFULSET,
     "StatefulSet db: spec.volumeClaimTemplates: " + cannot_unmarshal("StatefulSetSpec.spec.volumeClaimTemplates", "[]v1.PersistentVolumeClaim")),
    ("resourceClaims", POD + "  resourceClaims: x\n",
     "Pod shop/p: spec.resourceClaims: " + cannot_unmarshal("PodSpec.spec.resourceClaims", "[]v1.PodResourceClaim")),
    ("misspelt field", POD + "  nodeSelecter: {a: b}\n", 'Pod shop/p: strict decoding error: unknown field "spec.nodeSelecter"'),
    ("unknown field", POD.replace("image: nginx}", "image: nginx, resource: {}}"),
     'Pod shop/p: strict decoding error: unknown field "spec.containers[0].resource"'),
    ("duplicate key", POD + "  nodeName: n1\n  nodeName: n1\n", 'Pod shop/p: strict decoding error: duplicate field "spec.nodeName"'),
    ("replicas three", DEPLOYMENT.replace("REPLICAS", "three"),
     "Deployment web: spec.replicas: " + cannot_unmarshal("DeploymentSpec.spec.replicas", "int32")),
    ("replicas -1", DEPLOYMENT.replace("REPLICAS", "-1"),
     'Deployment "web" is invalid: spec.replicas: Invalid value: -1: must be greater than or equal to 0'),
    ("unschedulable yes", "apiVersion: v1\nkind: Node\nmetadata: {name: n2}\nspec: {unschedulable: 'yes'}\n",
     "Node n2: spec.unschedulable: " + cannot_unmarshal("NodeSpec.spec.unschedulable", "bool")),
    ("pvc storage abc", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c}\n"
     "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: abc}}}\n",
     "PersistentVolumeClaim c: spec.resources.requests.storage: quantities must match the regular expression "
     "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("pv capacity x", "apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: v}\n"
     "spec: {capacity: x, accessModes: [ReadWriteOnce], hostPath: {path: /x}}\n",
     "PersistentVolume v: spec.capacity: " + cannot_unmarshal("PersistentVolumeSpec.spec.capacity", "map[string]resource.Quantity")),
    ("huge annotation", "apiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {a: '" + "x" * 50 * 2**20 + "'}}\n"
     "spec: {containers: [{name: c, image: nginx}]}\n",
     'Pod "p" is invalid: metadata.annotations: Too long: must have at most 262144 bytes'),
]


def simulate(tmp_path, text: str) -> tuple[int, str, str, str]:
    source = tmp_path / "manifest.yaml"
    source.write_text(NODE + text)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["simulate", "-f", str(source)])
    return code, out.getvalue(), without_progress(err.getvalue()), str(source)


@pytest.mark.parametrize(("text", "message"), [pytest.param(t, m, id=name) for name, t, m in CASES])
def test_broken_manifests_get_one_line_naming_file_object_and_field(tmp_path, text, message):
    code, out, err, source = simulate(tmp_path, text)
    assert (code, out, err) == (1, "", f"error: {source}: {message}\n")


@pytest.mark.parametrize(
    ("text", "placed"),
    [
        pytest.param(POD, "1/1 pods scheduled.", id="valid pod"),
        pytest.param(DEPLOYMENT.replace("REPLICAS", "0"), "0/0 pods scheduled.", id="zero replicas"),
        pytest.param(DEPLOYMENT.replace("REPLICAS", "2"), "2/2 pods scheduled.", id="two replicas"),
        pytest.param(POD + "  nodeName: null\n  tolerations: [{operator: Exists}]\n", "1/1 pods scheduled.",
                     id="null fields are unset"),
    ],
)
def test_valid_manifests_still_schedule(tmp_path, text, placed):
    code, out, err, _ = simulate(tmp_path, text)
    assert code == 0 and placed in out, err
