"""The live cluster's explanation records: the latest attempt per pod, the preemption that
nominated its node, and a bounded number of pods."""

from __future__ import annotations

from kubesched.scheduler.framework.preemption_report import PreemptionRecord
from kubesched.scheduler.schedule_one import Attempt
from kubesched.simulator.explanations import ExplanationRecorder
from kubesched.utils.clock import ManualClock


def attempt(pod: str, chosen: str = "", nodes: tuple[str, ...] = ("n1", "n2")) -> Attempt:
    return Attempt(pod, node_names=list(nodes), feasible=[chosen] if chosen else [], chosen=chosen)


def test_the_latest_attempt_is_served_with_the_attempt_count():
    recorder = ExplanationRecorder(ManualClock())
    recorder.on_attempt(attempt("shop/web"))
    recorder.on_attempt(attempt("shop/web", chosen="n2"))
    doc = recorder.explanation("shop", "web")
    assert doc is not None
    assert (doc["kind"], doc["metadata"], doc["attemptCount"]) == ("SchedulingExplanation", {"namespace": "shop", "name": "web"}, 2)
    assert [a["chosen"] for a in doc["attempts"]] == ["n2"]


def test_a_pod_never_attempted_has_no_explanation():
    recorder = ExplanationRecorder(ManualClock())
    recorder.on_attempt(attempt("shop/web"))
    assert recorder.explanation("shop", "other") is None
    assert recorder.explanation("default", "web") is None


def test_the_preempting_attempt_is_kept_before_the_one_that_used_the_nominated_node():
    recorder = ExplanationRecorder(ManualClock())
    recorder.on_attempt(attempt("shop/big"))
    recorder.on_preemption(PreemptionRecord("shop/big", "uid", node="n1", victims=["shop/small"], decided_by="fewest victims"))
    recorder.on_attempt(attempt("shop/big", chosen="n1", nodes=("n1",)))
    doc = recorder.explanation("shop", "big")
    assert doc is not None
    first, last = doc["attempts"]
    assert (first["chosen"], first["preemption"]["node"], first["preemption"]["victims"]) == (None, "n1", ["shop/small"])
    assert (last["chosen"], "preemption" in last) == ("n1", False)


def test_a_later_preemption_that_nominated_nothing_keeps_the_one_that_did():
    recorder = ExplanationRecorder(ManualClock())
    recorder.on_attempt(attempt("shop/big"))
    recorder.on_preemption(PreemptionRecord("shop/big", "uid", node="n1", victims=["shop/small"]))
    recorder.on_attempt(attempt("shop/big"))
    recorder.on_preemption(PreemptionRecord("shop/big", "uid", message="not eligible due to a terminating pod on the nominated node."))
    recorder.on_attempt(attempt("shop/big", chosen="n1", nodes=("n1",)))
    doc = recorder.explanation("shop", "big")
    assert doc is not None
    assert [(a["chosen"], a.get("preemption", {}).get("node")) for a in doc["attempts"]] == [(None, "n1"), ("n1", None)]


def test_a_failed_attempt_carries_its_own_preemption():
    recorder = ExplanationRecorder(ManualClock())
    recorder.on_attempt(attempt("shop/big"))
    recorder.on_preemption(PreemptionRecord("shop/big", "uid", message="No preemption victims found for incoming pod."))
    doc = recorder.explanation("shop", "big")
    assert doc is not None
    assert [a["preemption"]["message"] for a in doc["attempts"]] == ["No preemption victims found for incoming pod."]


def test_a_preemption_of_a_pod_without_attempt_is_ignored():
    recorder = ExplanationRecorder(ManualClock())
    recorder.on_preemption(PreemptionRecord("shop/big", "uid", node="n1"))
    assert recorder.explanation("shop", "big") is None


def test_only_the_most_recently_attempted_pods_are_kept():
    recorder = ExplanationRecorder(ManualClock(), capacity=2)
    for name in ("a", "b", "a", "c"):
        recorder.on_attempt(attempt(f"ns/{name}"))
    assert [recorder.explanation("ns", n) is not None for n in ("a", "b", "c")] == [True, False, True]
