"""The predefined functions as custom code calls them: `import res_filter` gives the four."""

from __future__ import annotations

import pickle
from pathlib import Path
from unittest import mock

import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st
from rules_helpers import REPOSITORY, failures_of, make_index, run_rules, write_files
from test_index_patching import GUIDS, RESOURCES, stored_form

from orchestrator import Keyed
from orchestrator.files.reads import Reader
from stages.rules import functions
from stages.rules.engine import check_file, prepare
from stages.rules.functions import IndexView, StoredIndex
from stages.sources.base import member_rooting
from stages.sources.messiah.index import MessiahIndex

G_MODEL = "7a0c3d5e-1b2f-4c6d-8e9f-0a1b2c3d4e5f"
G_MAT = "914fa3a0-62cd-4b5a-83df-92fdf494534a"
G_TRIM = "e081bf41-a561-4750-83af-78c80468bc6c"
MODEL_FILE = f"Repository/Characters/Hero/{G_MODEL}/resource.xml"
LEVEL = "Levels/a.ilevel"

# The seed's model face budget, written the ArtEase 1.x way: the filter is custom code that
# imports res_filter and calls its function.
FACE_BUDGET_BY_CUSTOM_FILTER = """
def model_files(**pdict):
    import res_filter
    return res_filter.guidToRealPath(data=pdict['data'], filepath=pdict['filepath'])
"""
ALL_FOUR = """
import res_filter

def check(data, filepath, condition):
    placed = res_filter.getResourcesInILevel(data=data, filepath=filepath)
    guids = res_filter.validGUID(data=placed + ['not-a-guid'], filepath=filepath)
    files = res_filter.guidToResourcePath(data=guids, filepath=filepath)
    known = {path.rsplit('/', 2)[-2] for path in files}
    return [guid for guid in guids if guid not in known]
"""


def project(tmp_path):
    return write_files(
        tmp_path / "p",
        {
            "Repository/resource.repository": REPOSITORY,
            MODEL_FILE: "<Resource><ModelInfo><Root><Entity><NumFaces>6000</NumFaces></Entity>"
            "</Root></ModelInfo></Resource>",
            f"Repository/Test/{G_MAT}/resource.xml": "<Resource/>",
            "Worlds/w.iworld": f"<World><Levels><Level><Path>{LEVEL}</Path></Level></Levels></World>",
            LEVEL: f"<Level><E><R>{G_MAT}</R><R>{G_TRIM}</R></E></Level>",
        },
    )


def index_of(root):
    return make_index(
        root,
        {
            G_MODEL: {"type": "Model", "file": MODEL_FILE},
            G_MAT: {"file": f"Repository/Test/{G_MAT}/resource.xml"},
            G_TRIM: {},
        },
        ilevels=(LEVEL,),
    )


def test_custom_filter_calls_guid_to_real_path_like_the_predefined_filter(tmp_path):
    """`res_filter.guidToRealPath(data=..., filepath=...)` in custom code gives what
    `filter: artfunc_res_filter.guidToRealPath` gives."""
    root = project(tmp_path)
    budget = {
        "rpath": r"resource\.repository$",
        "xpath": "*/Items/Item.Type==Model,GUID",
        "subxpath": "*/ModelInfo/Root/Entity/NumFaces",
        "condition": ["<=", 5000],
    }
    doc = run_rules(
        root,
        [
            {**budget, "id": "custom", "filter": "artfunc_model_files"}
            | {"func_str": FACE_BUDGET_BY_CUSTOM_FILTER},
            {**budget, "id": "predefined", "filter": "artfunc_res_filter.guidToRealPath"},
        ],
        index_of(root),
    )
    expected = (MODEL_FILE, "Repository/resource.repository", ["6000"])
    assert [(f[1], f[2], f[3]) for f in failures_of(doc, "custom")] == [expected]
    assert [(f[1], f[2], f[3]) for f in failures_of(doc, "predefined")] == [expected]
    assert doc["rule_errors"] == []


def test_custom_condition_calls_all_four_functions(tmp_path):
    """getResourcesInILevel, validGUID and guidToResourcePath from `import res_filter`: the
    placed GUID without a resource folder fails."""
    root = project(tmp_path)
    doc = run_rules(
        root,
        [
            {
                "id": "placed-have-files",
                "rpath": r"\.iworld$",
                "xpath": "*/Levels/Level,Path",
                "condition": ["func_check"],
                "func_str": ALL_FOUR,
            }
        ],
        index_of(root),
    )
    assert doc["rule_errors"] == []
    assert failures_of(doc) == [("placed-have-files", "Worlds/w.iworld", None, [G_TRIM])]


