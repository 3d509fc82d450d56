"""Switches: `--no-custom-code` and ORCHESTRATE_NO_CUSTOM_CODE win over the build file, on every
command that runs stages, while the engine stays ignorant of rules."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
import yaml
from buildkit import REPO, run_inprocess

from orchestrator.errors import ConfigError
from orchestrator.shell.switches import active_overrides, registered_switches
from orchestrator.typing import Section, Switch

PROJECT_FILE = "Repository/resource.repository"


def custom_code_build(tmp_path: Path) -> tuple[Path, Path]:
    """A build whose rule file runs custom code that leaves a mark, at load and when called."""
    sentinel = tmp_path / "custom-code-ran"
    project = tmp_path / "project" / "Repository"
    project.mkdir(parents=True)
    (project / "resource.repository").write_text(
        "<Repository><Items><Item><GUID>g</GUID></Item></Items></Repository>", encoding="utf-8"
    )
    rules = [
        {
            "id": "marks",
            "rpath": r"resource\.repository$",
            "xpath": "*/Items/Item,GUID",
            "condition": ["func_check"],
            "func_str": (
                f"open({str(sentinel)!r}, 'a').write('load ')\n"
                "def check(**kw):\n"
                f"    open({str(sentinel)!r}, 'a').write('call ')\n"
                "    return []\n"
            ),
        },
        {
            "id": "plain",
            "rpath": r"resource\.repository$",
            "xpath": "*/Items/Item,GUID",
            "condition": ["exists"],
        },
    ]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    build = tmp_path / "build.yaml"
    build.write_text(
        "project: project\nrules:\n  files: [rules.yaml]\n  allow_custom_code: true\n"
        "executor:\n  kind: local\n",
        encoding="utf-8",
    )
    return build, sentinel


def skipped(tmp_path: Path) -> list:
    return json.loads((tmp_path / "build" / "out" / "reports" / "validate.json").read_text())[
        "skipped"
    ]


def test_without_the_switch_custom_code_runs(tmp_path):
    """The control: as the build file allows, the rule's code runs (its top level when the
    rules load, to learn its names without the index, and again in the worker that calls it;
    then per source)."""
    build, sentinel = custom_code_build(tmp_path)
    assert run_inprocess("run", str(build), "--stages", "validate") == 0
    assert sentinel.read_text() == "load load call "
    assert skipped(tmp_path) == []


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--no-custom-code"],
        ["run", "--stages", "validate", "--no-custom-code"],
        ["validate", "--no-custom-code"],
        ["cooklist", "--no-custom-code"],
    ],
)
def test_no_custom_code_wins_over_the_build_file(tmp_path, capsys, args):
    """With --no-custom-code the rule's code never runs, not even while planning."""
    build, sentinel = custom_code_build(tmp_path)
    command, *options = args
    code = run_inprocess(command, str(build), *options)
    assert code == 0, capsys.readouterr().err
    assert not sentinel.exists()
    if command == "run" and "--dry-run" not in options:
        reason = "rules.allow_custom_code is false"
        assert skipped(tmp_path) == [{"rule": "marks", "reason": reason}]


def test_a_dry_run_plans_validate_without_running_refused_code(tmp_path):
    """`run --dry-run` plans validate (it loads the rules) once collect is cached: with the
    switch the code never runs; without it, it does (the control)."""
    build, sentinel = custom_code_build(tmp_path)
    assert run_inprocess("run", str(build), "--no-custom-code") == 0
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules.read_text().replace("id: plain", "id: plain-again"))
    assert run_inprocess("run", str(build), "--dry-run", "--no-custom-code") == 0
    assert not sentinel.exists()
    assert run_inprocess("run", str(build), "--dry-run") == 0
    assert sentinel.read_text() == "load "


QUERY_COMMANDS = {
    "why": ["why", "g"],
    "graph": ["graph", "--format", "json"],
    "cooklist": ["cooklist", "--format", "json"],
}


