"""Plugins from installed packages: the ``kubesched.plugins`` entry-point group makes them
available by name in every command, with no ``--plugin``; ``examples/plugins`` is such a package."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from kubesched.cli.common import registry_from
from kubesched.cli.main import main
from kubesched.scheduler.framework.interface import FilterPlugin
from kubesched.scheduler.framework.registry import ENTRY_POINT_GROUP, RegistryError, installed_plugins

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "plugins"


def entry(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group=ENTRY_POINT_GROUP)


def test_entry_points_register_plugins_under_their_names():
    registry = installed_plugins([entry("PrioritySort", "kubesched.scheduler.plugins.queuesort:PrioritySort")])
    assert list(registry) == ["PrioritySort"]


@pytest.mark.parametrize(("entries", "message"), [
    ([entry("Sorter", "kubesched.scheduler.plugins.queuesort:PrioritySort")],
     "names a plugin called 'PrioritySort': the entry point must be named after its plugin"),
    ([entry("Missing", "no_such_module_anywhere:Missing")], "cannot be loaded: ModuleNotFoundError"),
    ([entry("PrioritySort", "kubesched.scheduler.plugins.queuesort:PrioritySort")] * 2, "is installed twice"),
], ids=["entry point named apart from its plugin", "entry point that does not import", "one name installed twice"])
def test_broken_entry_points_are_clear_errors(entries, message):
    with pytest.raises(RegistryError, match=r"group kubesched\.plugins") as e:
        installed_plugins(entries)
    assert message in str(e.value)


def test_an_installed_plugin_cannot_take_an_in_tree_name(monkeypatch):
    monkeypatch.setattr(metadata, "entry_points",
                        lambda group: [entry("PrioritySort", "kubesched.scheduler.plugins.queuesort:PrioritySort")])
    with pytest.raises(RegistryError, match="installed plugins named like in-tree ones: PrioritySort"):
        registry_from([])


class Installed(FilterPlugin):
    name = "SameName"


class Flagged(FilterPlugin):
    name = "SameName"


def test_every_command_finds_installed_plugins_and_a_plugin_flag_wins_over_one(monkeypatch):
    monkeypatch.setattr(metadata, "entry_points", lambda group: [entry("SameName", f"{__name__}:Installed")])
    assert registry_from([])["SameName"] is Installed
    assert registry_from([f"{__name__}:Flagged"])["SameName"] is Flagged


def test_an_in_tree_name_cannot_be_taken_by_a_plugin_flag():
    with pytest.raises(RegistryError, match="a plugin named PrioritySort already exists"):
        registry_from(["kubesched.scheduler.plugins.queuesort:PrioritySort"])


def test_an_unknown_plugin_suggests_the_flag_or_the_package(capsys):
    assert main(["config", "validate", "-f", str(EXAMPLES / "config.yaml")]) == 1
    err = capsys.readouterr().err
    assert 'PreFilterPlugin "CheapestNode" does not exist: CheapestNode is neither an in-tree plugin' in err
    assert "--plugin MODULE[:CLASS]" in err and "pip install the package that provides it" in err
    assert main(["simulate", "-f", str(EXAMPLES), "--config", str(EXAMPLES / "config.yaml")]) == 1
    assert "pip install the package that provides it" in capsys.readouterr().err
    assert main(["config", "validate", "-f", str(EXAMPLES / "config.yaml"), "--plugin", str(EXAMPLES / "cheapest_node.py"),
                 "--plugin", str(EXAMPLES / "pods_per_app.py")]) == 0


def test_the_example_package_installs_its_plugins_for_every_command(tmp_path):
    """pip install the example package into a virtual environment: its python runs the example
    with no --plugin (and config validate agrees)."""
    source = shutil.copytree(EXAMPLES, tmp_path / "plugins")  # builds write into the source tree
    # No pip of its own: the system's, seen through the system site-packages, installs into the venv.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(tmp_path / "venv")], check=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    install = subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                              str(source)], env=env, capture_output=True, text=True, check=False)
    assert install.returncode == 0, install.stdout + install.stderr

    def kubesched(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([python, "-m", "kubesched", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=False)

    run = kubesched("simulate", "-f", "examples/plugins", "--config", "examples/plugins/config.yaml")
    assert run.returncode == 0, run.stderr
    placed = {line.split()[1]: line.split()[3] for line in run.stdout.splitlines() if line.startswith("default")}
    assert sorted(placed.values()) == ["cheap-1", "cheap-1", "cheap-2", "cheap-2", "pricey-1", "pricey-1"]
    validate = kubesched("config", "validate", "-f", "examples/plugins/config.yaml")
    assert (validate.returncode, validate.stdout.strip()) == (0, "valid"), validate.stderr
