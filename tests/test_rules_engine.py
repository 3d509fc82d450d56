"""The per-file engine: the flow of spec/rules.md on small projects written to disk."""

from __future__ import annotations

import struct
import sys
import threading
import zlib
from pathlib import Path

import pytest
from rules_helpers import REPOSITORY, failures_of, make_index, run_rules, write_files

from orchestrator.files.reads import Reader
from stages.rules import paths
from stages.rules.engine import Shared, check_file, prepare, validate_project
from stages.rules.naive import validate_per_rule
from stages.rules.report import public

G_MODEL = "7a0c3d5e-1b2f-4c6d-8e9f-0a1b2c3d4e5f"
G_MAT = "914fa3a0-62cd-4b5a-83df-92fdf494534a"
G_TRIM = "e081bf41-a561-4750-83af-78c80468bc6c"
MODEL_XML = (
    '<?xml version="1.0" encoding="utf-8"?>\n<Resource>\n  <ModelInfo><Root>\n'
    '    <Entity kind="static"><NumFaces>6000</NumFaces></Entity>\n'
    '    <Entity kind="dyn"><NumFaces>100</NumFaces></Entity>\n'
    "  </Root></ModelInfo>\n</Resource>\n"
)
MODEL_FILE = f"Repository/Characters/Hero/{G_MODEL}/resource.xml"


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "proj"
    write_files(
        root,
        {
            "Repository/resource.repository": REPOSITORY,
            MODEL_FILE: MODEL_XML,
            f"Repository/Test/{G_MAT}/resource.xml": "<Resource><A>1</A></Resource>",
        },
    )
    return root


@pytest.fixture
def index(project):
    return make_index(
        project,
        {
            G_MODEL: {"type": "Model", "file": MODEL_FILE},
            G_MAT: {"file": f"Repository/Test/{G_MAT}/resource.xml"},
            G_TRIM: {},
        },
    )


def rule(**fields) -> dict:
    base = {
        "id": "r",
        "rpath": r"resource\.repository$",
        "xpath": "*/Items/Item,GUID",
        "condition": ["exists"],
    }
    return {**base, **fields}


def test_subxpath_follows_guids_to_attribute_files(project, index):
    """filter guidToRealPath + subxpath check the attribute files, with via and lines."""
    doc = run_rules(
        project,
        [
            rule(
                xpath="*/Items/Item.Type==Model,GUID",
                filter="artfunc_res_filter.guidToRealPath",
                subxpath="*/ModelInfo/Root/Entity/NumFaces",
                condition=["<=", 5000],
            )
        ],
        index,
    )
    [failure] = doc["failures"]
    assert (failure["source"], failure["via"], failure["errors"], failure["lines"]) == (
        MODEL_FILE,
        "Repository/resource.repository",
        ["6000"],
        [4],
    )
    assert doc["sources_checked"] == 1


def test_subxpath_names_each_target_once_and_drops_non_files(project, index):
    """A target named twice by the same file is one source; values naming no file are dropped."""
    doc = run_rules(
        project,
        [
            rule(
                xpath="*/Items/Item,GUID",
                filter="artfunc_custom",
                subxpath="*/ModelInfo/Root/Entity,NumFaces",
                condition=["<", 50],
                func_str=(
                    "def custom(**kw):\n    return ["
                    + repr(MODEL_FILE)
                    + ", "
                    + repr("/elsewhere/x.xml")
                    + ", 'nope', "
                    + repr(str(project / MODEL_FILE))
                    + ", 5]\n"
                ),
            )
        ],
        index,
    )
    assert failures_of(doc) == [
        ("r", MODEL_FILE, "Repository/resource.repository", ["6000", "100"])
    ]
    assert doc["sources_checked"] == 1


def test_subxpath_attribute_checks_and_subfilter(project, index):
    """subxpath with attribute checks, then a regex subfilter, feed the condition."""
    doc = run_rules(
        project,
        [
            rule(
                xpath="*/Items/Item.Type==Model,GUID",
                filter="artfunc_res_filter.guidToResourcePath",
                subxpath="*/ModelInfo/Root/Entity[@kind==dyn],NumFaces",
                subfilter="^1",
                condition=[">", 500],
            )
        ],
        index,
    )
    assert failures_of(doc) == [("r", MODEL_FILE, "Repository/resource.repository", ["100"])]


