"""``kubesched run``: schedule a real cluster (or ``kubesched apiserver``) as kube-scheduler does:
same configuration file, same main flags, same health endpoints and metric names, leader election
on a Lease. Pods opt in with ``spec.schedulerName`` set to one of the configuration's profiles.

Flags follow kube-scheduler 1.35. As upstream: with ``--config``, only the leader election flags
override the file (other deprecated flags are ignored, with a warning); without it, the deprecated
flags (``--kubeconfig``, ``--kube-api-qps``, ...) and leader election flags apply to the defaults.
One kubesched extension: ``--kubeconfig`` is honoured with ``--config`` when the file leaves
``clientConnection.kubeconfig`` empty. Serving: ``--secure-port`` (default 10259) serves HTTPS with
``--tls-cert-file``/``--tls-private-key-file`` or a self-signed certificate; ``--port`` (kubesched's,
default 0 = off) serves the same endpoints over plain HTTP without authentication. The secure port
delegates authentication (TokenReview) and authorization (SubjectAccessReview) to the API server
as kube-scheduler does (``--authentication-kubeconfig``, ``--authorization-kubeconfig``,
``--authorization-always-allow-paths``; docs/security.md). Metric filtering and klog output
options are accepted and ignored (a warning says so); ``--logging-format json`` is kube-scheduler's
structured logging.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from kubesched.api.golang import ns_to_seconds, parse_duration
from kubesched.cli.common import PLUGIN_HELP, PLUGIN_METAVAR, read_config, registry_from
from kubesched.cli.logs import add_logging_args
from kubesched.client.kube import load_config
from kubesched.client.leaderelection import LeaderElectionConfigError, validate_durations
from kubesched.scheduler import config as config_module
from kubesched.scheduler import features
from kubesched.scheduler.backend.queue import DEFAULT_POD_MAX_IN_UNSCHEDULABLE
from kubesched.scheduler.config.types import SchedulerConfiguration
from kubesched.scheduler.config.validation import validate_or_raise
from kubesched.scheduler.features import FeatureGates, parse_flag
from kubesched.scheduler.framework.registry import Registry
from kubesched.scheduler.serving.delegated import DEFAULT_ALWAYS_ALLOW_PATHS

if TYPE_CHECKING:
    from kubesched.scheduler.serving.app import RunOptions

log = logging.getLogger(__name__)

DEFAULT_SECURE_PORT = 10259

#: Flags kube-scheduler has that kubesched accepts without acting on them (value-taking ones).
IGNORED_VALUE_FLAGS = (
    "--tls-cipher-suites", "--tls-min-version", "--tls-sni-cert-key", "--http2-max-streams-per-connection",
    "--client-ca-file", "--requestheader-allowed-names", "--requestheader-client-ca-file", "--requestheader-extra-headers-prefix",
    "--requestheader-group-headers", "--requestheader-uid-headers", "--requestheader-username-headers",
    "--allow-metric-labels", "--allow-metric-labels-manifest",
    "--disabled-metrics", "--show-hidden-metrics-for-version", "--log-flush-frequency", "--log-json-info-buffer-size",
    "--log-text-info-buffer-size", "--vmodule",
)
#: Boolean flags kube-scheduler has that kubesched accepts without acting on them.
IGNORED_BOOL_FLAGS = (
    "--permit-address-sharing", "--permit-port-sharing", "--authentication-skip-lookup",
    "--authentication-tolerate-lookup-failure", "--log-json-split-stream", "--log-text-split-stream",
)
#: Deprecated flags (argparse dests) that only apply without ``--config``.
DEPRECATED = ("kubeconfig", "kube_api_qps", "kube_api_burst", "kube_api_content_type", "profiling", "contention_profiling")


class FlagError(ValueError):
    """An invalid or unsupported flag value (exit status 1 with the message)."""


def parse_bool(text: str) -> bool:
    """A boolean flag value, as pflag reads it (Go's ``strconv.ParseBool``)."""
    try:
        return features.parse_bool(text.strip())
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def parse_seconds(text: str) -> float:
    """A Go duration ("15s", "1m30s", "500ms") in seconds, with Go's error message."""
    try:
        return ns_to_seconds(parse_duration(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run as a cluster's scheduler (kube-scheduler's flags and endpoints)", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(p)
    add_logging_args(p)
    # kube-scheduler logs its info messages at level 0, with klog's text header.
    p.set_defaults(func=run, info_v=0, klog_header=True)


def add_flags(p: argparse.ArgumentParser) -> None:
    misc = p.add_argument_group("misc")
    misc.add_argument("--config", default="", help="the path to the configuration file")
    misc.add_argument("--write-config-to", default="", help="if set, write the configuration values to this file and exit")
    misc.add_argument("--master", default="", help="the address of the Kubernetes API server (overrides any value in kubeconfig)")
    misc.add_argument("--plugin", dest="plugins", action="append", default=[], metavar=PLUGIN_METAVAR,
                      help="kubesched: " + PLUGIN_HELP)
    serving = p.add_argument_group("secure serving")
    serving.add_argument("--bind-address", default="0.0.0.0", help="the IP address on which to serve (default 0.0.0.0)")
    serving.add_argument("--secure-port", type=int, default=DEFAULT_SECURE_PORT,
                         help="the port on which to serve HTTPS (0: no HTTPS); default 10259")
    serving.add_argument("--port", type=int, default=0, help="kubesched: also serve plain HTTP on this port (default 0: off)")
    serving.add_argument("--cert-dir", default="", help="the directory for the self-signed certificate (kube-scheduler.crt/.key)")
    serving.add_argument("--tls-cert-file", default="", help="x509 certificate for HTTPS (with --tls-private-key-file)")
    serving.add_argument("--tls-private-key-file", default="", help="x509 private key matching --tls-cert-file")
    delegated = p.add_argument_group("authentication and authorization of the secure port (delegated to the API server)")
    delegated.add_argument("--authentication-kubeconfig", default="",
                           help="kubeconfig of the API server that reviews bearer tokens (TokenReview); empty: the "
                                "in-cluster service account, else no token authentication")
    delegated.add_argument("--authorization-kubeconfig", default="",
                           help="kubeconfig of the API server that authorizes requests (SubjectAccessReview); empty: the "
                                "in-cluster service account, else only system:masters and the always-allowed paths")
    delegated.add_argument("--authorization-always-allow-paths", default=",".join(DEFAULT_ALWAYS_ALLOW_PATHS),
                           help="paths allowed without authorization (default /healthz,/readyz,/livez; 'p/*' is a prefix)")
    delegated.add_argument("--authentication-token-webhook-cache-ttl", default="10s",
                           help="how long TokenReview answers are cached (default 10s)")
    delegated.add_argument("--authorization-webhook-cache-authorized-ttl", default="10s",
                           help="how long allowed SubjectAccessReview answers are cached (default 10s)")
    delegated.add_argument("--authorization-webhook-cache-unauthorized-ttl", default="10s",
                           help="how long denied SubjectAccessReview answers are cached (default 10s)")
    deprecated = p.add_argument_group("deprecated (ignored when --config is given, except --kubeconfig, see above)")
    deprecated.add_argument("--kubeconfig", default=None, help="path to a kubeconfig file with the API server location and credentials")
    deprecated.add_argument("--kube-api-qps", type=float, default=None, help="QPS to use while talking with the API server")
    deprecated.add_argument("--kube-api-burst", type=int, default=None, help="burst to use while talking with the API server")
    deprecated.add_argument("--kube-api-content-type", default=None, help="content type of requests (JSON is always used)")
    deprecated.add_argument("--profiling", type=parse_bool, nargs="?", const=True, default=None, help="enable /debug endpoints")
    deprecated.add_argument("--contention-profiling", type=parse_bool, nargs="?", const=True, default=None, help="no effect")
    deprecated.add_argument("--pod-max-in-unschedulable-pods-duration", type=parse_seconds, default=DEFAULT_POD_MAX_IN_UNSCHEDULABLE,
                            help="the longest a pod may stay in unschedulablePods (default 5m)")
    le = p.add_argument_group("leader election")
    le.add_argument("--leader-elect", type=parse_bool, nargs="?", const=True, default=None,
                    help="take a Lease before scheduling (default true)")
    le.add_argument("--leader-elect-lease-duration", type=parse_seconds, default=None, help="default 15s")
    le.add_argument("--leader-elect-renew-deadline", type=parse_seconds, default=None, help="default 10s")
    le.add_argument("--leader-elect-retry-period", type=parse_seconds, default=None, help="default 2s")
    le.add_argument("--leader-elect-resource-lock", default=None, help='only "leases"')
    le.add_argument("--leader-elect-resource-name", default=None, help="default kube-scheduler")
    le.add_argument("--leader-elect-resource-namespace", default=None, help="default kube-system")
    gates = p.add_argument_group("feature gate")
    gates.add_argument("--feature-gates", default="", metavar="A=true,B=false", help="feature gates to change")
    gates.add_argument("--emulated-version", default=None, help="not supported (kubesched emulates 1.35 only)")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    ignored = p.add_argument_group("accepted for compatibility, no effect")
    for flag in IGNORED_VALUE_FLAGS:
        ignored.add_argument(flag, default=None, dest=_ignored_dest(flag), help=argparse.SUPPRESS)
    for flag in IGNORED_BOOL_FLAGS:
        ignored.add_argument(flag, type=parse_bool, nargs="?", const=True, default=None, dest=_ignored_dest(flag),
                             help=argparse.SUPPRESS)


def _ignored_dest(flag: str) -> str:
    return "ignored_" + flag.lstrip("-").replace("-", "_")


# --- flags -> configuration -------------------------------------------------------------------------
def configuration(args: argparse.Namespace, registry: Registry) -> tuple[SchedulerConfiguration, FeatureGates, str]:
    """The validated configuration, feature gates and kubeconfig path, as ``Options.ApplyTo`` resolves
    them. Raises ConfigError, FlagError or OSError."""
    unsupported(args)
    gates = FeatureGates(parse_flag(args.feature_gates))
    if args.config:
        cfg = config_module.load_text(read_config(args.config), registry=registry, feature_gates=gates, source=args.config,
                                      validate=False)
        ignored = [f"--{name.replace('_', '-')}" for name in DEPRECATED if name != "kubeconfig" and getattr(args, name) is not None]
        if ignored:
            log.warning("flags %s are ignored because --config is set (as kube-scheduler does)", ", ".join(ignored))
        kubeconfig = cfg.client_connection.kubeconfig or args.kubeconfig or ""
    else:
        cfg = config_module.default_configuration(feature_gates=gates)
        apply_deprecated(args, cfg)
        kubeconfig = cfg.client_connection.kubeconfig
    apply_leader_election(args, cfg)
    validate_or_raise(cfg, gates, args.config or "")
    le = cfg.leader_election
    if le.leader_elect:
        try:
            validate_durations(le.lease_duration, le.renew_deadline, le.retry_period)
        except LeaderElectionConfigError as e:
            raise FlagError(f"couldn't create leader elector: {e}") from e
    return cfg, gates, kubeconfig


def apply_deprecated(args: argparse.Namespace, cfg: SchedulerConfiguration) -> None:
    """``Options.ApplyDeprecated``: flags given on the command line override the defaults."""
    cc = cfg.client_connection
    for flag, setter in (
        ("kubeconfig", lambda v: setattr(cc, "kubeconfig", v)),
        ("kube_api_content_type", lambda v: setattr(cc, "content_type", v)),
        ("kube_api_qps", lambda v: setattr(cc, "qps", v)),
        ("kube_api_burst", lambda v: setattr(cc, "burst", v)),
        ("profiling", lambda v: setattr(cfg, "enable_profiling", v)),
        ("contention_profiling", lambda v: setattr(cfg, "enable_contention_profiling", v)),
    ):
        _apply(args, flag, setter)


def apply_leader_election(args: argparse.Namespace, cfg: SchedulerConfiguration) -> None:
    """``Options.ApplyLeaderElectionTo``: leader election flags given override the configuration."""
    le = cfg.leader_election
    for flag, field_name in (
        ("leader_elect", "leader_elect"), ("leader_elect_lease_duration", "lease_duration"),
        ("leader_elect_renew_deadline", "renew_deadline"), ("leader_elect_retry_period", "retry_period"),
        ("leader_elect_resource_lock", "resource_lock"), ("leader_elect_resource_name", "resource_name"),
        ("leader_elect_resource_namespace", "resource_namespace"),
    ):
        _apply(args, flag, functools.partial(_set, le, field_name))


def _set(target: object, name: str, value: object) -> None:
    setattr(target, name, value)


def _apply(args: argparse.Namespace, flag: str, setter: Callable[[object], None]) -> None:
    value = getattr(args, flag, None)
    if value is not None:
        setter(value)


def unsupported(args: argparse.Namespace) -> None:
    """Clear errors for flag values kubesched cannot honour; warnings for accepted no-ops."""
    if args.emulated_version:
        raise FlagError("--emulated-version is not supported: kubesched emulates kube-scheduler 1.35 only")
    if args.kube_api_content_type and args.kube_api_content_type != "application/json" and not args.config:
        log.warning("--kube-api-content-type=%s: kubesched always talks JSON to the API server", args.kube_api_content_type)
    given = [f for f in (*IGNORED_VALUE_FLAGS, *IGNORED_BOOL_FLAGS) if getattr(args, _ignored_dest(f)) is not None]
    if given:
        log.warning("flags %s are accepted for compatibility with kube-scheduler and have no effect in kubesched", ", ".join(given))


# --- entry point --------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> int:
    if args.version:
        from kubesched.cli.common import version

        print(version())
        return 0
    from lightkube.core.exceptions import ConfigError as KubeconfigError

    try:
        options = options_from(args)
        if not args.write_config_to:
            load_config(options.kubeconfig or None, master=options.master or None)  # fail now on a bad kubeconfig
    except (FlagError, OSError, KubeconfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.write_config_to:
        Path(args.write_config_to).write_text(config_module.to_yaml(options.config))
        log.info("Wrote configuration to %s", args.write_config_to)
        return 0
    from kubesched.scheduler.serving.app import run as run_app

    return run_app(options)


def options_from(args: argparse.Namespace) -> RunOptions:
    """Flags and configuration file resolved into what ``SchedulerApp`` runs with."""
    from kubesched.scheduler.serving.app import RunOptions

    if bool(args.tls_cert_file) != bool(args.tls_private_key_file):
        raise FlagError("--tls-cert-file and --tls-private-key-file must be given together")
    registry = registry_from(args.plugins)
    cfg, gates, kubeconfig = configuration(args, registry)
    return RunOptions(config=cfg, feature_gates=gates, registry=registry, kubeconfig=kubeconfig, master=args.master,
                      bind_address=args.bind_address, secure_port=args.secure_port, insecure_port=args.port,
                      cert_dir=args.cert_dir, tls_cert_file=args.tls_cert_file, tls_private_key_file=args.tls_private_key_file,
                      pod_max_in_unschedulable=args.pod_max_in_unschedulable_pods_duration,
                      authentication_kubeconfig=args.authentication_kubeconfig,
                      authorization_kubeconfig=args.authorization_kubeconfig,
                      authorization_always_allow_paths=tuple(p.strip() for p in args.authorization_always_allow_paths.split(",")
                                                             if p.strip()),
                      authentication_token_cache_ttl=_ttl(args, "authentication_token_webhook_cache_ttl"),
                      authorization_allow_cache_ttl=_ttl(args, "authorization_webhook_cache_authorized_ttl"),
                      authorization_deny_cache_ttl=_ttl(args, "authorization_webhook_cache_unauthorized_ttl"))


def _ttl(args: argparse.Namespace, dest: str) -> float:
    """A cache TTL flag (a Go duration) in seconds; a clear error naming the flag when malformed."""
    text = getattr(args, dest)
    try:
        return ns_to_seconds(parse_duration(text))
    except ValueError as e:
        raise FlagError(f"--{dest.replace('_', '-')}: {e}") from None
