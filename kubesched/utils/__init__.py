"""Leaf utilities every layer may use (upstream ``k8s.io/utils``): injected clocks (``clock``).
Imports nothing else of kubesched."""
