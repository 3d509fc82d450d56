"""The build file: the engine's own keys, plus the sections registered packages add.

The engine knows `project`, `output`, `cache` and `executor`; every other top-level key is a
`Section` from the entry-point group `orchestrate.sections` (registry.py). One pydantic model is
made from both, so types, defaults and unknown keys are checked in one pass; errors are rewritten
into one line that names the file, the line and the key, with "did you mean" for misspelt keys.
"""

from __future__ import annotations

import difflib
import os
from functools import lru_cache
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    create_model,
    field_validator,
)

from ..cache.remote import RemoteSettings
from ..cache.signing import EntryKey
from ..errors import ConfigError
from ..files.projectfiles import FilePolicy
from ..typing import Section
from ..yamlfile import read_yaml
from .cachesettings import CacheConfig, read_key, read_remote

ENGINE_KEYS = ("project", "output", "cache", "executor")
PATH_KEYS = ("project", "output", "cache")  # not part of any stage's slice: paths are not content


class ExecutorConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["auto", "local", "ray"] = "auto"
    address: str | None = None
    workers: int | None = Field(default=None, ge=1)
    shared_paths: bool = False


class EngineConfig(BaseModel):
    """The keys the engine itself reads."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    project: str
    output: str = "build/out"
    cache: CacheConfig = CacheConfig()
    executor: ExecutorConfig = ExecutorConfig()

    @field_validator("cache", mode="before")
    @classmethod
    def _cache_folder(cls, value: Any) -> Any:
        return {"path": value} if isinstance(value, str) else value


@lru_cache(maxsize=8)
def _schema(sections: tuple[tuple[str, Section], ...]) -> type[BaseModel]:
    """The build file's model: the engine's keys and every registered section."""
    fields: dict[str, Any] = {}
    for name, section in sections:
        if name in ENGINE_KEYS:
            raise ConfigError(
                f"a package registers the build-file key {name!r}, which the engine owns"
            )
        fields[name] = (section.annotation, section.default)
    return create_model("BuildConfig", __base__=EngineConfig, **fields)


class Build:
    """A loaded build file: the validated config, its raw mapping, and resolved absolute paths."""

    def __init__(
        self,
        path: Path,
        config: BaseModel,
        raw: dict,
        node: Any = None,
        sections: dict[str, Section] | None = None,
        set_by: dict[str, str] | None = None,
    ) -> None:
        self.path = path
        self.config = config
        self.raw = raw
        self.node = node
        self.sections = sections or {}
        self.dir = path.parent
        self.project_root = _resolve(self.dir, config.project)  # type: ignore[attr-defined]
        self.output_dir = _resolve(self.dir, config.output)  # type: ignore[attr-defined]
        self.cache_dir = _resolve(self.dir, config.cache.path)  # type: ignore[attr-defined]
        self.set_by = set_by or {}  # `section.key` → the switch that set it for this run

    def section(self, name: str) -> Any:
        """A top-level section as plain data with defaults filled in (a dict for mappings)."""
        value = getattr(self.config, name)
        return value.model_dump(mode="json") if isinstance(value, BaseModel) else value

    @property
    def file_policy(self) -> FilePolicy:
        """What of the project's files the engine reads (the section that says, else the
        defaults: links leading out of the project, special files and files over 1 GiB are
        not read)."""
        for name, section in sorted(self.sections.items()):
            if section.file_policy is not None:
                return section.file_policy(self.section(name))
        return FilePolicy()

    def slice_for(self, keys: tuple[str, ...]) -> dict:
        """The part of the build file a stage reads, for its cache key (paths left out)."""
        return {key: self.section(key) for key in keys if key not in PATH_KEYS}

    def cache_key(self) -> EntryKey | None:
        """The farm's key that signs and checks cache entries, read now; None without one."""
        return read_key(self.config.cache, self.dir, self.error)  # type: ignore[attr-defined]

    def cache_remote(self) -> RemoteSettings | None:
        """The cache server behind the cache folder, its header's value read now; None
        without one."""
        return read_remote(self.config.cache, self.error)  # type: ignore[attr-defined]

    def error(self, message: str, key: tuple[str, ...]) -> ConfigError:
        """A ConfigError about `key` (a path of keys and list indices) naming this file's line."""
        return ConfigError(
            message, file=str(self.path), line=line_of(self.node, key), key=".".join(key)
        )


def _resolve(base: Path, value: str) -> Path:
    return Path(os.path.normpath(base / os.path.expanduser(value)))


def load_build(
    path: str | os.PathLike,
    overrides: dict | None = None,
    sections: dict[str, Section] | None = None,
    set_by: dict[str, str] | None = None,
) -> Build:
    """Read and validate a build file; raise ConfigError naming the file, line and key.

    `overrides` (section → keys) are merged over what it says; `set_by` names the switch that
    set each overridden `section.key` (for the run record). `sections` defaults to the
    registered ones (registry.py).
    """
    if sections is None:
        from .registry import registered_sections

        sections = registered_sections()
    path = Path(path).resolve()
    node, raw = read_yaml(path, ConfigError, "build file")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(
            "expected a mapping of build settings at the top level", file=str(path), line=1
        )
    for key, value in (overrides or {}).items():
        raw.setdefault(key, {})
        if isinstance(raw[key], dict) and isinstance(value, dict):
            raw[key] = {**raw[key], **value}
        else:
            raw[key] = value
    schema = _schema(tuple(sorted(sections.items())))
    try:
        config = schema.model_validate(raw)
    except ValidationError as exc:
        raise _explain(exc, path, node, schema) from None
    build = Build(path, config, raw, node, sections, set_by)
    if not build.project_root.is_dir():
        raise build.error(f"project folder {build.project_root} does not exist", ("project",))
    _check_output_folder(build)
    _check_no_project_links(build)
    for section in sections.values():
        if section.check is not None:
            section.check(build)
    return build