@pytest.mark.parametrize("command", sorted(QUERY_COMMANDS))
def test_why_graph_and_cooklist_never_load_the_rules_so_custom_code_never_runs(
    tmp_path, capsys, monkeypatch, command
):
    """`why`, `graph` and `cooklist` run only collect and dependency, which never load the rule
    library: its code runs neither with --no-custom-code or ORCHESTRATE_NO_CUSTOM_CODE=1 nor
    even without them (the control that shows no rule is loaded), and each answers the same."""
    build, sentinel = custom_code_build(tmp_path)
    name, *options = QUERY_COMMANDS[command]
    answers = []
    for switch, variable in (([], None), (["--no-custom-code"], None), ([], "1")):
        if variable is None:
            monkeypatch.delenv("ORCHESTRATE_NO_CUSTOM_CODE", raising=False)
        else:
            monkeypatch.setenv("ORCHESTRATE_NO_CUSTOM_CODE", variable)
        code = run_inprocess(name, str(build), *options, *switch)
        out, err = capsys.readouterr()
        assert code == 0, err
        assert not sentinel.exists(), (switch, variable)
        assert not (tmp_path / "build" / "out" / "reports" / "validate.json").exists()
        answers.append(out)
    assert answers[0] == answers[1] == answers[2]
    if command == "why":
        assert answers[0].startswith("/ g: missing")
    elif command == "graph":
        assert [node["id"] for node in json.loads(answers[0])["nodes"]] == ["g"]
    else:
        assert json.loads(answers[0])["cooked"] == []


@pytest.mark.parametrize("value", ["1", "true", "YES", "on"])
def test_the_environment_variable_does_what_the_flag_does(tmp_path, monkeypatch, value):
    """ORCHESTRATE_NO_CUSTOM_CODE (for CI and farms) refuses custom code on every command."""
    build, sentinel = custom_code_build(tmp_path)
    monkeypatch.setenv("ORCHESTRATE_NO_CUSTOM_CODE", value)
    assert run_inprocess("run", str(build)) == 0
    assert run_inprocess("validate", str(build), "--format", "json") == 0
    assert not sentinel.exists()
    assert skipped(tmp_path) == [{"rule": "marks", "reason": "rules.allow_custom_code is false"}]


def test_an_off_value_leaves_the_build_file_in_charge(tmp_path, monkeypatch):
    """ORCHESTRATE_NO_CUSTOM_CODE=0 changes nothing."""
    build, sentinel = custom_code_build(tmp_path)
    monkeypatch.setenv("ORCHESTRATE_NO_CUSTOM_CODE", "0")
    assert run_inprocess("run", str(build)) == 0
    assert sentinel.exists()


def test_an_unreadable_value_is_bad_input(tmp_path, monkeypatch, capsys):
    """A value that is neither on nor off exits 2, naming the variable."""
    build, sentinel = custom_code_build(tmp_path)
    monkeypatch.setenv("ORCHESTRATE_NO_CUSTOM_CODE", "maybe")
    assert run_inprocess("run", str(build)) == 2
    assert "ORCHESTRATE_NO_CUSTOM_CODE: expected 1 or 0" in capsys.readouterr().err
    assert not sentinel.exists()


def test_switches_come_from_sections_not_from_the_engine():
    """The engine offers what sections declare; it names no rule concept itself."""
    assert ("rules", "--no-custom-code") in [
        (name, switch.flag) for name, switch in registered_switches()
    ]
    for path in (REPO / "orchestrator").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        code_strings = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
        ]
        names = [n.id for n in ast.walk(tree) if isinstance(n, ast.Name)]
        for text in code_strings + names:
            assert "custom" not in text.lower() and "rules" not in text, (path, text)


def test_any_section_can_declare_a_switch(monkeypatch):
    """A third-party section's switch becomes an override of its own key, by flag or variable."""
    toy = Section(dict, {}, switches=(Switch("--fast", "level", 0, env="TOY_FAST"),))
    monkeypatch.setattr(
        "orchestrator.shell.switches.registered_switches",
        lambda: [("toy", s) for s in toy.switches],
    )
    assert active_overrides(("--fast",)).values == {"toy": {"level": 0}}
    assert active_overrides(()).values == {}
    monkeypatch.setenv("TOY_FAST", "yes")
    overrides = active_overrides(())
    assert overrides.values == {"toy": {"level": 0}} and overrides.set_by == {
        "toy.level": "TOY_FAST=yes"
    }
    monkeypatch.setenv("TOY_FAST", "sometimes")
    with pytest.raises(ConfigError, match="TOY_FAST"):
        active_overrides(())


