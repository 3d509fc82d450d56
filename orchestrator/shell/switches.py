"""Switches: flags and environment variables that set build-file keys for one run.

A section declares its switches (`typing.Switch`); every command made with `SwitchedCommand`
offers them as flags, and `active_overrides()` turns the flags given and the variables set into
overrides that `load_build` applies over the build file. That is how `orchestrate run` offers
`--no-custom-code` (declared by the `rules` section) without the engine knowing about rules, and
how a farm sets `ORCHESTRATE_NO_CUSTOM_CODE=1` once for every command.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import click

from ..errors import ConfigError
from ..typing import Section, Switch

TRUE = frozenset({"1", "true", "yes", "on"})
FALSE = frozenset({"", "0", "false", "no", "off"})
META_KEY = "orchestrate.switches"


@dataclass
class Overrides:
    """Build-file overrides: section → {key: value}; and what set each (`rules.x` → the flag)."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    set_by: dict[str, str] = field(default_factory=dict)


def registered_switches(sections: dict[str, Section] | None = None) -> list[tuple[str, Switch]]:
    """(section name, switch) of every registered section, in section order."""
    if sections is None:
        from ..core.registry import registered_sections

        sections = registered_sections()
    return [
        (name, switch) for name, section in sorted(sections.items()) for switch in section.switches
    ]


def _parameter(switch: Switch) -> str:
    return "switch_" + switch.flag.lstrip("-").replace("-", "_")


def env_is_set(name: str) -> bool:
    """Whether a switch's environment variable is on; ConfigError for a value that is neither."""
    value = os.environ.get(name)
    if value is None:
        return False
    text = value.strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return False
    raise ConfigError(f"expected 1 or 0 (true/false, yes/no, on/off), got {value!r}", key=name)


class SwitchedCommand(click.Command):
    """A command that offers every registered switch as a flag (for commands that run stages)."""

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        params = super().get_params(ctx)
        known = {param.name for param in params}
        extra: list[click.Parameter] = []
        for _, switch in registered_switches():
            name = _parameter(switch)
            if name in known:
                continue
            help_text = switch.help + (f" (or {switch.env}=1)." if switch.env else ".")
            extra.append(click.Option([switch.flag, name], is_flag=True, help=help_text))
        # before --help, which click appends last
        return [*params[:-1], *extra, params[-1]] if params else extra

    def invoke(self, ctx: click.Context) -> Any:
        given = []
        for _, switch in registered_switches():
            if ctx.params.pop(_parameter(switch), False):
                given.append(switch.flag)
        ctx.meta[META_KEY] = tuple(given)
        return super().invoke(ctx)


def active_overrides(flags: tuple[str, ...] | None = None) -> Overrides:
    """The overrides of the switches in force: `flags` given (default: those of the command being
    run), and the environment variables set."""
    if flags is None:
        ctx = click.get_current_context(silent=True)
        flags = tuple(ctx.meta.get(META_KEY, ())) if ctx is not None else ()
    overrides = Overrides()
    for section, switch in registered_switches():
        if switch.flag in flags:
            by = switch.flag
        elif switch.env and env_is_set(switch.env):
            by = f"{switch.env}={os.environ[switch.env]}"
        else:
            continue
        overrides.values.setdefault(section, {})[switch.key] = switch.value
        overrides.set_by[f"{section}.{switch.key}"] = by
    return overrides
