"""The build file: validation errors name the file, the line and the key."""

from __future__ import annotations

import pytest

from orchestrator.config import load_build
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