def _check_output_folder(build: Build) -> None:
    """The output folder is the build's alone: it may not hold the project, the build file or
    the cache, which `clean` and the removal of stale outputs would otherwise reach."""
    output = Path(os.path.realpath(build.output_dir))
    for what, path in (
        ("the project", build.project_root),
        ("the build file", build.path),
        ("the cache", build.cache_dir),
    ):
        real = Path(os.path.realpath(path))
        if real == output or real.is_relative_to(output):
            raise build.error(
                f"the output folder {output} holds {what} ({real}); give the outputs a folder "
                "of their own (the default is build/out)",
                ("output",),
            )


def _check_no_project_links(build: Build) -> None:
    """An output or cache folder inside the project is reached through the project's own
    folders: were one of them a symbolic link, the writes would land wherever it points (the
    folders below the output and cache folders are opened without following links:
    cache/confined.py)."""
    root = Path(os.path.realpath(build.project_root))
    for key, folder in (("output", build.output_dir), ("cache", build.cache_dir)):
        current = Path(folder.anchor)
        for part in folder.parts[1:]:
            holder = Path(os.path.realpath(current))
            current = current / part
            if holder.is_relative_to(root) and current.is_symlink():
                raise build.error(
                    f"the {key} folder {folder} is reached through a symbolic link inside the "
                    f"project ({current} -> {os.readlink(current)}); name the real folder",
                    (key,),
                )


def _explain(exc: ValidationError, path: Path, node: Any, schema: type[BaseModel]) -> ConfigError:
    errors = exc.errors()
    # A misspelt key also leaves the key it meant missing: name the misspelling, which says both.
    error = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    kind = error["type"]
    if kind == "extra_forbidden":
        parent, model = _follow(schema, error["loc"][:-1])
        loc = (*parent, str(error["loc"][-1]))
        known = sorted(model.model_fields) if model is not None else []
        message = unknown_key_message(loc[-1], known)
    else:
        loc, _ = _follow(schema, error["loc"])
        if kind == "missing":
            message = f"required key '{loc[-1]}' is missing"
        else:
            given = error.get("input")
            message = (
                f"{error['msg']} (got {given!r})" if not isinstance(given, dict) else error["msg"]
            )
    return ConfigError(message, file=str(path), line=line_of(node, loc), key=".".join(loc))


def closest_key(key: str, known) -> str | None:
    """The known key `key` is most likely a misspelling of, if any is close."""
    close = difflib.get_close_matches(key, list(known), n=1)
    return close[0] if close else None


def unknown_key_message(key: str, known: list[str], noun: str = "key") -> str:
    """`unknown key 'x' (did you mean 'y'?)`, or the keys there are when nothing is close.

    Rule files say the same of their fields (`noun="field"`).
    """
    close = closest_key(key, known)
    if close is not None:
        return f"unknown {noun} '{key}' (did you mean '{close}'?)"
    return f"unknown {noun} '{key}' (expected one of: {', '.join(known)})"


def _follow(schema: type[BaseModel], loc: tuple) -> tuple[tuple[str, ...], type[BaseModel] | None]:
    """A pydantic error location as the user wrote it, and the model found at its end (None
    when it ends elsewhere). pydantic puts a tag in the location where a value was tried
    against one member of a union (`ExternalCooker`, `literal['copy','xml']`,
    `function-after[...]`): tags are dropped, and a model's tag picks that member."""
    shown: list[str] = []
    options: list[Any] = [schema]  # what the value at this point of the path may be
    for raw_part in loc:
        part = str(raw_part)
        members = [member for option in options for member in _members(option)]
        tagged = [m for m in members if isinstance(m, type) and m.__name__ == part]
        if tagged:
            options = tagged
            continue
        if part.startswith(("function-", "literal[")):
            continue
        shown.append(part)
        options = [inner for member in members for inner in _inner(member, part)]
    models = [
        member
        for option in options
        for member in _members(option)
        if isinstance(member, type) and issubclass(member, BaseModel)
    ]
    return tuple(shown), (models[0] if models else None)


def _members(annotation: Any) -> list[Any]:
    """The alternatives of an annotation: a union's members, Annotated and Optional unwrapped."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _members(get_args(annotation)[0])
    if origin is Union or origin is UnionType:
        return [member for arg in get_args(annotation) for member in _members(arg)]
    return [annotation]


def _inner(annotation: Any, part: str) -> list[Any]:
    """What `annotation` holds at key or index `part`: a model's field, a list's or a dict's
    values."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(part)
        return [field.annotation] if field is not None else []
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (list, tuple, set, frozenset) and part.isdigit() and args:
        return [args[0]]
    if origin is dict and len(args) == 2:
        return [args[1]]
    return []


def line_of(node: Any, loc: tuple[str, ...]) -> int | None:
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
