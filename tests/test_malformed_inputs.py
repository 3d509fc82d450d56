"""Hypothesis feeds malformed XML, rule files, build files, Unity YAML and `.meta` files, and Cocos
Creator `.meta` and serialized JSON files, to collect and validate: never exit 3, never a
traceback, and a file that does not parse is always named.

Each example mutates one file of a small clean project (truncations, deletions, random bytes,
tokens that XML, YAML and JSON parsers treat specially, encodings; for Cocos JSON also valid JSON
with values of odd types and ranges), runs `orchestrate run --stages validate` in this process,
and checks what the user sees: stderr and the validate report.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from cocos_projects import CocosProject, frame, texture
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from lxml import etree
from unity_projects import HEADER, build_settings, guid, material, prefab, write

from orchestrator.shell.cli import main
from stages.sources.cocos.meta import USER_FIELDS

TESTS = Path(__file__).resolve().parent
MESSIAH_BASE = TESTS / "data" / "bad" / "_base"
UNITY_RULES = TESTS.parent / "configs" / "rules" / "unity-common.yaml"
COCOS_RULES = TESTS.parent / "configs" / "rules" / "cocos-common.yaml"

#: Text that XML and YAML parsers read specially, spliced into files.
TOKENS = [
    b"<",
    b">",
    b"&",
    b"&amp",
    b"&undefined;",
    b"]]>",
    b"<![CDATA[",
    b"<!--",
    b"-->",
    b"<?xml ",
    b'<!DOCTYPE r [<!ENTITY e "x">]>',
    b'<!ENTITY % p SYSTEM "file:///etc/passwd">',
    b'<!DOCTYPE r SYSTEM "http://127.0.0.1:9/x.dtd">',
    b"\x00",
    b"\xff\xfe",
    b"\xef\xbb\xbf",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\r",
    b"\t",
    b"\n",
    b"---",
    b"...",
    b"%YAML 1.1\n",
    b"%TAG !u! tag:unity3d.com,2011:\n",
    b"--- !u!",
    b" stripped",
    b"*alias",
    b"&anchor ",
    b"!!python/object/apply:os.system ['true']",
    b"!!binary",
    b"<<: ",
    b"{",
    b"}",
    b"[",
    b"]",
    b": ",
    b"- ",
    b"? ",
    b"|",
    b">-",
    b"'",
    b'"',
    b"#",
    b"@",
    b"`",
    b"fileID: ",
    b"guid: ",
    b"0" * 32,
    b"9" * 400,
    b"-1",
    b"1e309",
    b"nan",
    b"null",
    b"~",
    b"true",
    b"\xe6\xa8\xa1\xe5\x9e\x8b",
]

EXAMPLES = int(os.environ.get("ORCHESTRATE_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=True,  # the same examples on every run: a failure in CI reproduces locally
)


@st.composite
def mutated(draw, original: bytes, tokens: list[bytes] = TOKENS) -> bytes:
    """`original` with one to three mutations (`tokens` are the special texts spliced in)."""
    data = original
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(data)))
        kind = draw(
            st.sampled_from(
                [
                    "truncate",
                    "delete",
                    "insert",
                    "token",
                    "replace",
                    "duplicate",
                    "flip",
                    "garbage",
                    "encode",
                ]
            )
        )
        if kind == "truncate":
            data = data[:at]
        elif kind == "delete":
            data = data[:at] + data[at + draw(st.integers(1, 40)) :]
        elif kind == "insert":
            data = data[:at] + draw(st.binary(min_size=1, max_size=24)) + data[at:]
        elif kind == "token":
            data = data[:at] + draw(st.sampled_from(tokens)) + data[at:]
        elif kind == "replace":
            text = draw(st.text(min_size=1, max_size=16)).encode("utf-8", "surrogatepass")
            data = data[:at] + text + data[at + len(text) :]
        elif kind == "duplicate":
            end = min(len(data), at + draw(st.integers(1, 200)))
            data = data[:end] + data[at:end] * draw(st.integers(1, 40)) + data[end:]
        elif kind == "flip" and data:
            i = min(at, len(data) - 1)
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1 :]
        elif kind == "garbage":
            data = draw(st.binary(max_size=200))
        elif kind == "encode":
            codec = draw(st.sampled_from(["utf-16", "utf-16-be", "latin-1", "gbk", "utf-32"]))
            data = data.decode("utf-8", "replace").encode(codec, "replace")
    return data


def run_validate(build: Path) -> tuple[int, str]:
    """`orchestrate run BUILD --stages validate` in this process: (exit code, stderr + report)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["run", str(build), "--stages", "validate"])
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    text = err.getvalue() + out.getvalue()
    report = build.parent / "build" / "out" / "reports" / "validate.json"
    if report.is_file():
        text += report.read_text(encoding="utf-8")
    return code, text