def test_filter_and_not_filter_regexes(project, index):
    """filter keeps matching values, not_filter drops matching ones."""
    doc = run_rules(
        project,
        [
            rule(
                xpath="*/Items/Item,Deps",
                filter="^[0-9a-f]",
                not_filter="^1234",
                condition=["in", "artfunc_res_store.res_in_repo"],
            )
        ],
        index,
    )
    assert failures_of(doc) == [
        ("r", "Repository/resource.repository", None, ["9dc97d9a-64b5-49fb-acfa-c1704ebc2ef2"])
    ]


def test_malformed_xml_fails_every_rule_that_reaches_it(project, index):
    """A file that does not parse: one failure per rule, errors [], a message with file and line."""
    write_files(project, {"Repository/broken/resource.repository": "<a>\n<b>\n</a>\n"})
    doc = run_rules(project, [rule(id="one"), rule(id="two", condition=["not_empty"])], index)
    broken = [f for f in doc["failures"] if f["source"].startswith("Repository/broken")]
    assert [(f["rule"], f["errors"]) for f in broken] == [("one", []), ("two", [])]
    assert broken[0]["message"].startswith("Repository/broken/resource.repository:3:")


def test_undecodable_and_non_xml_files_are_parse_failures(project, index):
    """Content that does not decode, and a binary file an rpath selected, fail with a message."""
    write_files(
        project,
        {
            "bad/enc.xml": b'<?xml version="1.0" encoding="utf-8"?><a>\xff</a>',
            "bad/texture.data": b"\x00\x01binary",
        },
    )
    doc = run_rules(project, [rule(rpath="^.*/bad/", xpath="a")], index)
    assert [(f["source"], f["errors"]) for f in doc["failures"]] == [
        ("bad/enc.xml", []),
        ("bad/texture.data", []),
    ]
    assert all(f["message"] and ":1:" in f["message"] for f in doc["failures"])


def test_unparseable_subxpath_target_fails_with_via(project, index):
    """A subxpath target that does not parse fails that (source, via)."""
    (project / MODEL_FILE).write_text("<Resource>", encoding="utf-8")
    doc = run_rules(
        project,
        [
            rule(
                xpath="*/Items/Item.Type==Model,GUID",
                filter="artfunc_res_filter.guidToRealPath",
                subxpath="*/ModelInfo/Root/Entity/NumFaces",
                condition=["<=", 5000],
            )
        ],
        index,
    )
    [failure] = doc["failures"]
    assert failure["source"] == MODEL_FILE and failure["via"] == "Repository/resource.repository"
    assert failure["errors"] == [] and MODEL_FILE in failure["message"]


def test_file_is_parsed_once_per_unit(project, index, monkeypatch):
    """Many rules on one file, and two rules reaching the same target, parse each file once."""
    parsed: list[int] = []
    original = paths.parse_xml
    monkeypatch.setattr(paths, "parse_xml", lambda data, rel="": parsed.append(1) or original(data))
    sub = {
        "xpath": "*/Items/Item.Type==Model,GUID",
        "filter": "artfunc_res_filter.guidToRealPath",
        "subxpath": "*/ModelInfo/Root/Entity/NumFaces",
    }
    rules = [rule(id=f"r{i}", condition=["exists", i]) for i in range(5)]
    rules += [rule(id="s1", condition=["<=", 1], **sub), rule(id="s2", condition=[">", 1], **sub)]
    doc = run_rules(project, rules, index)
    assert len(parsed) == 2  # resource.repository and the model's resource.xml
    assert {f["rule"] for f in doc["failures"]} == {"s1"}


