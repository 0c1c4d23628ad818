"""``kubesched run`` flags: kube-scheduler's precedence rules between flags and the config file,
errors for what kubesched cannot do, and the no-op flags it accepts."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from kubesched.api.errors import KubeschedError
from kubesched.apiserver.memory_client import MemoryClient
from kubesched.apiserver.store import ObjectStore
from kubesched.cli import run as run_cmd
from kubesched.cli.common import registry_from
from kubesched.cli.main import build_parser, main, standalone_command
from kubesched.scheduler.config import default_configuration
from kubesched.scheduler.scheduler import Scheduler
from tests.run.harness import free_port

CONFIG = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {{qps: 7, burst: 9{kubeconfig}}}
leaderElection: {{leaderElect: true, resourceName: from-file, leaseDuration: 20s, renewDeadline: 15s}}
profiles: [{{schedulerName: kubesched}}]
"""


def config_file(tmp_path, kubeconfig: str = ""):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(CONFIG.format(kubeconfig=f", kubeconfig: {kubeconfig}" if kubeconfig else "")))
    return str(path)


def resolve(*argv: str):
    args = build_parser().parse_args(["run", *argv])
    return args, run_cmd.configuration(args, registry_from(args.plugins))


def test_leader_election_flags_override_the_config_file(tmp_path):
    _, (cfg, _, _) = resolve("--config", config_file(tmp_path), "--leader-elect=false", "--leader-elect-lease-duration=30s",
                             "--leader-elect-resource-namespace", "sched")
    le = cfg.leader_election
    assert (le.leader_elect, le.lease_duration, le.renew_deadline, le.resource_name, le.resource_namespace) == \
        (False, 30.0, 15.0, "from-file", "sched")


