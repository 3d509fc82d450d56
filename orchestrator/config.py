"""The build file: one place that knows its keys, their types and defaults.

Validated with pydantic (precise types, defaults, forbidden extra keys); errors are rewritten into
one line that names the file, the line and the key, with "did you mean" for misspelt keys.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import ConfigError
from .yamlfile import read_yaml


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CollectConfig(_Section):
    skip_broken: bool = False
    exclude: list[str] = Field(default_factory=list)


class ExternalCooker(_Section):
    command: str
    version: str = ""
    timeout: float = 300.0
    output_ext: str = ""


class CookConfig(_Section):
    maps: list[str] = Field(default_factory=list)
    always_cook: list[str] = Field(default_factory=list)
    never_cook: list[str] = Field(default_factory=list)
    startup: list[str] = Field(default_factory=list)
    cultures: list[str] = Field(default_factory=list)
    include_editor_content: bool = False
    follow_soft_references: bool = True
    fail_on_missing: bool = False
    cookers: dict[str, Literal["copy", "xml"] | ExternalCooker] = Field(default_factory=dict)


class RulesConfig(_Section):
    files: list[str] = Field(default_factory=list)
    fail_on: Literal["error", "warning", "info", "never"] = "error"
    allow_custom_code: bool = True
    scope: Literal["all", "cooked"] = "all"
    timeout: float = 30.0


class LayoutRule(_Section):
    name: str
    maps: Literal["all"] | None = None
    include: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)


class BundlesConfig(_Section):
    layout: list[LayoutRule] = Field(default_factory=list)
    shared_dependencies: Literal["extract", "duplicate"] = "extract"
    from_meta: bool = False


class ArchiveConfig(_Section):
    compression: Literal["none", "lz4", "zstd"] = "zstd"
    level: int = 3


class HashConfig(_Section):
    append_hash: bool = False


class LinkXmlConfig(_Section):
    assembly: str = "Messiah.Runtime"
    namespace: str | None = None


class ExecutorConfig(_Section):
    kind: Literal["auto", "local", "ray"] = "auto"
    address: str | None = None
    workers: int | None = Field(default=None, ge=1)
    shared_paths: bool = False


class BuildConfig(_Section):
    project: str
    source: str = "messiah"
    platform: str = "generic"
    collect: CollectConfig = CollectConfig()
    cook: CookConfig = CookConfig()
    rules: RulesConfig = RulesConfig()
    bundles: BundlesConfig = BundlesConfig()
    archive: ArchiveConfig = ArchiveConfig()
    hash: HashConfig = HashConfig()
    link_xml: LinkXmlConfig = LinkXmlConfig()
    output: str = "build/out"
    cache: str = "build/cache"
    executor: ExecutorConfig = ExecutorConfig()

    @field_validator("source")
    @classmethod
    def _known_source(cls, value: str) -> str:
        if not value or not value.replace("_", "").isalnum():
            raise ValueError(f"not a source name: {value!r}")
        return value


class Build:
    """A loaded build file: the validated config, its raw mapping, and resolved absolute paths."""

    def __init__(self, path: Path, config: BuildConfig, raw: dict) -> None:
        self.path = path
        self.config = config
        self.raw = raw
        self.dir = path.parent
        self.project_root = _resolve(self.dir, config.project)
        self.output_dir = _resolve(self.dir, config.output)
        self.cache_dir = _resolve(self.dir, config.cache)
        self.rule_files = [_resolve(self.dir, f) for f in config.rules.files]

    def section(self, name: str) -> Any:
        """A top-level section as plain data with defaults filled in (a dict for mappings)."""
        value = getattr(self.config, name)
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value

    def slice_for(self, keys: tuple[str, ...]) -> dict:
        """The part of the build file a stage reads, for its cache key (paths made relative)."""
        return {key: self.section(key) for key in keys if key not in ("project", "output", "cache")}


def _resolve(base: Path, value: str) -> Path:
    return Path(os.path.normpath(base / os.path.expanduser(value)))


def load_build(path: str | os.PathLike, overrides: dict | None = None) -> Build:
    """Read and validate a build file; raise ConfigError naming the file, line and key."""
    path = Path(path).resolve()
    node, raw = read_yaml(path, ConfigError, "build file")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("expected a mapping of build settings at the top level",
                          file=str(path), line=1)
    for key, value in (overrides or {}).items():
        raw.setdefault(key, {})
        if isinstance(raw[key], dict) and isinstance(value, dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    try:
        config = BuildConfig.model_validate(raw)
    except ValidationError as exc:
        raise _explain(exc, path, node) from None
    build = Build(path, config, raw)
    if not build.project_root.is_dir():
        raise ConfigError(f"project folder {build.project_root} does not exist",
                          file=str(path), line=_line_of(node, ("project",)), key="project")
    for rule_file, name in zip(build.rule_files, config.rules.files):
        if not rule_file.is_file():
            raise ConfigError(f"rule file {name!r} not found ({rule_file})", file=str(path),
                              line=_line_of(node, ("rules", "files")), key="rules.files")
    return build


def _explain(exc: ValidationError, path: Path, node: Any) -> ConfigError:
    error = exc.errors()[0]
    loc = tuple(str(p) for p in error["loc"])
    loc = tuple(p for p in loc if not p.startswith(("function-", "literal[", "ExternalCooker")))
    key = ".".join(loc)
    kind = error["type"]
    if kind == "extra_forbidden":
        parent = _model_at(loc[:-1])
        known = sorted(parent.model_fields) if parent else []
        close = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else f"; expected one of: {', '.join(known)}"
        message = f"unknown key '{loc[-1]}'{hint}"
    elif kind == "missing":
        message = f"required key '{loc[-1]}' is missing"
    else:
        given = error.get("input")
        message = f"{error['msg']} (got {given!r})" if not isinstance(given, dict) else error["msg"]
    return ConfigError(message, file=str(path), line=_line_of(node, loc), key=key)


def _model_at(loc: tuple[str, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = BuildConfig
    for part in loc:
        if part.isdigit():
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        annotation = field.annotation
        inner = getattr(annotation, "__args__", None)
        candidates = [annotation, *(inner or ())]
        found = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if found is None:
            return None
        model = found
    return model


def _line_of(node: Any, loc: tuple[str, ...]) -> int | None:
    """1-based line of the deepest YAML node along `loc` (keys and list indices)."""
    line = None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    line = key_node.start_mark.line + 1
                    node = value_node
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            return line
    return line