def test_expressions_see_the_functions_too(tmp_path):
    """`满足表达式` expressions use the same res_filter, functions included."""
    root = project(tmp_path)
    doc = run_rules(
        root,
        [
            {
                "id": "valid",
                "rpath": r"\.ilevel$",
                "xpath": "*/E/*",
                "condition": ["满足表达式", "res_filter.validGUID(data=[d]) == [d] and d != ''"],
            }
        ],
        index_of(root),
    )
    assert doc["rule_errors"] == [] and doc["failures"] == []


def test_files_custom_code_reads_through_res_filter_are_the_units_reads(tmp_path):
    """A level that custom code reads with getResourcesInILevel enters the unit's trace, so
    editing it invalidates the cached result."""
    root = project(tmp_path)
    rule_file = tmp_path / "rules.yaml"
    rule_file.write_text(
        yaml.safe_dump(
            [
                {
                    "id": "placed-have-files",
                    "rpath": r"\.iworld$",
                    "xpath": "*/Levels/Level,Path",
                    "condition": ["func_check"],
                    "func_str": ALL_FOUR,
                }
            ]
        ),
        encoding="utf-8",
    )
    ruleset, shared = prepare(str(root), [rule_file], index_of(root))
    reader = Reader(str(root))
    check_file("Worlds/w.iworld", list(ruleset.rules), shared, reader)
    assert LEVEL in reader.reads and reader.reads[LEVEL] is not None


def test_a_stored_index_is_read_only_when_a_rule_reads_it(tmp_path):
    """Its digest and shape come without reading it; an attribute reads it once; a worker that
    unpickles it gets the index itself."""
    index = make_index(tmp_path, {G_MAT: {"file": "Repo/a/resource.xml"}})
    loads: list[int] = []

    def load():
        loads.append(1)
        return index

    stored = StoredIndex(load, "d1", available=True)
    view = IndexView(stored, tmp_path.as_posix())
    assert stored.digest() == "d1" and view.available and loads == []
    assert G_MAT in view.container("res_store.res_in_repo") and loads == [1]
    assert view.resource_files(G_MAT) and loads == [1]
    assert pickle.loads(pickle.dumps(stored)) == index


def test_the_used_levels_come_from_their_entry_without_decoding_the_index(tmp_path):
    """An index stored by entry answers the set of used levels (what `rpath:
    artfunc_res_store.ilevels` selects by) from the entries holding them and the root, rooted
    as the decoded index roots them; the rest of it is not decoded."""
    root = tmp_path.as_posix()
    for index in (
        MessiahIndex(root="", ilevels=frozenset({LEVEL, "Levels/b.ilevel"})),  # as stored
        make_index(tmp_path, {G_MAT: {"file": "Repo/a/resource.xml"}}, ilevels=(LEVEL,)),
    ):
        loads: list[int] = []

        def load(index=index, loads=loads):
            loads.append(1)
            return index

        entries = Keyed("index", memory=index.entries())
        stored = StoredIndex(load, "d1", available=True, entries=entries)
        view = IndexView(stored, root)
        expected = IndexView(index, root).container("res_store.ilevels")
        assert view.container("res_store.ilevels") == expected
        assert view.container("res_filter.ALL_USED_ILEVEL") == expected and loads == []
        assert f"{root}/{LEVEL}" in expected
        assert view.container("res_store.res_in_repo") == index.res_in_repo
        assert loads == [1]  # a set keyed by GUID is read from the index decoded


@settings(max_examples=60, deadline=None)
@given(
    resources=RESOURCES,
    stored=st.booleans(),
    looked=st.lists(st.sampled_from([*GUIDS, "Q/a", "P/b", "nope", 3]), max_size=12),
    whole=st.booleans(),
)
@example(resources={}, stored=False, looked=GUIDS[:5], whole=False)  # at the limit exactly
def test_sets_read_entry_by_entry_are_those_of_the_index_decoded(resources, stored, looked, whole):
    """An index stored by entry, read by a unit that looks keys up, answers each lookup (found
    or not, members rooted) as the index decoded and rooted whole does, without decoding it;
    reading a set whole, or more keys than LOOKUPS_MAX, decodes it once, and it answers the
    same from then on. As stored (root "", paths relative) or made with absolute paths."""
    index = stored_form(resources, set()) if stored else make_index(Path("/p"), resources)
    loads: list[int] = []

    def load():
        loads.append(1)
        return index

    entries = Keyed("index", memory=index.entries())
    view = IndexView(StoredIndex(load, "d", True, entries=entries, rooting=member_rooting), "/r")
    rooted = index.at("/r")
    with mock.patch.object(functions, "LOOKUPS_MAX", 5):
        for attribute in ("res_in_repo", "res_in_disk", "res_virt_info"):
            members, expected = view.members(attribute), getattr(rooted, attribute)
            for key in looked:
                assert (key in members) == (key in expected)
                assert members.get(key) == expected.get(key)
            if whole:
                assert dict(members) == expected and len(members) == len(expected)
    many = len({key for key in looked if isinstance(key, str)}) > 5
    assert loads == ([1] if whole or many else [])
