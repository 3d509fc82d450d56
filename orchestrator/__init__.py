"""orchestrate: a parallel, cached build-pipeline orchestrator for game content."""

__version__ = "0.1.0"