def test_naive_per_rule_run_gives_the_same_document(project, index, tmp_path):
    """validate_per_rule (one parse per rule and file) reports exactly what the engine does."""
    import yaml

    rules = [
        rule(id="a", condition=["unique"]),
        rule(id="b", xpath="*/Items/Item,Name", condition=["expr", "d.endswith('_mat')"]),
        rule(
            id="c",
            xpath="*/Items/Item.Type==Model,GUID",
            filter="artfunc_res_filter.guidToRealPath",
            subxpath="*/ModelInfo/Root/Entity/NumFaces",
            condition=["<=", 5000],
        ),
    ]
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    fast = public(validate_project(str(project), [path], index))
    slow = public(validate_per_rule(str(project), [path], index))
    assert fast == slow and fast["failures"]


def test_rpath_predefined_set_skips_paths_that_are_not_files(tmp_path):
    """rpath: artfunc_res_store.ilevels checks the listed levels that exist, nothing else."""
    root = write_files(
        tmp_path / "p",
        {
            "Levels/a.ilevel": f"<Level><Entities><Entity><Resource>{G_MAT}</Resource></Entity>"
            "</Entities></Level>",
            "Levels/unused.ilevel": "<Level/>",
        },
    )
    index = make_index(root, {}, ilevels=("Levels/a.ilevel", "Levels/gone.ilevel"))
    doc = run_rules(
        root,
        [
            rule(
                rpath="artfunc_res_filter.ALL_USED_FILTER",
                xpath="*/Entities/Entity,Resource",
                condition=["存在于", "artfunc_res_filter.ALL_RES"],
            )
        ],
        index,
    )
    assert failures_of(doc) == [("r", "Levels/a.ilevel", None, [G_MAT])]
    assert doc["sources_checked"] == 1


def test_not_rpath_excludes_files(project, index):
    """not_rpath removes the files it matches."""
    write_files(project, {"Other/resource.repository": REPOSITORY})
    doc = run_rules(project, [rule(not_rpath="^.*/Other/", condition=["not_exists"])], index)
    assert {f["source"] for f in doc["failures"]} == {"Repository/resource.repository"}


def test_get_resources_in_ilevel_and_valid_guid(tmp_path):
    """getResourcesInILevel collects GUID texts of levels (relative paths too); validGUID keeps GUIDs."""
    root = write_files(
        tmp_path / "p",
        {
            "Worlds/w.iworld": "<World><Levels><Level><Path>Levels/a.ilevel</Path></Level>"
            "<Level><Path>Levels/none.ilevel</Path></Level></Levels></World>",
            "Levels/a.ilevel": f"<Level><E><R>{G_MAT}</R><N>x</N><R>{G_MAT}</R><R>{G_TRIM}</R></E>"
            "</Level>",
        },
    )
    index = make_index(root, {G_MAT: {}})
    doc = run_rules(
        root,
        [
            rule(
                rpath=r"\.iworld$",
                xpath="*/Levels/Level,Path",
                filter="artfunc_res_filter.getResourcesInILevel",
                condition=["in", "artfunc_res_store.res_in_repo"],
            ),
            rule(
                id="v",
                rpath=r"\.ilevel$",
                xpath="*/E/*",
                filter="artfunc_res_filter.validGUID",
                condition=["unique"],
            ),
        ],
        index,
    )
    assert failures_of(doc) == [
        ("r", "Worlds/w.iworld", None, [G_TRIM]),
        ("v", "Levels/a.ilevel", None, [G_MAT]),
    ]


def test_dom_values_are_reported_as_tag_and_line(project, index):
    """{dom} failing values are written as "<Tag> line N"."""
    doc = run_rules(
        project, [rule(xpath="*/Items/Item.Type==Mesh,{dom}", condition=["not_exists"])], index
    )
    [failure] = doc["failures"]
    assert failure["errors"] == [f"<Item> line {failure['lines'][0]}"]


def test_records_are_reported_as_objects(project, index):
    """Multi-name extractions fail as objects."""
    doc = run_rules(
        project,
        [rule(xpath="*/Items/Item.Type==Model,Name,Deps", condition=["expr", "d['Name'] == []"])],
        index,
    )
    assert failures_of(doc)[0][3] == [{"Name": ["char_hero"], "Deps": [G_TRIM]}]


