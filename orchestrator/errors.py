"""Every exception the engine raises, in one place.

The expected errors are `OrchestrateError`s: each carries where it happened (file, line, key) and
the exit code the command line maps it to. Beside them, the exceptions that are not a user's
error but a signal between two parts of the engine (`MissingInput`), or kept to the base class
their callers already catch (`CodecError` is a ValueError, `ExpansionRefused` a YAMLError).
"""

from __future__ import annotations

import yaml


class OrchestrateError(Exception):
    """Base of every expected error; `exit_code` is what the CLI returns for it."""

    exit_code = 3

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.key = key
        super().__init__(self.describe())

    def describe(self) -> str:
        where = ""
        if self.file:
            where = str(self.file)
            if self.line is not None:
                where += f":{self.line}"
        if self.key:
            where = f"{where}: {self.key}" if where else self.key
        return f"{where}: {self.message}" if where else self.message

    def __reduce__(self):  # keep file/line/key across pickling (Ray ships exceptions)
        return (_rebuild, (type(self), self.message, self.file, self.line, self.key))


def _rebuild(cls, message, file, line, key):
    return cls(message, file=file, line=line, key=key)


class ConfigError(OrchestrateError):
    """The build file (or a file it names) is invalid."""

    exit_code = 2


class ProjectError(OrchestrateError):
    """A project file the build cannot do without is malformed, or a path is unsafe."""

    exit_code = 2


class RuleFileError(OrchestrateError):
    """A rule file is not valid YAML or not a list/mapping of rules."""

    exit_code = 2


class StepFailed(OrchestrateError):
    """A step failed outside the project's content (external tool, cluster, disk, lock)."""

    exit_code = 4


class OutputLocked(StepFailed):
    """Another run holds the output folder."""


class GraphError(OrchestrateError):
    """The stage declarations do not form a valid graph (a bug in a stage, not user input)."""

    exit_code = 3


class InternalError(OrchestrateError):
    """A bug: the product's own code failed (a stage raised something unexpected, a worker's
    code failed). Never stored as a result."""

    exit_code = 3


class CacheCorrupt(OrchestrateError):
    """A cache file failed verification; callers drop it and recompute."""

    exit_code = 3


class MissingInput(Exception):
    """A unit tried to read a file its worker does not have; the driver resends it with the file.

    Not an OrchestrateError: it is control flow between a remote reader and the executor.
    """

    def __init__(self, relpath: str) -> None:
        self.relpath = relpath
        super().__init__(relpath)

    def __reduce__(self):
        return (MissingInput, (self.relpath,))


class MissingBlob(Exception):
    """A unit's worker could not read a stored result it was sent by digest (it does not see
    the cache folder, or the copy there is damaged): the driver resends the unit with the value.

    Not an OrchestrateError: it is control flow between a worker and the executor.
    """

    def __init__(self, digest: str, unseen: bool) -> None:
        self.digest = digest
        self.unseen = unseen  # the worker does not see the cache folder at all
        super().__init__(digest)

    def __reduce__(self):
        return (MissingBlob, (self.digest, self.unseen))


class CodecError(ValueError):
    """Bytes that do not decode to a value of known types (damaged, or foreign)."""


class ExpansionRefused(yaml.MarkedYAMLError):
    """A YAML file whose aliases expand past the budget, or repeat their own anchor (at
    `problem_mark`); yamlfile.py keeps the budget."""


class DryRunNamed(Exception):
    """A dry run named the units of a stage no later stage reads without running them: the
    stage has no values to finish and store (the scheduler goes on with the next stage)."""
