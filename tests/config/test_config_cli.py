"""``kubesched config defaults`` / ``config validate``, and the printed defaults round-tripping."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest
import yaml

from kubesched.cli import config_cmd
from kubesched.scheduler.config import API_VERSION, KIND, default_configuration, load_dict, to_v1, to_yaml


def _run(*argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="kubesched")
    config_cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = args.func(args, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_defaults_prints_the_default_configuration() -> None:
    code, out, _ = _run("config", "defaults")
    assert code == 0
    assert out == to_yaml(default_configuration())
    assert out.startswith(f"apiVersion: {API_VERSION}\nclientConnection:\n  acceptContentTypes: \"\"\n")
    assert "  schedulerName: default-scheduler\n" in out


@pytest.mark.parametrize("gates", ["", "StorageCapacityScoring=true", "DRASchedulerFilterTimeout=false,GenericWorkload=true,GangScheduling=true"])
def test_defaults_output_round_trips_through_load_dict(gates: str) -> None:
    code, out, _ = _run("config", "defaults", "--feature-gates", gates)
    assert code == 0
    printed = yaml.safe_load(out)
    from kubesched.scheduler.features import parse_flag

    reloaded = load_dict(printed, feature_gates=parse_flag(gates))
    assert to_v1(reloaded) == printed


def test_defaults_follow_feature_gates() -> None:
    _, out, _ = _run("config", "defaults", "--feature-gates", "StorageCapacityScoring=true")
    assert "shape:\n      - score: 10\n        utilization: 0\n      - score: 0\n        utilization: 100\n" in out


def test_bad_feature_gate_is_reported() -> None:
    code, _, err = _run("config", "defaults", "--feature-gates", "DynamicResourceAllocation=false")
    assert code == 1
    assert err == "error: invalid --feature-gates: cannot set feature gate DynamicResourceAllocation to false, feature is locked to true\n"


def test_validate_valid_file(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nprofiles:\n- schedulerName: a\n- schedulerName: b\n", encoding="utf-8")
    assert _run("config", "validate", "-f", str(path)) == (0, "valid\n", "")


def test_validate_invalid_file_lists_every_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nparallelism: 0\npercentageOfNodesToScore: 101\n", encoding="utf-8")
    code, out, err = _run("config", "validate", "-f", str(path))
    assert (code, out) == (1, "")
    assert err == (f"error: {path}: invalid KubeSchedulerConfiguration:\n"
                   "  parallelism: Invalid value: 0: should be an integer value greater than zero\n"
                   "  percentageOfNodesToScore: Invalid value: 101: not in valid range [0-100]\n")


def test_validate_undecodable_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nfoo: 1\n", encoding="utf-8")
    code, out, err = _run("config", "validate", "-f", str(path))
    assert (code, out, err) == (1, "", f'error: {path}: invalid KubeSchedulerConfiguration:\n  strict decoding error: unknown field "foo"\n')


def test_validate_missing_file(tmp_path: Path) -> None:
    code, _, err = _run("config", "validate", "-f", str(tmp_path / "nope.yaml"))
    assert (code, err) == (1, f"error: -f {tmp_path / 'nope.yaml'}: no such file or directory\n")


def test_validate_with_feature_gates(tmp_path: Path) -> None:
    path = tmp_path / "vb.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\nprofiles:\n- pluginConfig:\n  - name: VolumeBinding\n    args:\n"
                    "      shape:\n      - utilization: 0\n        score: 5\n", encoding="utf-8")
    assert _run("config", "validate", "-f", str(path), "--feature-gates", "StorageCapacityScoring=true")[0] == 0
    code, _, err = _run("config", "validate", "-f", str(path))
    assert code == 1 and "unexpected field `shape`" in err


def test_config_without_subcommand_prints_help() -> None:
    code, _, err = _run("config")
    assert code == 2 and "defaults" in err


def test_validate_with_two_plugins_of_the_same_name_is_an_error(tmp_path: Path) -> None:
    """Two ``--plugin`` modules registering one name clash, as kube-scheduler's ``app.WithPlugin`` does."""
    for module in ("first", "second"):
        (tmp_path / f"{module}.py").write_text("class P:\n    name = 'Same'\n\n\nPLUGINS = [P]\n", encoding="utf-8")
    path = tmp_path / "cfg.yaml"
    path.write_text(f"apiVersion: {API_VERSION}\nkind: {KIND}\n", encoding="utf-8")
    code, _, err = _run("config", "validate", "-f", str(path), "--plugin", str(tmp_path / "first.py"),
                        "--plugin", str(tmp_path / "second.py"))
    assert (code, err) == (1, f"error: {path}: a plugin named Same already exists\n")