CUSTOM_1X = """
def check(**pdict):
    import res_filter
    bad = [d for d in pdict['data'] if d not in res_filter.ALL_RES_GUID]
    return len(bad) == 0, bad
"""
CUSTOM_20 = """
from res_store import res_in_disk
def check(**pdict):
    assert pdict['condition'][0] == 'func_check' and pdict['filepath'].endswith('.repository')
    return [d for d in pdict['data'] if d not in res_in_disk]
"""


@pytest.mark.parametrize("code", [CUSTOM_1X, CUSTOM_20])
def test_custom_conditions_1x_and_20(project, index, code):
    """Custom conditions in the 1.x (ok, list) and 2.0 list forms, importing the predefined sets."""
    doc = run_rules(project, [rule(condition=["func_check"], func_str=code)], index)
    assert failures_of(doc) == [
        (
            "r",
            "Repository/resource.repository",
            None,
            [G_TRIM, "e5ce0940-f689-404d-968f-775317804069"],
        )
    ]
    assert "res_store" not in sys.modules and "res_filter" not in sys.modules


def test_custom_functions_are_isolated_per_rule(project, index):
    """Two rules defining the same function name each use their own."""
    doc = run_rules(
        project,
        [
            rule(id="a", condition=["func_f"], func_str="def f(**kw):\n    return ['from a']\n"),
            rule(id="b", condition=["func_f"], func_str="def f(**kw):\n    return None\n"),
            rule(id="c", condition=["func_f"]),
        ],
        index,
    )
    assert failures_of(doc) == [("a", "Repository/resource.repository", None, ["from a"])]
    assert [e["rule"] for e in doc["rule_errors"]] == ["c"]


def test_custom_filter_misbehaving_fails_the_source(project, index):
    """A filter that raises or returns a non-list fails its source with errors [] and a message."""
    doc = run_rules(
        project,
        [
            rule(
                id="raises", filter="artfunc_f", func_str="def f(**kw):\n    raise KeyError('k')\n"
            ),
            rule(id="dict", filter="artfunc_f", func_str="def f(**kw):\n    return {}\n"),
            rule(
                id="fine", filter="artfunc_f", func_str="def f(data, filepath):\n    return data\n"
            ),
        ],
        index,
    )
    messages = {f["rule"]: (f["errors"], f["message"]) for f in doc["failures"]}
    assert set(messages) == {"raises", "dict"}
    assert messages["raises"][0] == [] and "KeyError" in messages["raises"][1]
    assert "dict" in messages["dict"][1]


def test_custom_condition_raising_fails_the_source_only(project, index):
    """A custom condition that raises fails its source; other rules run."""
    doc = run_rules(
        project,
        [
            rule(id="boom", condition=["func_f"], func_str="def f(**kw):\n    return 1 / 0\n"),
            rule(id="ok"),
        ],
        index,
    )
    [failure] = doc["failures"]
    assert failure["rule"] == "boom" and "ZeroDivisionError" in failure["message"]


def test_allow_custom_code_false_skips(project, index):
    """With custom code forbidden, rules with func_str are skipped and never run."""
    doc = run_rules(
        project,
        [rule(condition=["func_f"], func_str="raise SystemExit(1)\n")],
        index,
        allow_custom_code=False,
    )
    assert doc["skipped"] == [{"rule": "r", "reason": "rules.allow_custom_code is false"}]
    assert doc["failures"] == [] and doc["rules"] == 1


LOOP = "def f(**kw):\n    while True:\n        pass\n"


@pytest.mark.parametrize("field", ["condition", "filter"])
def test_custom_code_timeout_on_main_thread(project, index, field):
    """A custom function that runs too long is stopped; the source fails with a message."""
    fields = {"condition": ["func_f"]} if field == "condition" else {"filter": "artfunc_f"}
    doc = run_rules(project, [rule(func_str=LOOP, **fields)], index, timeout=0.3)
    [failure] = doc["failures"]
    assert failure["errors"] == [] and "timed out" in failure["message"]


