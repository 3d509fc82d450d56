"""What packing follows besides the assets, read from the build file and the source: the
options the pack unit packs by, and what `pack.update` compares to prove an edit moved none of
it (stages/pack.py)."""

from __future__ import annotations

from typing import NamedTuple

from orchestrator import digest_value, record
from stages.algorithms.priority import PRIORITY
from stages.layout.packing import source_bundles
from stages.layout.placement import LayoutMatcher
from stages.sources import get_source
from stages.sources.base import PackHook

DEFAULT_POLICY = "extract"


def sharing_policy(bundles: dict, source_name: str) -> str:
    """`bundles.shared_dependencies`, or when the build file names none the source's own policy
    (`source: cocos` shares by priority, as Creator does), else `extract`."""
    given = bundles.get("shared_dependencies")
    if given:
        return given
    return getattr(get_source(source_name), "shared_dependencies", DEFAULT_POLICY)


@record
class PackOptions(NamedTuple):
    """What the packing follows besides the assets (the build file's `bundles` and `cook`, and
    what the source says); its fields are also the unit's key."""

    layout: list
    policy: str  # bundles.shared_dependencies
    maps: list[str]
    follow_soft: bool
    assigned: dict[str, list[str]] | None  # bundles the project assigns (None: from_meta off)
    not_bundled: dict[str, str]  # assets no bundle may hold → why
    priorities: dict[str, int]


@record
class Loose(NamedTuple):
    """A cooked resource no reference the pack follows touches (layout/delta.py), and where it
    stands in the cook order."""

    id: str
    position: int


@record
class PackState(NamedTuple):
    """What the last plan packed besides the assets: the digests of the cook order, of the
    build file's sections it read and of the options (with the source's hook), to tell in
    `update` whether any moved."""

    order: str
    settings: str
    options: str
    # the ids cooked assets follow a reference to that are not cooked (layout/delta.py)
    dangling: tuple[str, ...] = ()
    # the cooked resources no followed reference touches, in cook order (layout/delta.py)
    loose: tuple[Loose, ...] = ()


def pack_options(ctx, inputs: dict) -> tuple[PackOptions, PackHook | None]:
    """The options and, under `shared_dependencies: priority`, the source's hook."""
    cook = ctx.section("cook")
    bundles = ctx.section("bundles")
    source = inputs["source"]
    options = PackOptions(
        layout=bundles.get("layout", []),
        policy=sharing_policy(bundles, ctx.section("source")),
        maps=list(cook.get("maps", [])),
        follow_soft=bool(cook.get("follow_soft_references", True)),
        assigned=(
            source_bundles(source, ctx.section("source")) if bundles.get("from_meta") else None
        ),
        not_bundled=dict(getattr(source, "not_bundled", None) or {}),
        priorities=dict(getattr(source, "bundle_priorities", None) or {}),
    )
    hook = getattr(source, "pack_hook", None) if options.policy == PRIORITY else None
    return options, hook


def settings_digest(ctx) -> str:
    """The build-file sections packing reads beyond its own `bundles` (whose change the engine
    answers with a full plan)."""
    return digest_value([ctx.section(name) for name in ("bundles", "cook", "source")])


def options_digest(ctx, inputs: dict) -> str:
    """The options with the source's hook, as `PackState.options` holds them."""
    return digest_value(list(pack_options(ctx, inputs)))


def layout_matcher(ctx, inputs: dict) -> LayoutMatcher:
    """The layout rules compiled to sign assets; whole assets under a source's hook (the source
    is read only then)."""
    bundles = ctx.section("bundles")
    hooked = sharing_policy(bundles, ctx.section("source")) == PRIORITY and (
        getattr(inputs["source"], "pack_hook", None) is not None
    )
    return LayoutMatcher(bundles.get("layout", []), ctx.section("cook").get("maps", []), hooked)
