"""`orchestrate cooklist`, `why` and `graph`: what is cooked, why, and the reference graph."""

from __future__ import annotations

import json
import sys

import click

from orchestrator import (
    RunOptions,
    SwitchedCommand,
    build_file_argument,
    run_stages,
    split_build_file,
)

#: The run these commands read: the cook list and the asset graph it is found from.
COOK_LIST_RUN = RunOptions(stages=["dependency"])


@click.command(cls=SwitchedCommand)
@build_file_argument()
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def cooklist(build_file, fmt) -> None:
    """What is cooked and why; missing, ambiguous and never-cook references; cycles."""
    from stages.cooklist.explain import cooklist_text

    build, result = run_stages(build_file, COOK_LIST_RUN)
    cooked = result.outputs["cooklist"]
    if fmt == "json":
        click.echo(json.dumps(cooked.to_json(), indent=2, ensure_ascii=False))
    else:
        click.echo(cooklist_text(cooked, result.outputs["assets"].as_dict()), nl=False)
    sys.exit(1 if build.section("cook")["fail_on_missing"] and cooked.missing else 0)


@click.command(cls=SwitchedCommand)
@click.argument("words", nargs=-1, required=True, metavar="[BUILD_FILE] ASSET")
def why(words) -> None:
    """The chain from a root to ASSET (GUID, virtual path or path; for Cocos an id, a
    compressed id or a db:// URL), or why it is not cooked. Exit 2, with the closest names,
    when the project has no such asset and nothing references it."""
    from stages.cooklist.explain import namer, unknown_asset, why_text
    from stages.cooklist.explain import why as why_answers
    from stages.sources.base import index_of

    build_file, asset = split_build_file(words, "ASSET")
    build, result = run_stages(build_file, COOK_LIST_RUN)
    index = index_of(result.outputs["index"])
    canonical = getattr(index, "canonical", None)  # a Cocos compressed uuid
    asset = canonical(asset) if canonical is not None else asset
    assets = result.outputs["assets"].as_dict()
    shown = namer(assets)
    answers = why_answers(assets, result.outputs["cooklist"], asset, build.section("cook"), shown)
    if not any(answer.known for answer in answers):
        raise unknown_asset(assets, asset, shown)
    click.echo(why_text(answers, shown), nl=False)


@click.command(cls=SwitchedCommand)
@build_file_argument()
@click.option("--format", "fmt", type=click.Choice(["dot", "json"]), default="dot")
@click.option("--cooked-only", is_flag=True, help="Only assets in the cook list.")
def graph(build_file, fmt, cooked_only) -> None:
    """Export the asset reference graph (Graphviz DOT or JSON)."""
    from stages.cooklist.explain import graph_dot, graph_json

    build, result = run_stages(build_file, COOK_LIST_RUN)
    assets, cooked = result.outputs["assets"].as_dict(), result.outputs["cooklist"]
    if fmt == "json":
        click.echo(
            json.dumps(graph_json(assets, cooked, cooked_only), indent=2, ensure_ascii=False)
        )
    else:
        click.echo(graph_dot(assets, cooked, cooked_only), nl=False)