def test_expression_timeout(project, index):
    """A 满足表达式 that loops too long is stopped too."""
    endless = "not any(False for a in d for b in d for c in d for e in d for f in d for g in d)"
    doc = run_rules(project, [rule(condition=["expr", endless])], index, timeout=0.3)
    assert "timed out" in doc["failures"][0]["message"]


def test_custom_code_timeout_off_the_main_thread(project, index, tmp_path):
    """Off the main thread (executor threads) the deadline is enforced by a trace function."""
    import yaml

    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump([rule(condition=["func_f"], func_str=LOOP)]), encoding="utf-8")
    ruleset, shared = prepare(str(project), [path], index, timeout=0.3)
    out = {}

    def work():
        out["result"] = check_file(
            "Repository/resource.repository", ruleset.rules, shared, Reader(str(project))
        )

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    [outcome] = out["result"]
    assert "timed out" in outcome.failures[0].message


def test_func_str_timeout_at_load_is_a_rule_error(project, index):
    """func_str whose top level never ends is a rule error, found at load."""
    doc = run_rules(project, [rule(func_str="while True:\n    pass\n")], index, timeout=0.3)
    assert "timed out" in doc["rule_errors"][0]["message"]


def test_worker_compiles_custom_code_lazily(project, index, tmp_path):
    """Rules shipped to a fresh process run their func_str in a new custom-code worker on first
    use."""
    import pickle

    import yaml

    from stages.rules.custom.host import close_workers

    path = tmp_path / "c.yaml"
    path.write_text(
        yaml.safe_dump([rule(condition=["func_f"], func_str="def f(**kw):\n    return ['x']\n")])
    )
    ruleset, shared = prepare(str(project), [path], index)
    shipped = pickle.loads(pickle.dumps(shared))
    close_workers()  # as in a new process: its workers have seen neither index nor code
    [outcome] = check_file(
        "Repository/resource.repository", list(shipped.rules), shipped, Reader(str(project))
    )
    assert outcome.failures[0].errors == ("x",)


def test_chinese_paths_and_values(tmp_path):
    """Chinese folder names, tags and values flow through rpath, xpath and the report."""
    root = write_files(tmp_path / "项目", {"模型/角色.xml": "<根><名字>英雄</名字></根>"})
    doc = run_rules(
        root,
        [rule(rpath="模型/.*\\.xml$", xpath="根,名字", condition=["!=", "英雄"])],
        make_index(root),
    )
    assert failures_of(doc) == [("r", "模型/角色.xml", None, ["英雄"])]


# -- built-in checks -----------------------------------------------------------------------------


def png(width: int, height: int) -> bytes:
    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + struct.pack(">I", 13)
        + b"IHDR"
        + header
        + struct.pack(">I", zlib.crc32(b"IHDR" + header))
    )


def tga(width: int, height: int) -> bytes:
    return bytes(12) + struct.pack("<HH", width, height) + bytes([32, 0])


def texture(width: int, height: int, compressed: int = 1) -> str:
    return (
        f"<Texture><Width>{width}</Width><Height>{height}</Height>"
        f"<Compressed>{compressed}</Compressed></Texture>"
    )


@pytest.fixture
def textures(tmp_path):
    g = [f"00000000-0000-4000-8000-00000000000{i}" for i in range(4)]
    root = write_files(
        tmp_path / "t",
        {
            f"R/{g[0]}/texture.xml": texture(64, 64),
            f"R/{g[0]}/source.png": png(64, 64),
            f"R/{g[1]}/texture.xml": texture(64, 64),
            f"R/{g[1]}/source.tga": tga(128, 64),
            f"R/{g[2]}/texture.xml": texture(32, 32, 0),
            f"R/{g[2]}/source_a.png": png(16, 16),
            f"R/{g[2]}/source_b.png": png(32, 32),
            f"R/{g[3]}/texture.xml": texture(8, 8),
            f"R/{g[3]}/source.tga": b"short",
            "Loose/texture.xml": texture(10, 10),
            "Loose/source.png": png(10, 12),
            "R/list.xml": "<L>" + "".join(f"<G>{x}</G>" for x in g) + "<G>ffffffff-0000-4000-8000-"
            "000000000000</G></L>",
        },
    )
    sources = ["source.png", "source.tga", "source_a.png", "source.tga"]
    index = make_index(
        root,
        {
            x: {"type": "Texture", "file": f"R/{x}/texture.xml", "source": f"R/{x}/{name}"}
            for x, name in zip(g, sources)
        },
    )
    return root, index, g


