"""The Messiah asset source (spec/asset-project.md): reader, rule index and project generator;
`SOURCE` plans and assembles a project whole or patches it from what changed (patching.py)."""

from .patching import SOURCE
from .reader import build_index, collect_project

__all__ = ["SOURCE", "build_index", "collect_project"]
