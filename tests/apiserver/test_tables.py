"""Server-side Table rows match kube-apiserver's printers."""

import pytest

from kubesched.api.kinds import kind_named
from kubesched.api.timeutil import parse_time
from kubesched.apiserver.tables import human_duration, to_table

NOW = parse_time("2025-01-01T01:00:00Z")
CREATED = "2025-01-01T00:59:00Z"


@pytest.mark.parametrize("seconds, text", [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (59, "59s"), (119, "119s"), (120, "2m"), (150, "2m30s"), (600, "10m"),
    (3 * 3600, "3h"), (3 * 3600 + 120, "3h2m"), (9 * 3600, "9h"), (50 * 3600, "2d2h"), (9 * 86400, "9d"),
    (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


def rows(kind_name, obj):
    table = to_table(kind_named(kind_name), [obj], {"resourceVersion": "1"}, now=NOW)
    return [c["name"] for c in table["columnDefinitions"]], table["rows"][0]


def test_pod_columns_and_a_pending_pod():
    names, row = rows("Pod", {"metadata": {"name": "p", "creationTimestamp": CREATED}, "spec": {"containers": [{"name": "c"}]},
                              "status": {"phase": "Pending"}})
    assert names == ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    assert row["cells"] == ["p", "0/1", "Pending", "0", "60s", "<none>", "<none>", "<none>", "<none>"]
    assert row["object"]["kind"] == "PartialObjectMetadata"


def test_running_terminating_and_gated_pods():
    running = {"metadata": {"name": "r", "creationTimestamp": CREATED}, "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
               "status": {"phase": "Running", "podIPs": [{"ip": "10.0.0.1"}], "nominatedNodeName": "",
                          "containerStatuses": [{"name": "c", "ready": True, "restartCount": 2, "state": {"running": {}}}]}}
    assert rows("Pod", running)[1]["cells"][:7] == ["r", "1/1", "Running", "2", "60s", "10.0.0.1", "n1"]
    terminating = {**running, "metadata": {**running["metadata"], "deletionTimestamp": CREATED}}
    assert rows("Pod", terminating)[1]["cells"][2] == "Terminating"
    gated = {"metadata": {"name": "g", "creationTimestamp": CREATED}, "spec": {"containers": [{"name": "c"}]},
             "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}
    assert rows("Pod", gated)[1]["cells"][2] == "SchedulingGated"
    done = {"metadata": {"name": "d", "creationTimestamp": CREATED}, "spec": {"containers": []}, "status": {"phase": "Succeeded"}}
    assert rows("Pod", done)[1]["conditions"][0]["reason"] == "Succeeded"


def test_init_container_progress():
    pod = {"metadata": {"name": "i", "creationTimestamp": CREATED},
           "spec": {"initContainers": [{"name": "a"}, {"name": "b"}], "containers": [{"name": "c"}]},
           "status": {"phase": "Pending", "initContainerStatuses": [
               {"name": "a", "state": {"terminated": {"exitCode": 0}}}, {"name": "b", "state": {"running": {}}}]}}
    assert rows("Pod", pod)[1]["cells"][2] == "Init:1/2"


def test_node_status_and_roles():
    node = {"metadata": {"name": "n", "creationTimestamp": CREATED, "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                                        "nodeInfo": {"kubeletVersion": "v1.35.0"},
                                                        "addresses": [{"type": "InternalIP", "address": "10.1.1.1"}]}}
    names, row = rows("Node", node)
    assert names[:5] == ["Name", "Status", "Roles", "Age", "Version"]
    assert row["cells"][:7] == ["n", "Ready,SchedulingDisabled", "control-plane", "60s", "v1.35.0", "10.1.1.1", "<none>"]


def test_event_row_from_an_events_v1_event():
    event = {"metadata": {"name": "p.1", "creationTimestamp": CREATED}, "eventTime": "2025-01-01T00:59:30.000000Z",
             "involvedObject": {"kind": "Pod", "name": "p"}, "reason": "FailedScheduling", "type": "Warning",
             "message": " 0/1 nodes are available ", "reportingComponent": "default-scheduler", "source": {}}
    names, row = rows("Event", event)
    assert names[:4] == ["Last Seen", "Type", "Reason", "Object"]
    assert row["cells"] == ["30s", "Warning", "FailedScheduling", "pod/p", "", "default-scheduler", "0/1 nodes are available",
                            "30s", 1, "p.1"]


def test_deployment_and_default_tables():
    deploy = {"metadata": {"name": "d", "creationTimestamp": CREATED}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "d"}},
                                                                                  "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
              "status": {"readyReplicas": 1, "updatedReplicas": 2, "availableReplicas": 1}}
    assert rows("Deployment", deploy)[1]["cells"] == ["d", "1/3", 2, 1, "60s", "c", "i", "app=d"]
    names, row = rows("ClusterRole", {"metadata": {"name": "r", "creationTimestamp": CREATED}})
    assert names == ["Name", "Created At"] and row["cells"] == ["r", CREATED]