def test_src_tex_conflict_by_guid_png_and_tga(textures):
    """srcTexConflict compares texture.xml sizes with PNG/TGA headers (first source* file)."""
    root, index, g = textures
    doc = run_rules(
        root,
        [rule(rpath="list.xml$", xpath="L/G", condition=["messiah_condfunc.srcTexConflict"])],
        index,
    )
    assert failures_of(doc)[0][3] == [g[1], g[2]]


def test_src_tex_conflict_value_falls_back_to_source_file(textures):
    """A value that is neither a GUID nor a file stands for the source file itself (a texture
    outside the index finds its source image by listing its folder)."""
    root, index, g = textures
    doc = run_rules(
        root,
        [
            rule(
                rpath="texture.xml$", xpath="Texture,Width", condition=["g83_runner.srcTexConflict"]
            )
        ],
        index,
    )
    assert [(f["source"], f["errors"]) for f in doc["failures"]] == [
        ("Loose/texture.xml", ["10"]),
        (f"R/{g[1]}/texture.xml", ["64"]),
        (f"R/{g[2]}/texture.xml", ["32"]),
    ]


def test_compressed_src_tex_and_rigidbody_deps(textures):
    """compressed_src_tex fails uncompressed textures; rigidbody_deps fails GUIDs not on disk."""
    root, index, g = textures
    doc = run_rules(
        root,
        [
            rule(id="c", rpath="list.xml$", xpath="L/G", condition=["condfunc.compressed_src_tex"]),
            rule(id="p", rpath="list.xml$", xpath="L/G", condition=["func_rigidbody_deps"]),
        ],
        index,
    )
    assert failures_of(doc) == [
        ("c", "R/list.xml", None, [g[2]]),
        ("p", "R/list.xml", None, ["ffffffff-0000-4000-8000-000000000000"]),
    ]


def test_checks_resolve_without_entry_points(monkeypatch):
    """The shipped checks are found even when the package's entry points are not installed."""
    from stages.rules import registry

    registry.available_checks.cache_clear()
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    try:
        assert set(registry.available_checks()) >= {
            "srcTexConflict",
            "rigidbody_deps",
            "compressed_src_tex",
        }
    finally:
        registry.available_checks.cache_clear()


def test_shared_pickles_with_the_index(project, index, tmp_path):
    """The plan's shared value (rules + index) pickles, for Ray."""
    import pickle

    import yaml

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump([rule()]))
    _, shared = prepare(str(project), [path], index)
    assert isinstance(pickle.loads(pickle.dumps(shared)), Shared)


def test_missing_input_on_a_remote_worker_propagates(project, index, tmp_path):
    """A subxpath target a worker lacks raises MissingInput (the executor resends the unit)."""
    import yaml

    from orchestrator.errors import MissingInput

    path = tmp_path / "m.yaml"
    path.write_text(
        yaml.safe_dump(
            [
                rule(
                    xpath="*/Items/Item.Type==Model,GUID",
                    filter="artfunc_res_filter.guidToRealPath",
                    subxpath="*/ModelInfo/Root/Entity/NumFaces",
                    condition=["<=", 5000],
                ),
                rule(id="t", condition=["condfunc.srcTexConflict"]),
            ]
        )
    )
    ruleset, shared = prepare(str(project), [path], index)
    repository = (project / "Repository/resource.repository").read_bytes()
    reader = Reader(
        str(project), preloaded={"Repository/resource.repository": repository}, disk=False
    )
    with pytest.raises(MissingInput) as caught:
        check_file("Repository/resource.repository", ruleset.rules, shared, reader)
    # the first file the unit looks for and was not sent: a subxpath target, or a value the
    # built-in check looks up as a path
    assert caught.value.relpath in (
        MODEL_FILE,
        f"Repository/Test/{G_MAT}/resource.xml",
        "e081bf41-a561-4750-83af-78c80468bc6c",
    )
    with pytest.raises(MissingInput):
        check_file("Repository/resource.repository", ruleset.rules[1:], shared, reader)


