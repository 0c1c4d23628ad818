"""The example extender (examples/extender) answers over real HTTP and places the GPU pods in
``simulate``; ``explain`` shows its verdicts and scores beside the plugins'."""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from kubesched.cli.main import main

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "extender"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_slices", EXAMPLE / "gpu_slices.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def config(tmp_path: Path) -> Iterator[Path]:
    """The example's configuration, pointed at the example extender served on a free port."""
    server = _module().server("127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    path = tmp_path / "config.yaml"
    port = server.server_address[1]
    path.write_text((EXAMPLE / "config.yaml").read_text().replace("127.0.0.1:8888", f"127.0.0.1:{port}"))
    try:
        yield path
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_the_extender_places_the_gpu_pods(config, capsys):
    assert main(["simulate", "-f", str(EXAMPLE / "cluster.yaml"), "--config", str(config)]) == 0
    placed = {line.split()[1]: line.split()[3] for line in capsys.readouterr().out.splitlines() if line.startswith("default ")}
    assert placed["trainer"] == "gpu-big" and placed["notebook"] == "gpu-big"
    assert placed["web"] in ("gpu-big", "gpu-small", "gpu-busy", "cpu-only")


def test_explain_shows_the_extenders_verdicts_and_scores(config, capsys):
    assert main(["explain", "-f", str(EXAMPLE / "cluster.yaml"), "--config", str(config), "notebook"]) == 0
    out = capsys.readouterr().out
    assert "ext:127.0.0.1:" in out
    assert "(gpu-busy)  http://127.0.0.1:" in out and ": node(s) had too few free GPU slices" in out
    assert "(cpu-only)  http://127.0.0.1:" in out and ": node(s) have no GPU" in out
