"""What a new user meets first: `generate` and `demo` never overwrite their edits, a run that
published with rule failures says so, `why` answers a name it does not know with the closest it
has (and the README's example runs as written), and commands find their build file."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from buildkit import REPO, make_project, run_inprocess

USER_TEXT = "# my own build file, edited by hand\nproject: project\n"


# -- generate and demo refuse to overwrite what a person may have edited -------------------------


@pytest.mark.parametrize(
    "command, name",
    [
        (["generate"], "build.yaml"),
        (["generate"], "rules.yaml"),
        (["generate", "--engine", "cocos"], "build.yaml"),
        (["demo"], "build.yaml"),
        (["demo"], "demo.yaml"),
    ],
)
def test_generate_and_demo_refuse_to_overwrite_without_force(tmp_path, capsys, command, name):
    """An existing build file or rule library: exit 2 naming it, the file and the folder left
    as they were (nothing generated)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / name).write_text(USER_TEXT, encoding="utf-8")
    assert run_inprocess(*command, str(dest), "--assets", "100") == 2
    err = capsys.readouterr().err
    assert f"{dest / name}: exists" in err and "--force" in err
    assert "Traceback" not in err
    assert (dest / name).read_text(encoding="utf-8") == USER_TEXT
    assert sorted(p.name for p in dest.iterdir()) == [name]


def test_force_replaces_them(tmp_path, capsys):
    """With --force the files are replaced by generated ones (generate and demo)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "build.yaml").write_text(USER_TEXT, encoding="utf-8")
    assert run_inprocess("generate", str(dest), "--assets", "100", "--force") == 0
    assert (dest / "build.yaml").read_text(encoding="utf-8") != USER_TEXT
    (dest / "demo.yaml").write_text(USER_TEXT, encoding="utf-8")
    code = run_inprocess("demo", str(dest), "--assets", "100", "--executor", "local", "--force")
    assert code == 0, capsys.readouterr().err[-2000:]
    assert (dest / "demo.yaml").read_text(encoding="utf-8") != USER_TEXT


# -- a build published with rule failures -------------------------------------------------------


def test_a_build_with_rule_failures_says_it_published_and_names_the_worst_rules(tmp_path, capsys):
    """Exit 1 is a published build that failed a gate, not a failed build: the last line says
    so and names the rules with the most severe, most numerous failures and their counts; the
    `report:` lines name the pages a person opens, not the caches kept beside them."""
    from stages.rules.report import WORST_RULES_SHOWN, failure_runs, worst_rules

    build = make_project(tmp_path, 100, 3, executor={"kind": "local"})
    assert run_inprocess("run", str(build)) == 1
    out, err = capsys.readouterr()
    assert "build failed" not in err
    (last,) = [line for line in err.splitlines() if "failed a gate" in line]
    assert last.startswith("built and published, but failed a gate: ")
    output = tmp_path / "build" / "out"
    failures = json.loads((output / "reports" / "validate.json").read_text())["failures"]
    gating = [f for f in failures if f["severity"] == "error"]
    assert f"{len(gating)} rule failure(s)" in last
    worst = worst_rules(failure_runs(gating))
    assert len(worst) > WORST_RULES_SHOWN  # the planted defects fail several rules
    shown = re.findall(r"([\w.-]+) \((\d+) (\w+)\)", last.partition("worst rules: ")[2])
    assert shown == [(w.rule, str(w.failures), w.severity) for w in worst[:WORST_RULES_SHOWN]]
    assert last.endswith(f" and {len(worst) - WORST_RULES_SHOWN} more")
    counts = [w.failures for w in worst]
    assert counts[:WORST_RULES_SHOWN] == sorted(counts, reverse=True)[:WORST_RULES_SHOWN]
    reports = [line.removeprefix("report: ") for line in out.splitlines() if "report: " in line]
    assert reports == [str(output / "reports" / "index.html")]


def test_worst_rules_orders_by_severity_then_count_then_rule_order():
    from stages.rules.report import failure_runs, worst_rules

    failures = [
        {"rule": "a", "severity": "warning"},
        {"rule": "a", "severity": "warning"},
        {"rule": "a", "severity": "warning"},
        {"rule": "b", "severity": "error"},
        {"rule": "c", "severity": "error"},
        {"rule": "c", "severity": "error"},
        {"rule": "d", "severity": "error"},
    ]
    assert [(w.rule, w.failures) for w in worst_rules(failure_runs(failures))] == [
        ("c", 2),
        ("b", 1),
        ("d", 1),
        ("a", 3),
    ]


# -- why ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> Path:
    return make_project(tmp_path_factory.mktemp("why") / "p", 100, 3, executor={"kind": "local"})


def test_why_a_name_the_project_does_not_have_exits_2_with_the_closest(generated, capsys):
    """No asset, path or reference by that name: exit 2, naming it and the closest names the
    project has (by name or path); a name it has still answers with exit 0."""
    assert run_inprocess("why", str(generated), "Characters/Hero_01/tex_hero_00001") == 2
    err = capsys.readouterr().err
    assert "no asset 'Characters/Hero_01/tex_hero_00001' in the project" in err
    closest = err.partition("closest: ")[2].strip().split(" | ")
    assert closest[0].startswith("Characters/Hero_01/tex_hero_00001")  # it contains the name
    assert all(name.startswith("Characters/Hero_01/") for name in closest)
    assert "Traceback" not in err
    asset_id = closest[0].split()[-1]
    assert run_inprocess("why", str(generated), asset_id) == 0
    assert capsys.readouterr().out.startswith(closest[0])
    assert run_inprocess("why", str(generated), "nothing-like-it-anywhere") == 2
    assert "nothing close" in capsys.readouterr().err


def test_why_a_missing_reference_still_answers(generated, capsys):
    """An id the project references but does not have is known (a missing reference): exit 0."""
    cooklist = json.loads(
        (generated.parent / "build" / "out" / "reports" / "cooklist.json").read_text()
    )
    missing = next(k for k, why in cooklist["missing"].items() if "no repository item" in why)
    assert run_inprocess("why", str(generated), missing) == 0
    assert capsys.readouterr().out.startswith(f"{missing}: missing: ")


def readme_example(command: str) -> tuple[list[str], str]:
    """The README's `$ orchestrate COMMAND …` line (its arguments) and the line shown after it."""
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()
    for n, line in enumerate(lines):
        if line.startswith(f"$ orchestrate {command} "):
            return shlex.split(line.removeprefix("$ orchestrate ")), lines[n + 1]
    raise AssertionError(f"README.md shows no `$ orchestrate {command}` example")


