"""When an informer relists instead of watching on: a watch ended by an error, a broken connection
to a server that is not the same any more (another identity, a history behind what was seen), and
the cache comparer's request. A broken connection to the same server only watches again."""

from __future__ import annotations

import pytest

from kubesched.api.apierrors import APIError
from kubesched.api.kinds import kind_named
from kubesched.api.watch import ADDED, WatchEvent
from kubesched.client import informers as informers_module
from kubesched.client.informers import Handler, Informer
from kubesched.client.kube import StreamBroken
from tests.client_doubles import ScriptedClient, settle

POD_KIND = kind_named("Pod")


def pod(name: str, rv: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
                                                           "uid": f"uid-{name}"}}


class ScriptedServer(ScriptedClient):
    """Every list returns one fresh pod (named after the list call) at resourceVersion 10."""

    def __init__(self, watches: list[object], identities: list[tuple[str, str]]) -> None:
        super().__init__(watches=watches, identities=identities)

    async def list(self, kind: object, *, field_selector: str = "") -> tuple[list[dict], str]:
        self.list_calls += 1
        return [pod(f"p{self.list_calls}", "10")], "10"


@pytest.fixture(autouse=True)
def fast_backoff(monkeypatch):
    monkeypatch.setattr(informers_module, "INITIAL_BACKOFF", 0.01)


BROKEN = StreamBroken("connection refused")
ADDED_AT_12 = [[WatchEvent(ADDED, pod("x", "12"))]]


@pytest.mark.parametrize(("watches", "identities", "want_relist"), [
    pytest.param([ADDED_AT_12, BROKEN], [("cluster-a", "10"), ("cluster-a", "15")], "",
                 id="the same server after a broken connection: watch on"),
    pytest.param([ADDED_AT_12, BROKEN], [("cluster-a", "10"), ("cluster-b", "15")], "server-changed",
                 id="a server with another identity: relist"),
    pytest.param([ADDED_AT_12, BROKEN], [("cluster-a", "10"), ("cluster-a", "3")], "server-changed",
                 id="a server whose history is behind what was seen: relist"),
    pytest.param([ADDED_AT_12, BROKEN], [("", "10"), ("", "15")], "",
                 id="a server without identity and ahead: watch on"),
    pytest.param([APIError("etcdserver: request timed out")], [("cluster-a", "10")], "watch-error",
                 id="a watch ended by an error event: relist"),
])
async def test_an_informer_relists_only_when_watching_on_could_miss_changes(watches, identities, want_relist):
    server = ScriptedServer(list(watches), list(identities))
    relists: list[str] = []
    informer = Informer(server, POD_KIND, on_relist=lambda kind, reason: relists.append(reason))
    informer.start()
    if want_relist:
        await settle(lambda: server.list_calls == 2)
    else:
        await settle(lambda: len(server.watch_calls) == 3)
    await informer.stop()
    assert relists == ([want_relist] if want_relist else [])
    if not want_relist:
        assert server.watch_calls == ["10", "12", "12"] and server.list_calls == 1


async def test_a_relist_requested_during_a_stream_happens_when_the_stream_ends():
    server = ScriptedServer([ADDED_AT_12], [("cluster-a", "10")])
    relists: list[str] = []
    informer = Informer(server, POD_KIND, on_relist=lambda kind, reason: relists.append(reason))

    def added(obj: dict, _initial: bool) -> None:
        if obj["metadata"]["name"] == "x":  # as the cache comparer would, while the stream goes on
            informer.request_relist()

    informer.add_handler(Handler(on_add=added))
    informer.start()
    await settle(lambda: server.list_calls == 2)
    await informer.stop()
    assert relists == ["requested"] and server.watch_calls[0] == "10"