def test_help_lists_the_switch_on_commands_that_run_stages(capsys):
    """run, validate, cooklist, why, graph and demo offer --no-custom-code."""
    for command in ("run", "validate", "cooklist", "why", "graph", "demo"):
        assert run_inprocess(command, "--help") == 0
        assert "--no-custom-code" in capsys.readouterr().out, command


def demo_with_marked_rules(monkeypatch: pytest.MonkeyPatch, sentinel: Path) -> list[str]:
    """Make `demo` generate its starter rule library plus a rule whose code leaves a mark; the
    ids of the rules that carry custom code, in file order."""
    import stages.sources.messiah.generator as generator

    starter = generator.starter_rules_bytes()
    marking = {
        "id": "demo-marks",
        "rpath": r"resource\.repository$",
        "xpath": "*/Items/Item,GUID",
        "condition": ["func_check"],
        "func_str": (
            f"open({str(sentinel)!r}, 'a').write('load ')\n"
            "def check(**kw):\n"
            f"    open({str(sentinel)!r}, 'a').write('call ')\n"
            "    return []\n"
        ),
    }
    marked = starter + b"\n" + yaml.safe_dump([marking], allow_unicode=True).encode("utf-8")
    monkeypatch.setattr(generator, "starter_rules_bytes", lambda: marked)
    return [rule["id"] for rule in yaml.safe_load(marked) if "func_str" in rule]


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_demo_with_the_switch_never_runs_the_rule_librarys_code(tmp_path, monkeypatch, how):
    """`demo --no-custom-code` (or the variable) builds the generated project end to end with
    none of its rule library's custom code run: every rule carrying code is reported skipped,
    and the demo exits 0 as documented."""
    sentinel = tmp_path / "custom-code-ran"
    with_code = demo_with_marked_rules(monkeypatch, sentinel)
    dest = tmp_path / "demo"
    options = ["--assets", "100", "--executor", "local"]
    if how == "flag":
        options.append("--no-custom-code")
    else:
        monkeypatch.setenv("ORCHESTRATE_NO_CUSTOM_CODE", "1")
    assert run_inprocess("demo", str(dest), *options) == 0
    assert not sentinel.exists()
    report = json.loads((dest / "build" / "out" / "reports" / "validate.json").read_text())
    reason = "rules.allow_custom_code is false"
    assert report["skipped"] == [{"rule": rule, "reason": reason} for rule in with_code]


def test_demo_without_the_switch_runs_the_rule_librarys_code(tmp_path, monkeypatch):
    """The control: the demo's build file allows custom code, so the marking rule's code runs
    (at load, then per repository) and nothing is skipped."""
    sentinel = tmp_path / "custom-code-ran"
    demo_with_marked_rules(monkeypatch, sentinel)
    monkeypatch.delenv("ORCHESTRATE_NO_CUSTOM_CODE", raising=False)
    dest = tmp_path / "demo"
    assert run_inprocess("demo", str(dest), "--assets", "100", "--executor", "local") == 0
    assert sentinel.read_text().startswith("load load call ")
    report = json.loads((dest / "build" / "out" / "reports" / "validate.json").read_text())
    assert report["skipped"] == []


def test_no_custom_code_leaves_the_build_files_own_cookers_running(tmp_path, capsys):
    """Decided: the build file is the farm's, trusted (it names the folders written, the cache
    and the cluster, and may allow custom code itself); `--no-custom-code` refuses the code
    that comes with content, rules' func_str, and the build file's cook.cookers commands still
    run. The flag's help says so (docs/build-file.md, "Rule code")."""
    import shutil

    from buildkit import TESTS, edit_build

    case = tmp_path / "case"
    shutil.copytree(TESTS / "data" / "bad" / "_base", case)
    mark = tmp_path / "cooker-ran"
    cooker = {
        "command": f'sh -c \'find "$0" -type f | sort | xargs cat > "$1"; echo x >> {mark}\' '
        "{input} {output}",
        "version": "1",
    }
    build = edit_build(case / "build.yaml", cook={"cookers": {"Texture": cooker}})
    assert run_inprocess("run", str(build), "--no-custom-code") == 0
    assert mark.read_text() == "x\n"
    capsys.readouterr()
    assert run_inprocess("run", "--help") == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert "cook.cookers commands still run (the build file is trusted)" in help_text
