"""The Messiah asset source (spec/asset-project.md): reader, rule index and project generator."""

from .reader import SOURCE, build_index, collect_project

__all__ = ["SOURCE", "build_index", "collect_project"]