def xml_parses(data: bytes) -> bool:
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    try:
        etree.fromstring(data, parser)
    except etree.XMLSyntaxError:
        return False
    return True


def yaml_parses(data: bytes) -> bool:
    try:
        list(yaml.safe_load_all(data.decode("utf-8-sig")))
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return False
    return True


def check(case: Path, relpath: str, data: bytes, parses=None) -> tuple[int, str]:
    """Write the mutated file, run, and check what the user sees: an exit code of 0, 1 or 2, no
    traceback, and the file named when it was refused — the build stopped (exit 2), `parses`
    (what the product must read fully) finds it broken, or a rule in it is a rule error. (Exit 1
    alone may be a rule that now fails other files: those are named.)"""
    target = case / relpath
    target.write_bytes(data)
    code, text = run_validate(case / "build.yaml")
    assert code in (0, 1, 2), f"exit {code} for a malformed {relpath}\n{text[-3000:]}"
    assert "Traceback" not in text and "internal error" not in text, text[-3000:]
    named = relpath.removeprefix("project/") in text or str(target) in text
    rule_errors = '"rule_errors": []' not in text and relpath == "rules.yaml"
    if code == 2 or rule_errors or (parses is not None and not parses(data)):
        assert named, f"{relpath} is not named (exit {code})\n{text[-3000:]}"
    return code, text


@contextlib.contextmanager
def messiah_case():
    """A fresh copy of the clean Messiah project (builds with exit 0)."""
    folder = Path(tempfile.mkdtemp(prefix="orchestrate-fuzz-"))
    try:
        shutil.copytree(MESSIAH_BASE, folder / "case")
        yield folder / "case"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


MESSIAH_XML = [
    "project/Repo/resource.repository",
    "project/Repo/Props/11111111-1111-4111-8111-111111111111/resource.xml",
    "project/Repo/Props/22222222-2222-4222-8222-222222222222/texture.xml",
    "project/Repo/UI/33333333-3333-4333-8333-333333333333/resource.xml",
    "project/Worlds/Main.iworld",
    "project/Levels/Main.ilevel",
]


def test_the_clean_projects_pass():
    """The bases the mutations start from build with exit 0."""
    with messiah_case() as case:
        assert run_validate(case / "build.yaml")[0] == 0
    with unity_case() as case:
        code, text = run_validate(case / "build.yaml")
        assert code == 0, text[-3000:]
    with cocos_case() as case:
        code, text = run_validate(case / "build.yaml")
        assert code == 0, text[-3000:]
        assert '"rule_errors": []' in text and "collect.problem" not in text


@pytest.mark.slow
@pytest.mark.parametrize("relpath", MESSIAH_XML)
def test_malformed_messiah_xml(relpath):
    """Repositories, attribute files, worlds and levels, malformed."""

    @FUZZ
    @given(data=mutated((MESSIAH_BASE / relpath).read_bytes()))
    def fuzz(data):
        with messiah_case() as case:
            check(case, relpath, data, xml_parses)

    fuzz()


