"""The build-file sections the stages read: their keys, types and defaults (docs/build-file.md).

Each is registered under the entry-point group `orchestrate.sections` with its key as the name,
so the engine validates the build file without knowing what the keys mean. pydantic gives
precise types, defaults and forbidden extra keys; the engine turns its errors into one line
naming the file, the line and the key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ByteSize, ConfigDict, Field, model_validator

from orchestrator import DEFAULT_MAX_FILE_SIZE, BuildSettings, FilePolicy, Section, Switch
from stages.rules.custom.containment import (
    DEFAULT_CPU_SECONDS,
    DEFAULT_FILE_SIZE,
    DEFAULT_MEMORY,
    SMALLEST_MEMORY,
    WorkerLimits,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CollectConfig(_Strict):
    skip_broken: bool = False
    exclude: list[str] = Field(default_factory=list)
    # A link leading out of the project is not followed unless `outside` (it is a problem).
    follow_links: Literal["inside", "outside"] = "inside"
    # A larger file is not read (it is a problem); 1 GiB, or e.g. "200 MiB".
    max_file_size: ByteSize = Field(default=ByteSize(DEFAULT_MAX_FILE_SIZE), gt=0)


def collect_file_policy(collect: dict) -> FilePolicy:
    """The engine's policy for the project's files, from the `collect` section."""
    return FilePolicy(collect["follow_links"] == "outside", int(collect["max_file_size"]))


class ExternalCooker(_Strict):
    command: str
    version: str = ""
    timeout: float = 300.0
    output_ext: str = ""


class CookConfig(_Strict):
    maps: list[str] = Field(default_factory=list)
    always_cook: list[str] = Field(default_factory=list)
    never_cook: list[str] = Field(default_factory=list)
    startup: list[str] = Field(default_factory=list)
    cultures: list[str] = Field(default_factory=list)
    include_editor_content: bool = False
    follow_soft_references: bool = True
    fail_on_missing: bool = False
    cookers: dict[str, Literal["copy", "xml"] | ExternalCooker] = Field(default_factory=dict)


class RuleLimits(_Strict):
    """`rules.limits`: what each custom-code worker process may use (docs/build-file.md, "Rule
    code"); sizes in bytes or with a unit ("4 GiB"); null: no limit."""

    memory: Annotated[ByteSize, Field(ge=SMALLEST_MEMORY)] | None = ByteSize(DEFAULT_MEMORY)
    file_size: Annotated[ByteSize, Field(gt=0)] | None = ByteSize(DEFAULT_FILE_SIZE)
    cpu_seconds: Annotated[float, Field(gt=0)] | None = DEFAULT_CPU_SECONDS


class RulesConfig(_Strict):
    files: list[str] = Field(default_factory=list)
    fail_on: Literal["error", "warning", "info", "never"] = "error"
    allow_custom_code: bool = True
    scope: Literal["all", "cooked"] = "all"
    timeout: float = 30.0
    limits: RuleLimits = RuleLimits()


class LayoutRule(_Strict):
    name: str
    maps: Literal["all"] | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    priority: int | None = None  # for `shared_dependencies: priority` (default 1)


class BundlesConfig(_Strict):
    layout: list[LayoutRule] = Field(default_factory=list)
    # None: the source's own policy (`priority` for cocos, `extract` otherwise; stages/pack.py)
    shared_dependencies: Literal["extract", "duplicate", "priority"] | None = None
    from_meta: bool = False


COCOS_ENGINE_VARIABLE = "COCOS_ENGINE"
ENGINE_ASSETS = ("editor", "assets")  # the built-in assets inside a Creator engine folder


class CocosConfig(_Strict):
    """`source: cocos`: the Creator install's engine folder, the included scenes, `internal`."""

    engine: str | None = None  # default: $COCOS_ENGINE
    scenes: list[str] | None = None  # None: every scene outside a bundle folder
    internal: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _engine_from_environment(cls, data: Any) -> Any:
        """$COCOS_ENGINE unless `engine` is given: read as the build file loads, so the value
        is part of the build file's slice and a changed variable re-collects."""
        variable = os.environ.get(COCOS_ENGINE_VARIABLE)
        if variable and isinstance(data, dict) and "engine" not in data:
            return {**data, "engine": variable}
        return data


class ArchiveConfig(_Strict):
    compression: Literal["none", "lz4", "zstd"] = "zstd"
    level: int = 3


class HashConfig(_Strict):
    append_hash: bool = False


class LinkXmlConfig(_Strict):
    assembly: str = "Messiah.Runtime"
    namespace: str | None = None


def _source_name(value: str) -> str:
    if not value or not value.replace("_", "").isalnum():
        raise ValueError(f"not a source name: {value!r}")
    return value


def worker_limits(rules: dict) -> WorkerLimits:
    """`rules.limits` of a `rules` section (as a stage reads it) for custom-code workers."""
    return WorkerLimits(**rules.get("limits", {}))


def rule_file_paths(build: BuildSettings) -> list[Path]:
    """`rules.files`, resolved against the build file's folder."""
    return [
        Path(os.path.normpath(Path(build.dir) / os.path.expanduser(name)))
        for name in build.section("rules")["files"]
    ]


def cocos_engine_path(build: BuildSettings) -> Path | None:
    """`cocos.engine` (or $COCOS_ENGINE), resolved against the build file's folder like
    `project`; None when neither names one."""
    engine = build.section("cocos")["engine"]
    if not engine:
        return None
    return Path(os.path.normpath(Path(build.dir) / os.path.expanduser(engine)))


def _check_cocos_engine(build: Any) -> None:
    """For `source: cocos`, the engine folder, when named, holds the built-in assets."""
    engine = cocos_engine_path(build)
    if (
        build.section("source") == "cocos"
        and engine is not None
        and not engine.joinpath(*ENGINE_ASSETS).is_dir()
    ):
        raise build.error(
            f"cocos.engine {engine} holds no {'/'.join(ENGINE_ASSETS)} folder (name the "
            f"engine folder of a Creator install, or unset {COCOS_ENGINE_VARIABLE})",
            ("cocos", "engine"),
        )


def _check_rule_files(build: Any) -> None:
    """Every rule file the build names exists (found before anything runs)."""
    for path, name in zip(rule_file_paths(build), build.section("rules")["files"]):
        if not path.is_file():
            raise build.error(f"rule file {name!r} not found ({path})", ("rules", "files"))


SOURCE = Section(
    Annotated[str, AfterValidator(_source_name)],
    "messiah",
    "the asset source that reads the project (messiah | unity | cocos)",
)
PLATFORM = Section(str, "generic", "the target platform, passed to cookers and the manifest")
COLLECT = Section(
    CollectConfig, CollectConfig(), "what collect reads", file_policy=collect_file_policy
)
COOK = Section(CookConfig, CookConfig(), "cook roots and cookers")
NO_CUSTOM_CODE = Switch(
    "--no-custom-code",
    "allow_custom_code",
    False,
    help="Refuse rules' custom code (func_str) whatever the build file says: such rules are "
    "listed as skipped; the build file's cook.cookers commands still run (the build file is "
    "trusted)",
    env="ORCHESTRATE_NO_CUSTOM_CODE",
)
RULES = Section(
    RulesConfig,
    RulesConfig(),
    "the rule library and its gate",
    check=_check_rule_files,
    switches=(NO_CUSTOM_CODE,),
)
BUNDLES = Section(BundlesConfig, BundlesConfig(), "the bundle layout")
ARCHIVE = Section(ArchiveConfig, ArchiveConfig(), "bundle compression")
HASH = Section(HashConfig, HashConfig(), "bundle hashes and file names")
LINK_XML = Section(LinkXmlConfig, LinkXmlConfig(), "link.xml")
# Validated even when absent, so that $COCOS_ENGINE is read at each load.
COCOS = Section(
    Annotated[CocosConfig, Field(validate_default=True)],
    {},
    "source: cocos: the engine folder, the included scenes, the internal bundle",
    check=_check_cocos_engine,
)
