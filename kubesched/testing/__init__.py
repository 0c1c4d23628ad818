"""Testing tools for plugin authors: ``PluginHarness`` runs one plugin against a few manifests."""

from kubesched.testing.harness import HarnessResult, PluginHarness, Status

__all__ = ["HarnessResult", "PluginHarness", "Status"]