class LinesLanguage:
    """A toy plug-in language: `line:WORD` extracts the lines of a .txt file containing WORD."""

    name = "lines"
    suffixes = (".txt",)

    def parse(self, data, relpath):
        if data.startswith(b"\xff"):
            error = ValueError("binary data")
            error.line = 1
            raise error
        return data.decode("utf-8").splitlines()

    def compile(self, expr):
        if not expr.startswith("line:"):
            raise ValueError("expected line:WORD")
        return expr[len("line:") :]

    def evaluate(self, query, document):
        hits = [(text, n) for n, text in enumerate(document, 1) if query in text]
        return [t for t, _ in hits], [n for _, n in hits]


def test_registered_path_language_handles_its_files(tmp_path, monkeypatch):
    """A plug-in language parses its files and evaluates expressions XML would reject."""
    from stages.rules import registry

    monkeypatch.setattr(
        registry, "path_languages", lambda: {"xml": registry.XML, "lines": LinesLanguage()}
    )
    root = write_files(
        tmp_path / "p",
        {"a.txt": "keep\nbad word\nbad wolf\n", "b.txt": b"\xff\x00", "c.xml": "<r/>"},
    )
    doc = run_rules(
        root,
        [rule(rpath=r"\.(txt|xml)$", xpath="line:bad w", condition=["not_exists"])],
        make_index(root),
    )
    got = [(f["source"], f["errors"], f["lines"], f["message"]) for f in doc["failures"]]
    assert got[0] == ("a.txt", ["bad word", "bad wolf"], [2, 3], None)
    assert got[1][0] == "b.txt" and got[1][3].startswith("b.txt:1: cannot parse as lines")
    assert got[2][0] == "c.xml" and "not valid for XML files" in got[2][3]
    bad = run_rules(root, [rule(xpath="nothing-accepts-this.")], make_index(root))
    assert bad["rule_errors"][0]["message"].startswith("p_rules.yaml:1: xpath:")


def test_a_unit_of_files_gives_one_outcome_per_rule_and_the_same_document(project, index, tmp_path):
    """check_files gives one outcome per rule digest for a unit's files, building the document
    their per-file outcomes build; its pairs are plain lists (stored as msgpack arrays)."""
    import yaml

    from orchestrator import codec
    from stages.rules.engine import check_files
    from stages.rules.report import build_document

    path = tmp_path / "rules.yaml"
    rules = [
        rule(id="names", xpath="*/Items/Item,Name", condition=["唯一"]),
        rule(id="types", xpath="*/Items/Item,Type", condition=["==", "Texture"]),
        rule(
            id="faces",
            xpath="*/Items/Item.Type==Model,GUID",
            filter="artfunc_res_filter.guidToRealPath",
            subxpath="*/ModelInfo/Root/Entity/NumFaces",
            condition=["<=", 5000],
        ),
    ]
    path.write_text(yaml.safe_dump(rules, allow_unicode=True), encoding="utf-8")
    ruleset, shared = prepare(str(project), [path], index)
    files = ["Repository/resource.repository", MODEL_FILE]
    per_file = [check_file(f, list(ruleset.rules), shared, Reader(str(project))) for f in files]
    merged = check_files([(f, list(ruleset.rules)) for f in files], shared, Reader(str(project)))
    assert len(merged) == len({outcome.digest for outcome in merged}) == 3
    assert build_document(ruleset, [merged]) == build_document(ruleset, per_file)
    assert build_document(ruleset, [codec.loads(codec.dumps(merged))]) == build_document(
        ruleset, per_file
    )
    assert all(isinstance(pair, list) for outcome in merged for pair in outcome.checked)
    assert any(outcome.failures for outcome in merged)
