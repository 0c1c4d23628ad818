"""Leaf utilities every layer may use (upstream ``k8s.io/utils``): injected clocks (``clock``) and
the switch for placement-preserving fast paths (``fastpaths``). Imports nothing else of kubesched."""
