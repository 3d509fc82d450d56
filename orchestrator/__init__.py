"""orchestrate: a parallel, cached build-pipeline orchestrator for game content.

The package itself is the stage author's interface: a stage (in `stages/`, or in a package of
your own) imports only from here — `from orchestrator import Plan, StageSpec, Unit` — and
`tests/test_layout.py` holds `stages/` and `configs/` to it. Behind it are the engine's layers:
`core/` (the graph, the scheduler, a unit's life), `files/` (the project's files and the output
folder's), `cache/`, `executors/` and `shell/` (the command line).

Every name is loaded on first use (PEP 562's module `__getattr__`), from the one module that
holds it: `import orchestrator` costs nothing, and a worker that imports a stage loads only what
that stage uses — never click, pydantic, rich or structlog unless it asks for the shell.
"""

from __future__ import annotations

import importlib

# typing.TYPE_CHECKING without importing typing (3 ms): type checkers know the name.
TYPE_CHECKING = False
if TYPE_CHECKING:  # the names of _HOMES below, for type checkers
    from typing import Any

    from .cache.entries import decode_entry
    from .codec import record
    from .core.config import unknown_key_message
    from .core.options import RunOptions
    from .core.registry import registered_stages
    from .core.values import UNCHANGED
    from .errors import (
        ConfigError,
        InternalError,
        MissingInput,
        OrchestrateError,
        ProjectError,
        RuleFileError,
        StepFailed,
    )
    from .files.atomic import atomic_write
    from .files.confined import ConfinedFolder
    from .files.lock import OutputLock
    from .files.outputs import (
        OutputFolder,
        control_character,
        remove_published,
    )
    from .files.projectfiles import (
        DEFAULT_MAX_FILE_SIZE,
        LINK_OUTSIDE,
        SPECIAL_FILE,
        TOO_LARGE,
        FilePolicy,
    )
    from .files.reads import Reader, to_posix
    from .hashing import (
        digest_bytes,
        digest_file,
        digest_value,
        fast_pickle,
    )
    from .keyed import (
        Changes,
        Keyed,
        KeyedPatch,
        decoded_entries,
        map_finish,
        map_update,
    )
    from .memory import paused_gc
    from .shell.arguments import (
        build_file_argument,
        split_build_file,
    )
    from .shell.runrecord import (
        PREVIOUS,
        RECORD,
        read_record,
        render_reports,
    )
    from .shell.runs import run_command, run_stages
    from .shell.switches import SwitchedCommand
    from .testing import StageRun, run_stage
    from .typing import (
        PROJECT,
        BuildSettings,
        Digest,
        FileEntry,
        Outputs,
        Parts,
        Plan,
        Problem,
        ProjectReader,
        ReportFiles,
        Section,
        StageChanges,
        StageContext,
        StageModule,
        StageSpec,
        StoredParts,
        Switch,
        Unit,
        UnitResults,
    )
    from .version import __version__
    from .yamlfile import (
        ExpansionRefused,
        compose_all,
        load_all,
        read_yaml,
    )

# Where each name of the interface lives (a module of this package → its names, space-separated).
_HOMES: dict[str, str] = {
    # What a stage declares and what the engine hands it (docs/engine-api.md).
    "typing": "StageSpec Unit Plan Parts StoredParts PROJECT Problem StageChanges FileEntry Section"
    " Switch ReportFiles Digest Outputs ProjectReader UnitResults StageContext BuildSettings"
    " StageModule",
    # Keyed values, their changes, and the helpers of a stage that maps one.
    "keyed": "Keyed KeyedPatch Changes map_update map_finish decoded_entries",
    "cache.entries": "decode_entry",
    "core.values": "UNCHANGED",
    # Storing and digesting values.
    "codec": "record",
    "hashing": "digest_value digest_bytes digest_file fast_pickle",
    "memory": "paused_gc",
    # The project's files as a unit reads them, and what the engine refuses to read.
    "files.reads": "Reader to_posix",
    "files.projectfiles": "FilePolicy DEFAULT_MAX_FILE_SIZE LINK_OUTSIDE SPECIAL_FILE TOO_LARGE",
    # The errors a stage raises or catches (each maps to an exit code).
    "errors": "OrchestrateError ConfigError ProjectError RuleFileError StepFailed InternalError"
    " MissingInput",
    # Users' YAML: line numbers kept, alias bombs refused.
    "yamlfile": "ExpansionRefused compose_all load_all read_yaml",
    # The output folder: confined paths, atomic writes, the ledger, the lock.
    "files.outputs": "OutputFolder control_character remove_published",
    "files.atomic": "atomic_write",
    "files.confined": "ConfinedFolder",
    "files.lock": "OutputLock",
    # What a content command (`orchestrate.commands`) needs of the engine and the shell.
    "core.registry": "registered_stages",
    "core.config": "unknown_key_message",
    "core.options": "RunOptions",
    "shell.runs": "run_stages run_command",
    "shell.switches": "SwitchedCommand",
    "shell.arguments": "build_file_argument split_build_file",
    "shell.runrecord": "read_record render_reports RECORD PREVIOUS",
    # Running one stage on its own in a test.
    "testing": "run_stage StageRun",
    # The product's version (in every action key and manifest).
    "version": "__version__",
}

_HOME_OF = {name: module for module, names in _HOMES.items() for name in names.split()}

__all__ = [*_HOME_OF]


def __getattr__(name: str) -> Any:
    home = _HOME_OF.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups find it without this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