def test_the_readme_why_example_runs_as_written_on_the_demo_project(tmp_path, capsys, monkeypatch):
    """`orchestrate demo` into a folder, then the README's `why` line verbatim, there: the
    answer the README shows."""
    args, shown = readme_example("why")
    demo = tmp_path / "orchestrate-demo"
    assert run_inprocess("demo", str(demo), "--executor", "local") == 0
    capsys.readouterr()
    monkeypatch.chdir(demo)
    assert run_inprocess(*args) == 0
    assert capsys.readouterr().out == shown + "\n"


# -- where a command finds its build file --------------------------------------------------------


def test_commands_take_a_folder_or_nothing_for_the_build_file(generated, capsys, monkeypatch):
    """No argument: ./build.yaml; a folder: its build.yaml; the same answer as the file."""
    folder = generated.parent
    assert run_inprocess("cooklist", str(generated)) == 0
    by_file = capsys.readouterr().out
    assert run_inprocess("cooklist", str(folder)) == 0
    assert capsys.readouterr().out == by_file
    monkeypatch.chdir(folder)
    assert run_inprocess("cooklist") == 0
    assert capsys.readouterr().out == by_file
    asset = by_file.splitlines()[1].split()[0]
    assert run_inprocess("why", asset) == 0
    assert capsys.readouterr().out.startswith(asset)
    assert run_inprocess("run") == 1  # the planted rule failures
    assert "built and published" in capsys.readouterr().err
    assert run_inprocess("cache", "stats") == 0
    assert f"cache: {folder / 'build' / 'cache'}" in capsys.readouterr().out


def test_a_folder_without_a_build_file_is_refused_naming_it(tmp_path, capsys, monkeypatch):
    assert run_inprocess("run", str(tmp_path)) == 2
    assert f"{tmp_path / 'build.yaml'}: build file not found" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)
    assert run_inprocess("validate") == 2
    assert f"{tmp_path / 'build.yaml'}: build file not found" in capsys.readouterr().err
