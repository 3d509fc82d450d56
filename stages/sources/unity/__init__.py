"""The Unity asset source (docs/unity.md): `.meta` files, YAML documents, bundles from metas."""

from .reader import SOURCE

__all__ = ["SOURCE"]
