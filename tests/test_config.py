"""The build file: validation errors name the file, the line and the key."""

from __future__ import annotations

import pytest

from orchestrator.core.config import load_build
from orchestrator.errors import ConfigError


def write(tmp_path, text):
    (tmp_path / "project").mkdir(exist_ok=True)
    path = tmp_path / "build.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_fill_every_section(tmp_path):
    """A minimal build file gets the documented defaults, with paths relative to it."""
    build = load_build(write(tmp_path, "project: project\n"))
    assert build.section("archive") == {"compression": "zstd", "level": 3}
    assert build.section("rules")["fail_on"] == "error"
    assert build.output_dir == tmp_path / "build" / "out"
    assert build.project_root == tmp_path / "project"


def test_unknown_key_suggests_the_close_one(tmp_path):
    """A misspelt key is reported with its line and a 'did you mean'."""
    path = write(tmp_path, "project: project\ncook:\n  maps: []\n  alway_cook: [UI/]\n")
    with pytest.raises(ConfigError) as err:
        load_build(path)
    assert err.value.key == "cook.alway_cook"
    assert err.value.line == 4
    assert "did you mean 'always_cook'" in err.value.describe()
    assert str(path) in err.value.describe()


def test_wrong_type_names_the_key_and_line(tmp_path):
    """A value of the wrong type names its key, line and what was given."""
    path = write(tmp_path, "project: project\narchive:\n  compression: rar\n")
    with pytest.raises(ConfigError) as err:
        load_build(path)
    assert err.value.key == "archive.compression"
    assert err.value.line == 3
    assert "'rar'" in err.value.describe()


def test_missing_project_folder(tmp_path):
    """A project folder that does not exist is a config error on the `project` key."""
    path = tmp_path / "build.yaml"
    path.write_text("project: nowhere\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_build(path)
    assert err.value.key == "project" and err.value.line == 1


def test_required_project_key(tmp_path):
    """A build file without `project` says the key is required."""
    with pytest.raises(ConfigError, match="required key 'project'"):
        load_build(write(tmp_path, "platform: ios\n"))


def test_invalid_yaml_names_the_line(tmp_path):
    """YAML that does not parse is reported with its line."""
    with pytest.raises(ConfigError) as err:
        load_build(write(tmp_path, "project: project\ncook: [unclosed\n"))
    assert err.value.line is not None and "not valid YAML" in err.value.message


def test_layout_entry_errors_point_into_the_list(tmp_path):
    """An unknown key inside a layout entry names its list position."""
    path = write(
        tmp_path, "project: project\nbundles:\n  layout:\n    - name: ui\n      inclde: [a]\n"
    )
    with pytest.raises(ConfigError) as err:
        load_build(path)
    assert err.value.key == "bundles.layout.0.inclde"
    assert err.value.line == 5
    assert "did you mean 'include'" in err.value.message


def test_missing_rule_file(tmp_path):
    """A rule file named by the build file must exist."""
    with pytest.raises(ConfigError, match="rule file 'nope.yaml' not found"):
        load_build(write(tmp_path, "project: project\nrules:\n  files: [nope.yaml]\n"))


@pytest.mark.parametrize(
    "text,key,line,meant",
    [
        ("projekt: project\n", "projekt", 1, "project"),
        ("project: project\ncook:\n  mapz: []\n", "cook.mapz", 3, "maps"),
        (
            "project: project\nbundles:\n  layout:\n    - nmae: ui\n      include: [a]\n",
            "bundles.layout.0.nmae",
            4,
            "name",
        ),
        (
            "project: project\ncook:\n  cookers:\n    Texture: {comand: texconv}\n",
            "cook.cookers.Texture.comand",
            4,
            "command",
        ),
        ("project: project\nexecutor:\n  kindd: local\n", "executor.kindd", 3, "kind"),
        (
            "project: project\ncollect:\n  skip_brokn: true\n",
            "collect.skip_brokn",
            3,
            "skip_broken",
        ),
        ("project: project\nrules:\n  fail_onn: never\n", "rules.fail_onn", 3, "fail_on"),
        ("project: project\nhash:\n  append_hsh: true\n", "hash.append_hsh", 3, "append_hash"),
        ("project: project\nlink_xml:\n  assembli: A\n", "link_xml.assembli", 3, "assembly"),
    ],
)
def test_misspelt_key_is_named_even_when_it_leaves_a_required_key_missing(
    tmp_path, text, key, line, meant
):
    """Every section names a misspelt key with its suggestion, in one format, also when the
    misspelling leaves a required key missing (project, a layout entry's name, a cooker's
    command)."""
    with pytest.raises(ConfigError) as err:
        load_build(write(tmp_path, text))
    misspelt = key.rsplit(".", 1)[-1]
    assert err.value.message == f"unknown key '{misspelt}' (did you mean '{meant}'?)"
    assert err.value.key == key and err.value.line == line
    assert "required key" not in err.value.describe()


def test_unknown_key_with_nothing_close_lists_the_keys_of_its_section(tmp_path):
    """A key close to nothing lists the keys its section has (an external cooker's too)."""
    path = write(tmp_path, "project: project\ncook:\n  cookers:\n    Mesh: {zzz: 1}\n")
    with pytest.raises(ConfigError) as err:
        load_build(path)
    assert err.value.message == (
        "unknown key 'zzz' (expected one of: command, output_ext, timeout, version)"
    )