def test_other_deprecated_flags_are_ignored_with_a_config_file_as_upstream_does(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        _, (cfg, _, kubeconfig) = resolve("--config", config_file(tmp_path), "--kube-api-qps=99", "--kubeconfig", "/flag/kc")
    assert (cfg.client_connection.qps, cfg.client_connection.burst) == (7, 9)
    assert "--kube-api-qps are ignored because --config is set" in caplog.text
    assert kubeconfig == "/flag/kc"  # kubesched's extension: the file left clientConnection.kubeconfig empty


def test_the_config_files_kubeconfig_wins_over_the_flag(tmp_path):
    _, (_, _, kubeconfig) = resolve("--config", config_file(tmp_path, "/file/kc"), "--kubeconfig", "/flag/kc")
    assert kubeconfig == "/file/kc"


def test_without_a_config_file_deprecated_and_leader_election_flags_apply_to_the_defaults():
    _, (cfg, _, kubeconfig) = resolve("--kubeconfig", "/k", "--kube-api-qps", "5.5", "--kube-api-burst", "11", "--profiling=false",
                                      "--leader-elect-retry-period", "1s", "--leader-elect-resource-name", "kubesched")
    assert kubeconfig == "/k" and cfg.client_connection.qps == 5.5 and cfg.client_connection.burst == 11
    assert cfg.enable_profiling is False
    assert (cfg.leader_election.retry_period, cfg.leader_election.resource_name) == (1.0, "kubesched")
    assert cfg.profiles[0].scheduler_name == "default-scheduler"


def test_a_bare_leader_elect_flag_means_true_and_feature_gates_are_parsed():
    args, (cfg, gates, _) = resolve("--leader-elect", "--feature-gates", "DRAAdminAccess=false")
    assert cfg.leader_election.leader_elect is True and args.leader_elect is True
    assert gates.enabled("DRAAdminAccess") is False


@pytest.mark.parametrize(("argv", "message"), [
    (["--leader-elect-lease-duration=5s", "--leader-elect-renew-deadline=10s"], "must be greater than `RenewDeadline`"),
    (["--leader-elect-renew-deadline=2s", "--leader-elect-retry-period=2s"],
     "couldn't create leader elector: renewDeadline must be greater than retryPeriod*JitterFactor"),
    (["--emulated-version=1.34"], "--emulated-version is not supported"),
    (["--feature-gates=Nope=true"], "unrecognized feature gate: Nope"),
])
def test_invalid_or_unsupported_settings_are_clear_errors(argv, message):
    with pytest.raises((KubeschedError, run_cmd.FlagError)) as raised:
        resolve(*argv)
    assert message in str(raised.value)


def test_unparsable_flag_values_fail_like_pflag(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--leader-elect=maybe"])
    assert 'strconv.ParseBool: parsing "maybe": invalid syntax' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--leader-elect-retry-period=2"])
    assert 'time: missing unit in duration "2"' in capsys.readouterr().err


def test_kube_scheduler_flags_kubesched_ignores_are_accepted_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING):
        resolve("--client-ca-file=/etc/ca", "--authentication-skip-lookup", "--tls-min-version", "VersionTLS12",
                "--vmodule", "x=2")
    assert "--tls-min-version, --client-ca-file, --vmodule, --authentication-skip-lookup are accepted" in caplog.text


@pytest.mark.parametrize(("argv", "expected"), [
    ((), ("", "", ("/healthz", "/readyz", "/livez"), 10.0, 10.0, 10.0)),
    (("--authentication-kubeconfig", "/a", "--authorization-kubeconfig", "/z", "--authorization-always-allow-paths",
      "/healthz,/metrics/*", "--authentication-token-webhook-cache-ttl", "1m", "--authorization-webhook-cache-authorized-ttl",
      "5s", "--authorization-webhook-cache-unauthorized-ttl", "0s"), ("/a", "/z", ("/healthz", "/metrics/*"), 60.0, 5.0, 0.0)),
])
def test_delegated_authentication_and_authorization_flags_have_upstreams_defaults(tmp_path, argv, expected):
    args = build_parser().parse_args(["run", "--config", config_file(tmp_path), *argv])
    o = run_cmd.options_from(args)
    assert (o.authentication_kubeconfig, o.authorization_kubeconfig, o.authorization_always_allow_paths,
            o.authentication_token_cache_ttl, o.authorization_allow_cache_ttl, o.authorization_deny_cache_ttl) == expected


def test_a_malformed_cache_ttl_names_the_flag(tmp_path):
    args = build_parser().parse_args(["run", "--config", config_file(tmp_path), "--authorization-webhook-cache-authorized-ttl", "ten"])
    with pytest.raises(run_cmd.FlagError, match='--authorization-webhook-cache-authorized-ttl: time: invalid duration "ten"'):
        run_cmd.options_from(args)


def test_write_config_to_writes_the_effective_configuration_and_exits(tmp_path):
    out = tmp_path / "written.yaml"
    assert main(["run", "--config", config_file(tmp_path), "--leader-elect=false", "--write-config-to", str(out)]) == 0
    from kubesched.scheduler.config import load_file

    written = load_file(out)
    assert written.leader_election.leader_elect is False and written.profiles[0].scheduler_name == "kubesched"


def test_version_and_verbosity_before_or_after_the_command(capsys):
    assert main(["run", "--version"]) == 0
    assert capsys.readouterr().out.startswith("kubesched v")
    assert build_parser().parse_args(["-v", "3", "run"]).verbosity == 3  # the top-level -v is not reset
    assert build_parser().parse_args(["run", "--v=5"]).verbosity == 5


def test_a_missing_config_file_is_an_error(tmp_path, capsys):
    assert main(["run", "--config", str(tmp_path / "missing.yaml")]) == 1
    assert "missing.yaml" in capsys.readouterr().err


def test_pod_max_in_unschedulable_duration_reaches_the_scheduling_queue():
    default = run_cmd.options_from(build_parser().parse_args(["run", "--kubeconfig", "/k"]))
    options = run_cmd.options_from(build_parser().parse_args(["run", "--kubeconfig", "/k", "--pod-max-in-unschedulable-pods-duration", "90s"]))
    assert (default.pod_max_in_unschedulable, options.pod_max_in_unschedulable) == (300.0, 90.0)
    sched = Scheduler(MemoryClient(ObjectStore()), default_configuration(), pod_max_in_unschedulable=options.pod_max_in_unschedulable)
    assert sched.queue._max_in_unschedulable == 90.0


def test_leader_election_flags_apply_before_the_file_is_validated(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(kubeconfig="").replace("leaseDuration: 20s", "leaseDuration: 5s"))
    _, (cfg, _, _) = resolve("--config", str(path), "--leader-elect=false")
    assert cfg.leader_election.leader_elect is False
    with pytest.raises(KubeschedError, match="leaseDuration"):
        resolve("--config", str(path))


KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:1"}}]
users: [{name: u, user: {}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_a_certificate_without_its_key_is_a_clear_error(tmp_path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    code = main(["run", "--kubeconfig", str(kubeconfig), "--leader-elect=false", "--tls-cert-file", str(tmp_path / "server.crt")])
    assert code == 1
    assert "--tls-cert-file and --tls-private-key-file must be given together" in capsys.readouterr().err


def test_unreadable_serving_certificates_are_a_clear_error(tmp_path, capsys):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    code = main(["run", "--kubeconfig", str(kubeconfig), "--leader-elect=false", "--secure-port", str(free_port()),
                 "--tls-cert-file", str(tmp_path / "server.crt"), "--tls-private-key-file", str(tmp_path / "server.key")])
    assert code == 1
    assert "cannot serve the health and metrics endpoints" in capsys.readouterr().err


LOADED_BY_RUN = """
import sys
from kubesched.cli.main import build_parser, standalone_command
argv = {argv!r}
args = build_parser(standalone_command(argv)).parse_args(argv)
print(args.command, sorted(m for m in ("kubesched.simulator.simulate", "kubesched.apiserver.server", "kubesched.cli.up")
                           if m in sys.modules))
"""


@pytest.mark.parametrize(("argv", "expected"), [
    pytest.param(["run", "--kubeconfig", "k"], "run []", id="run-alone-imports-no-simulator-or-api-server"),
    pytest.param(["-v", "2", "--logging-format", "json", "run"], "run []", id="top-level-options-before-run"),
    pytest.param(["simulate", "-f", "cluster.yaml"], "simulate ['kubesched.simulator.simulate']",
                 id="simulate-imports-no-api-server"),
    pytest.param(["up", "--port", "0"], "up ['kubesched.apiserver.server', 'kubesched.cli.up', 'kubesched.simulator.simulate']",
                 id="other-commands-build-the-whole-parser"),
])
def test_run_starts_without_importing_the_commands_it_does_not_need(argv: list[str], expected: str) -> None:
    out = subprocess.run([sys.executable, "-c", LOADED_BY_RUN.format(argv=argv)], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}).stdout
    assert out.strip() == expected


def test_a_malformed_command_line_gets_the_full_parsers_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert standalone_command(["-v", "many", "run"]) is None
    with pytest.raises(SystemExit):
        main(["-v", "many", "run"])
    assert capsys.readouterr().err.splitlines()[-1] == "kubesched: error: argument -v/--v: invalid int value: 'many'"
