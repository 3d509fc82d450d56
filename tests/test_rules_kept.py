"""The last large file parsed, kept for the driver's next unit (stages/rules/kept.py)."""

from __future__ import annotations

import pytest
import yaml
from rules_helpers import make_index, write_files

from orchestrator.files.reads import Reader
from stages.rules import registry
from stages.rules.engine import check_files, prepare
from stages.rules.kept import KEEP_MIN_BYTES, KEPT, KeptDocuments
from stages.sources.base import index_entries

REPOSITORY = "Repository/resource.repository"


def repository(count: int, kind: str = "Mesh") -> str:
    items = "\n".join(
        f"<Item><Type>{kind}</Type><Name>n{i}</Name><Pad>{'p' * 60}</Pad></Item>"
        for i in range(count)
    )
    return f"<Repository><Items>{items}</Items></Repository>"


@pytest.fixture
def parses(monkeypatch):
    """Paths the XML language parsed, in order."""
    seen: list[str] = []
    real = registry.XmlLanguage.parse

    def counting(self, data, relpath):
        seen.append(relpath)
        return real(self, data, relpath)

    monkeypatch.setattr(registry.XmlLanguage, "parse", counting)
    return seen


@pytest.fixture
def keeping():
    KEPT.start()
    yield KEPT
    KEPT.stop()


def test_a_document_is_kept_only_for_its_path_and_digest():
    """What is kept answers for the same file with the same bytes only; small files, and any
    file while keeping is off, are not kept."""
    kept = KeptDocuments()
    kept.offer("/p/a", "d1", KEEP_MIN_BYTES, "xml", "doc")
    assert kept.get("/p/a", "d1") is None  # off
    kept.start()
    kept.offer("/p/a", "d1", KEEP_MIN_BYTES - 1, "xml", "doc")
    assert kept.get("/p/a", "d1") is None  # small
    kept.offer("/p/a", "d1", KEEP_MIN_BYTES, "xml", "doc")
    assert kept.get("/p/a", "d1") == ("xml", "doc")
    assert kept.get("/p/a", "d2") is None and kept.get("/p/b", "d1") is None
    assert kept.get("/p/a", None) is None
    kept.offer("/p/b", "d3", KEEP_MIN_BYTES, "xml", "other")
    assert kept.get("/p/a", "d1") is None  # one document at most
    kept.stop()
    assert kept.get("/p/b", "d3") is None


def test_parts_of_a_file_share_one_parse_and_an_edit_is_parsed_again(tmp_path, parses, keeping):
    """Consecutive units on one large file parse it once, each still reading (tracing) it; once
    its bytes change it is parsed again and checked as it now is."""
    root = write_files(tmp_path / "p", {REPOSITORY: repository(3000)})
    assert (root / REPOSITORY).stat().st_size >= KEEP_MIN_BYTES
    rules = [
        {
            "id": "types",
            "rpath": "repository$",
            "xpath": "*/Items/Item,Type",
            "condition": ["==", "Mesh"],
        },
        {
            "id": "names",
            "rpath": "repository$",
            "xpath": "*/Items/Item,Name",
            "condition": ["唯一"],
        },
    ]
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(yaml.safe_dump(rules), encoding="utf-8")
    ruleset, shared = prepare(str(root), [rule_file], make_index(root))
    first, second = ruleset.rules
    readers = [Reader(str(root)) for _ in range(3)]
    one = check_files([(REPOSITORY, [first])], shared, readers[0])
    two = check_files([(REPOSITORY, [second])], shared, readers[1])
    assert parses == [REPOSITORY]
    assert readers[1].reads[REPOSITORY] == readers[0].reads[REPOSITORY]
    assert not one[0].failures and not two[0].failures

    (root / REPOSITORY).write_text(repository(3000, kind="Sound"), encoding="utf-8")
    [edited] = check_files([(REPOSITORY, [first])], shared, readers[2])
    assert parses == [REPOSITORY, REPOSITORY]
    assert len(edited.failures[0].errors) == 3000


def test_the_validate_stage_keeps_nothing_once_finished(tmp_path, parses):
    """The stage's parts share the parse while the driver runs them, and nothing stays kept."""
    from orchestrator.testing import run_stage
    from stages import validate

    root = write_files(tmp_path / "p", {REPOSITORY: repository(9000)})
    rules = [
        {
            "id": f"{tag}-{method}",
            "rpath": "repository$",
            "xpath": f"*/Items/Item,{tag}",
            "condition": [method],
        }
        for tag in ("Type", "Name", "Pad")
        for method in ("not_empty", "exists", "unique")
    ]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    run = run_stage(
        validate,
        project=root,
        inputs={"assets": {}, "index": index_entries(make_index(root)), "cooklist": None},
        workdir=tmp_path,
        settings={"rules": {"files": ["rules.yaml"]}},
        publish=False,
    )
    assert len(run.plan.units) > 1
    assert parses == [REPOSITORY]
    assert run.outputs["validation"]["sources_checked"] == 9
    assert not KEPT.on and KEPT.get(str(root / REPOSITORY), None) is None
