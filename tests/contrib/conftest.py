"""Manifests the scheduler-plugins tests share: the plugins' CRDs as shipped in their packages."""

from __future__ import annotations

from importlib import resources

import yaml


def crd(package: str, path: str) -> dict:
    """The CRD a bundled plugin ships (``crds/...`` inside ``package``)."""
    return yaml.safe_load(resources.files(package).joinpath(path).read_text(encoding="utf-8"))


POD_GROUP_CRD = crd("kubesched.contrib.coscheduling", "crds/scheduling.x-k8s.io_podgroups.yaml")
ELASTIC_QUOTA_CRD = crd("kubesched.contrib.capacityscheduling", "crds/scheduling.x-k8s.io_elasticquotas.yaml")