def _stays_inside(data: bytes, case: Path) -> bool:
    """A mutated build file that still parses must not send outputs out of the test folder or
    name a cluster (the build would then write there: that is not what this test is about)."""
    try:
        document = yaml.safe_load(data.decode("utf-8-sig"))
    except Exception:  # the product refuses it too
        return True
    if not isinstance(document, dict):
        return True
    for key in ("project", "output", "cache"):
        value = document.get(key)
        if isinstance(value, str):
            resolved = Path(os.path.normpath(case / os.path.expanduser(value)))
            if not resolved.is_relative_to(case):
                return False
    executor = document.get("executor")
    return not (isinstance(executor, dict) and set(executor) - {"kind"}) and "ray" not in str(
        executor
    )


@pytest.mark.slow
@pytest.mark.parametrize("which", ["build.yaml", "rules.yaml"])
def test_malformed_build_and_rule_files(which):
    """The build file and the rule file, malformed."""
    original = (MESSIAH_BASE / which).read_bytes()

    @FUZZ
    @given(data=mutated(original))
    def fuzz(data):
        with messiah_case() as case:
            assume(which != "build.yaml" or _stays_inside(data, case))
            check(case, which, data, yaml_parses)

    fuzz()


@st.composite
def rule_documents(draw) -> bytes:
    """Rule files that are valid YAML but anything but valid rules: odd types and values."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(),
        st.text(max_size=12),
        st.sampled_from(
            [
                "*,Name",
                "*/Items/Item,GUID",
                "[",
                "`",
                "artfunc_res_store.ilevels",
                "满足表达式",
                "func_x",
                "d.__class__",
                "(",
                "resource",
            ]
        ),
    )
    values = st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
        ),
        max_leaves=8,
    )
    fields = st.sampled_from(
        [
            "id",
            "name",
            "rpath",
            "xpath",
            "filter",
            "not_filter",
            "subxpath",
            "subfilter",
            "condition",
            "severity",
            "enabled",
            "not_rpath",
            "x",
        ]
    )
    rules = st.lists(st.dictionaries(fields, values, max_size=6), max_size=4)
    return yaml.safe_dump(draw(rules), allow_unicode=True).encode("utf-8")


@pytest.mark.slow
def test_rule_files_of_valid_yaml_and_wrong_shapes():
    """Rules of every shape: each is a rule error or works; the file is named when it is bad."""

    @FUZZ
    @given(data=rule_documents())
    def fuzz(data):
        with messiah_case() as case:
            code, text = check(case, "rules.yaml", data, yaml_parses)
            assert code in (0, 1)  # a YAML list of mappings never stops the build

    fuzz()


# -- Unity --------------------------------------------------------------------------------------


@contextlib.contextmanager
def unity_case():
    """A small clean Unity project: a scene, a prefab, a material and a texture, with .metas."""
    folder = Path(tempfile.mkdtemp(prefix="orchestrate-fuzz-unity-"))
    try:
        case = folder / "case"
        root = case / "project"
        write(
            root,
            "ProjectSettings/EditorBuildSettings.asset",
            build_settings(("Assets/Scenes/Main.unity", 10, True)),
        )
        write(
            root,
            "Assets/Scenes/Main.unity",
            HEADER
            + "--- !u!1 &1\nGameObject:\n  m_Name: camera\n"
            + f"--- !u!1001 &2\nPrefabInstance:\n  m_SourcePrefab: "
            f"{{fileID: 100100000, guid: {guid(20)}, type: 3}}\n",
            guid(10),
        )
        write(root, "Assets/Prefabs/Crate.prefab", prefab([("look", 30)]), guid(20))
        write(root, "Assets/Materials/Crate.mat", material(40), guid(30))
        write(root, "Assets/Textures/crate.png", b"\x89PNG\r\n\x1a\n", guid(40))
        shutil.copy(UNITY_RULES, case / "rules.yaml")
        (case / "build.yaml").write_text(
            yaml.safe_dump(
                {
                    "project": "project",
                    "source": "unity",
                    "rules": {"files": ["rules.yaml"]},
                    "executor": {"kind": "local"},
                }
            ),
            encoding="utf-8",
        )
        yield case
    finally:
        shutil.rmtree(folder, ignore_errors=True)


UNITY_FILES = [
    "project/Assets/Scenes/Main.unity",
    "project/Assets/Prefabs/Crate.prefab",
    "project/Assets/Materials/Crate.mat",
    "project/Assets/Materials/Crate.mat.meta",
    "project/Assets/Textures/crate.png.meta",
    "project/ProjectSettings/EditorBuildSettings.asset",
]


@pytest.mark.slow
@pytest.mark.parametrize("relpath", UNITY_FILES)
def test_malformed_unity_yaml_and_meta_files(relpath):
    """Scenes, prefabs, materials, build settings and .meta files, malformed."""
    with unity_case() as case:
        original = (case / relpath).read_bytes()

    @FUZZ
    @given(data=mutated(original))
    def fuzz(data):
        with unity_case() as case:
            # the reference scanner reads these leniently, as Unity does: only a failure must
            # name the file
            check(case, relpath, data)

    fuzz()


# -- Cocos Creator ------------------------------------------------------------------------------

#: Text that JSON parsers, and Creator's references, read specially, spliced into files.
JSON_TOKENS = [
    *TOKENS,
    b'"__uuid__": "',
    b'{"__uuid__": "x"}',
    b'"__uuid__": 7',
    b'"__id__": -1',
    b'"subMetas": []',
    b'"userData": null',
    b'"isBundle": true, "bundleName": "main"',
    b'"importer": "directory"',
    b"\\u0000",
    b"\\ud800",
    b'\\"',
    b"\\",
    b"1e999",
    b"18446744073709551616",
    b"-0",
    b"[" * 300,
    b"{" * 40,
    b",",
    b"NaN",
    b"Infinity",
    b"@",
    b"@f9941@",
    b"db://assets/",
    b"db://internal/",
]


@contextlib.contextmanager
def cocos_case():
    """A small clean Creator 3.x project: a bundle folder holding an image and an auto atlas
    folder, a scene and a prefab referencing their sprite frames, the render pipeline and
    physics material the project settings name, every folder with its meta."""
    folder = Path(tempfile.mkdtemp(prefix="orchestrate-fuzz-cocos-"))
    try:
        case = folder / "case"
        project = CocosProject(case / "project")
        project.folder("assets/ui", bundle="ui")
        hero = project.image("assets/ui/hero.png")
        project.folder("assets/ui/atlas")
        icon = project.image("assets/ui/atlas/icon.png")
        project.pac("assets/ui/atlas/auto.pac", maxWidth=1024, maxHeight=1024, padding=2)
        project.folder("assets/scenes")
        project.scene("assets/scenes/main.scene", [frame(hero), frame(icon)])
        project.folder("assets/prefabs")
        project.prefab("assets/prefabs/crate.prefab", [frame(hero), texture(icon)])
        project.folder("assets/pipeline")
        pipeline = project.serialized("assets/pipeline/forward.rpp", "render-pipeline")
        physics = project.serialized("assets/pipeline/default.pmtl", "physics-material")
        project.settings(
            {"general": {"renderPipeline": pipeline}, "physics": {"defaultMaterial": physics}}
        )
        shutil.copy(COCOS_RULES, case / "rules.yaml")
        (case / "build.yaml").write_text(
            yaml.safe_dump(
                {
                    "project": "project",
                    "source": "cocos",
                    "rules": {"files": ["rules.yaml"]},
                    "bundles": {"from_meta": True},
                    "executor": {"kind": "local"},
                }
            ),
            encoding="utf-8",
        )
        yield case
    finally:
        shutil.rmtree(folder, ignore_errors=True)


COCOS_METAS = [
    "project/assets/ui.meta",
    "project/assets/ui/hero.png.meta",
    "project/assets/ui/atlas/auto.pac.meta",
    "project/assets/scenes/main.scene.meta",
]
COCOS_SERIALIZED = [
    "project/assets/scenes/main.scene",
    "project/assets/prefabs/crate.prefab",
]


def json_parses(data: bytes) -> bool:
    """Whether `data` is one JSON document in UTF-8 (what Creator writes and reads back)."""
    try:
        json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("relpath", COCOS_METAS + COCOS_SERIALIZED)
def test_malformed_cocos_meta_and_serialized_files(relpath):
    """Folder, image, auto-atlas and scene metas, and scene and prefab JSON, malformed: a file
    that is not JSON is named (the spec: reported, and the build goes on without it)."""
    with cocos_case() as case:
        original = (case / relpath).read_bytes()

    @FUZZ
    @given(data=mutated(original, JSON_TOKENS))
    def fuzz(data):
        with cocos_case() as case:
            check(case, relpath, data, json_parses)

    fuzz()


#: Keys Creator writes in metas and serialized assets, and the `userData` keys the build reads.
COCOS_KEYS = sorted(
    {
        "ver",
        "importer",
        "imported",
        "uuid",
        "files",
        "subMetas",
        "userData",
        "name",
        "__type__",
        "__uuid__",
        "__id__",
        "_spriteFrame",
        "_name",
    }
    | USER_FIELDS
)


@st.composite
def reshaped_json(draw, original: bytes) -> bytes:
    """`original` (a JSON document) still valid JSON, with one to four keys of its objects (at
    any depth) given values of odd types, odd values (a number that is negative, zero or huge),
    or removed."""
    ids = [f"{n:08x}-0000-4000-8000-{n:012x}" for n in (2, 3, 4, 99)]
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-10, max_value=10),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(max_size=12),
        st.sampled_from(
            [
                *ids,
                *(f"{i}@f9941" for i in ids),
                *(f"{i}@6c48a" for i in ids),
                "@",
                "x@y@z",
                "",
                " ",
                "..",
                "../../outside",
                "/etc",
                "db://assets/ui/hero.png",
                "db://internal/nothing",
                "main",
                "internal",
                "resources",
                "directory",
                "image",
                "texture",
                "sprite-frame",
                "scene",
                "prefab",
                "auto-atlas",
                "sprite-atlas",
                "spine-data",
                "bitmap-font",
                "particle",
                "typescript",
                ".json",
                ".png",
                "cc.Sprite",
                "满足",
            ]
        ),
    )
    values = st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(st.sampled_from(COCOS_KEYS), inner, max_size=3)
        ),
        max_leaves=6,
    )
    odd_numbers = st.one_of(
        st.integers(min_value=-20, max_value=20), st.sampled_from([-(2**31), 2**31, 2**63 - 1])
    )
    document = json.loads(original)
    for _ in range(draw(st.integers(1, 4))):
        objects = list(_json_objects(document))
        if not objects:
            break
        target = draw(st.sampled_from(objects))
        own = sorted(target)
        key = draw(st.sampled_from(own if own and draw(st.booleans()) else COCOS_KEYS))
        before = target.get(key)
        choice = draw(st.integers(0, 5))
        if choice == 0:
            target.pop(key, None)
        elif choice <= 2 and isinstance(before, int) and not isinstance(before, bool):
            target[key] = draw(odd_numbers)  # the type Creator writes, a value it never does
        else:
            target[key] = draw(values)
    return json.dumps(document, ensure_ascii=False, indent=2).encode("utf-8")


def _json_objects(node):
    """Every JSON object in `node`, depth-first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _json_objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _json_objects(value)


@pytest.mark.slow
@pytest.mark.parametrize("relpath", COCOS_METAS + COCOS_SERIALIZED)
def test_cocos_files_of_valid_json_and_wrong_shapes(relpath):
    """Metas and serialized assets that are valid JSON with odd types and values (a uuid that is
    a number, `subMetas` a list, a negative atlas padding, a reference to nothing): each is a
    reported problem or works; never exit 3 or a traceback, and exit 2 names the file."""
    with cocos_case() as case:
        original = (case / relpath).read_bytes()

    @FUZZ
    @given(data=reshaped_json(original))
    def fuzz(data):
        with cocos_case() as case:
            check(case, relpath, data)

    fuzz()
