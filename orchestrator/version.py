"""The product's version: in every action key (core/rebuild.py), the manifests and the command
line's `--version`. A module of its own, on the ground floor, so that the engine's layers read it
without importing the package's face (`orchestrator/__init__.py` sits above them all)."""

__version__ = "0.1.0"
