"""The Messiah source: the typed index, assets and references, parse units, errors."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from messiah_projects import Item, guid, write, write_level, write_repository, write_world  # noqa: E402

from orchestrator.errors import ConfigError, ProjectError  # noqa: E402
from orchestrator.files.reads import Reader  # noqa: E402
from stages import collect  # noqa: E402
from stages.sources import get_source  # noqa: E402
from stages.sources.base import HARD, SOFT  # noqa: E402
from stages.sources.messiah.reader import SOURCE, build_index, collect_project, walk_project  # noqa: E402


def posix(path: Path) -> str:
    return str(path).replace("\\", "/")


def test_registry_returns_the_messiah_source_and_rejects_unknown_names():
    """`get_source` maps "messiah" to the package's SOURCE (which reads like reader.py's, and
    patches: patching.py) and refuses a name nobody registered."""
    from stages.sources import messiah

    assert get_source("messiah") is messiah.SOURCE and isinstance(messiah.SOURCE, type(SOURCE))
    with pytest.raises(ConfigError):
        get_source("no_such_engine")


def test_index_orders_duplicates_by_repository_path_and_types_files(tmp_path):
    """A GUID in two repositories maps to both items (sorted repository order) and both folders."""
    shared = guid(1)
    write_repository(
        tmp_path,
        "Repository",
        [Item(shared, "Tex", "Art", type="Texture", attribute="texture.xml")],
    )
    write_repository(
        tmp_path,
        "CommonRepository",
        [Item(shared, "Tex", "Common", type="Texture", attribute="texture.xml")],
    )
    index = build_index(str(tmp_path))
    root = posix(tmp_path)
    items = index.res_in_repo[shared]
    assert [r.Repository for r in items] == ["CommonRepository", "Repository"]
    assert items[0].RepositoryFullPath == f"{root}/CommonRepository/resource.repository"
    assert items[1].VirtualPath == "Art/Tex"
    files = index.res_in_disk[shared]
    assert [f.Resource for f in files] == [
        f"{root}/CommonRepository/Common/{shared}/texture.xml",
        f"{root}/Repository/Art/{shared}/texture.xml",
    ]
    assert files[0].Data == f"{root}/CommonRepository/Common/{shared}/resource.data"
    assert index.all_res()[shared][0] == (
        "Common",
        "Tex",
        "Texture",
        [],
        f"{root}/CommonRepository/resource.repository",
    )
    assert set(index.res_virt_info) == {"Common/Tex", "Art/Tex"}
    asset = collect_project(str(tmp_path)).assets[shared]
    assert asset.items == 2 and asset.folders[0].startswith("CommonRepository/")


def test_attribute_file_payload_hdr_and_source_follow_the_spec_preferences(tmp_path):
    """resource.xml beats resource and texture.xml; resource.data beats texture.data; HDR and
    Source are the first matching names in sorted order."""
    g = guid(2)
    write_repository(
        tmp_path,
        "Repo",
        [
            Item(
                g,
                "M",
                "P",
                type="Model",
                extra_files={
                    "resource": b"<R/>",
                    "texture.xml": b"<T/>",
                    "texture.data": b"t",
                    "b.hdr": b"h",
                    "a.hdr": b"h",
                    "source_z.tga": b"s",
                    "source_a.psd": b"s",
                },
            )
        ],
    )
    (resource_file,) = build_index(str(tmp_path)).res_in_disk[g]
    folder = f"{posix(tmp_path)}/Repo/P/{g}"
    assert resource_file.Resource == f"{folder}/resource.xml"
    assert resource_file.Data == f"{folder}/resource.data"
    assert f"{folder}/a.hdr" == resource_file.HDR
    assert resource_file.Source == f"{folder}/source_a.psd"
    assert resource_file.Type == "Model"


def test_folder_type_falls_back_to_other_repository_then_texture_then_empty(tmp_path):
    """A folder's Type comes from its own repository's item, else any item, else texture.xml."""
    other, texture, plain = guid(3), guid(4), guid(5)
    write_repository(tmp_path, "A", [Item(other, "x", "P", type="Sound", folder=False)])
    write(tmp_path, "B/resource.repository", "<Repository><Items/></Repository>")
    write(tmp_path, f"B/P/{other}/resource.xml", "<R/>")
    write(tmp_path, f"B/P/{texture}/texture.xml", "<T/>")
    write(tmp_path, f"B/P/{plain}/resource", "<R/>")
    index = build_index(str(tmp_path))
    assert index.res_in_disk[other][0].Type == "Sound"
    assert index.res_in_disk[other][0].Repository == "B"
    assert index.res_in_disk[texture][0].Type == "Texture"
    assert index.res_in_disk[plain][0].Type == ""


def test_resource_folder_belongs_to_nearest_repository_and_needs_an_attribute_file(tmp_path):
    """Nested repositories claim their own folders; GUID folders without attribute file or
    outside every repository are not resources."""
    inner, outer, bare, stray = guid(6), guid(7), guid(8), guid(9)
    write_repository(tmp_path, "Outer", [Item(outer, "o", "P")])
    write_repository(tmp_path, "Outer/Inner", [Item(inner, "i", "Q")])
    write(tmp_path, f"Outer/P/{bare}/resource.data", b"x")
    write(tmp_path, f"Elsewhere/{stray}/resource.xml", "<R/>")
    index = build_index(str(tmp_path))
    assert index.res_in_disk[inner][0].Repository == "Inner"
    assert index.res_in_disk[outer][0].Repository == "Outer"
    assert bare not in index.res_in_disk and stray not in index.res_in_disk


def test_references_hard_soft_and_attribute_guids_in_file_order(tmp_path):
    """Deps are hard; Anno values and GUIDs in the attribute file are soft; the own GUID is not
    a reference; a target named both ways stays hard."""
    a, b, c, d = guid(10), guid(11), guid(12), guid(13)
    write_repository(
        tmp_path,
        "Repo",
        [
            Item(
                a,
                "a",
                "P",
                deps=(b,),
                annos=(("CollisionShape", c),),
                attribute_body=f"<Self>{a}</Self><Material>{d}</Material><Again>{b}</Again>",
            )
        ],
    )
    asset = collect_project(str(tmp_path)).assets[a]
    assert [(r.target, r.strength, r.label) for r in asset.refs] == [
        (b, HARD, "Deps"),
        (c, SOFT, "CollisionShape"),
        (d, SOFT, "attribute file"),
    ]


def test_worlds_and_levels_become_assets_and_ilevels(tmp_path):
    """A world's Path texts (backslashes normalised) are its levels; a level's GUID texts its
    resources; ilevels holds the absolute paths of levels some world uses."""
    g = guid(14)
    write_repository(tmp_path, "Repo", [Item(g, "a", "P")])
    write_world(tmp_path, "Worlds/W.iworld", ["Levels\\L.ilevel", "./Levels/M.ilevel"])
    write_level(tmp_path, "Levels/L.ilevel", [g, g])
    write_level(tmp_path, "Levels/Other.ilevel", [])
    result = collect_project(str(tmp_path))
    world = result.assets["Worlds/W.iworld"]
    assert [r.target for r in world.refs] == ["Levels/L.ilevel", "Levels/M.ilevel"]
    assert [r.target for r in result.assets["Levels/L.ilevel"].refs] == [g]
    root = posix(tmp_path)
    assert result.index.ilevels == {f"{root}/Levels/L.ilevel", f"{root}/Levels/M.ilevel"}


def test_bom_and_chinese_paths_and_names(tmp_path):
    """UTF-8 with BOM parses, and Chinese packages, names and folders survive intact."""
    g = guid(15)
    write_repository(tmp_path, "资源库", [Item(g, "墙壁", "场景/城镇")], bom=True)
    write(
        tmp_path,
        "世界/城镇.iworld",
        "\ufeff<World><Levels><Level><Path>关卡/主.ilevel</Path></Level></Levels></World>",
    )
    write_level(tmp_path, "关卡/主.ilevel", [g])
    result = collect_project(str(tmp_path))
    resource = result.index.res_in_repo[g][0]
    assert resource.VirtualPath == "场景/城镇/墙壁" and resource.Repository == "资源库"
    assert result.index.res_in_disk[g][0].Resource.endswith(f"资源库/场景/城镇/{g}/resource.xml")
    assert [r.target for r in result.assets["世界/城镇.iworld"].refs] == ["关卡/主.ilevel"]
    assert result.assets[g].folders == (f"资源库/场景/城镇/{g}",)


def test_malformed_repository_names_file_and_line(tmp_path):
    """A broken resource.repository raises ProjectError with its path and lxml's line."""
    write(
        tmp_path,
        "Repo/resource.repository",
        "<Repository>\n<Items>\n<Item><GUID>x</GUID>\n</Items>\n</Repository>\n",
    )
    with pytest.raises(ProjectError) as caught:
        collect_project(str(tmp_path))
    assert caught.value.file == "Repo/resource.repository"
    assert caught.value.line == 4
    assert caught.value.exit_code == 2


def test_skip_broken_reports_and_goes_on_without_the_items(tmp_path):
    """With skip_broken the broken repository is a fatal Problem but the others still load."""
    good = guid(16)
    write_repository(tmp_path, "Good", [Item(good, "g", "P")])
    write(tmp_path, "Bad/resource.repository", "<Repository><Items><Item></Items>")
    result = collect_project(str(tmp_path), {"skip_broken": True})
    assert good in result.index.res_in_repo
    (problem,) = [p for p in result.problems if p.kind == "broken_repository"]
    assert problem.fatal and problem.file == "Bad/resource.repository" and problem.line == 1


def test_item_without_guid_is_ignored_and_reported(tmp_path):
    """An Item lacking a GUID contributes nothing and becomes a non-fatal problem."""
    write(
        tmp_path,
        "Repo/resource.repository",
        "<Repository><Items><Item><Name>orphan</Name></Item></Items></Repository>",
    )
    result = collect_project(str(tmp_path))
    assert result.index.res_in_repo == {}
    assert [p.kind for p in result.problems] == ["item_without_guid"]
    assert not result.problems[0].fatal


def test_attribute_batches_are_stable_when_one_resource_is_added(tmp_path):
    """Adding one resource to a large project changes exactly one attribute batch."""
    items = [Item(guid(100 + n), f"r{n}", "P") for n in range(300)]
    write_repository(tmp_path, "Repo", items)
    before = {u.id: u.files for u in SOURCE.plan(walk_project(str(tmp_path)), {})}
    write(tmp_path, f"Repo/P/{guid(999)}/resource.xml", "<R/>")
    after = {u.id: u.files for u in SOURCE.plan(walk_project(str(tmp_path)), {})}
    assert set(before) == set(after)
    assert sum(before[k] != after[k] for k in before) == 1
    assert len(after) > 2 and all(len(files) < 3 * 64 for files in after.values())


def test_parse_reads_only_through_the_reader(tmp_path):
    """A level unit's result comes from reader.read_bytes, which records the file it read."""
    g = guid(17)
    write_level(tmp_path, "L.ilevel", [g])
    (unit,) = [u for u in SOURCE.plan(walk_project(str(tmp_path)), {}) if u.id == "map:L.ilevel"]
    reader = Reader(
        str(tmp_path), preloaded={"L.ilevel": f"<Level><R>{g}</R></Level>".encode()}, disk=False
    )
    part = SOURCE.parse(unit, reader, {})
    assert part.refs == (g,) and list(reader.reads) == ["L.ilevel"]


class FakeCtx:
    """The slice of the engine's Context that the collect stage uses."""

    def __init__(self, root: Path, collect_options: dict | None = None) -> None:
        self.root = posix(root)
        self._sections = {
            "source": "messiah",
            "collect": {"skip_broken": False, "exclude": [], **(collect_options or {})},
        }
        self.log = SimpleNamespace(warning=lambda *a, **k: None)

    def section(self, name):
        return self._sections[name]

    def walk(self):
        return walk_project(self.root)

    def file_digest(self, relpath):
        from orchestrator.hashing import digest_file

        return digest_file(f"{self.root}/{relpath}")


class FakeResults(dict):
    def digest(self, unit_id):
        return f"digest-of-{unit_id}"


def run_collect_stage(ctx) -> dict:
    plan = collect.plan(ctx, {})
    results = FakeResults(
        {u.id: collect.run(u.payload, plan.shared, Reader(ctx.root)) for u in plan.units}
    )
    return collect.finish(ctx, {}, results)


def _collect(root: Path, **options):
    from orchestrator.testing import run_stage

    settings = {"source": "messiah", "collect": options} if options else {"source": "messiah"}
    return run_stage(collect, project=root, settings=settings, workdir=root.parent / "work")


def test_collect_stage_outputs_assets_index_and_source_and_honours_exclude(tmp_path):
    """`assets` are keyed by id, `exclude` drops files before any unit reads them, and the
    source info carries the repository list the index was built from."""
    g = guid(18)
    root = tmp_path / "p"
    write_repository(root, "Repo", [Item(g, "a", "P")])
    write(root, "notes/readme.txt", "hi")
    write(root, "notes/resource.repository", "<Repository>\n<Items>")  # broken, but excluded
    run = _collect(root, exclude=["notes/**"])
    assert set(run.outputs["assets"]) == {g}
    assert run.outputs["assets"][g].files and run.outputs["index"] is not None
    read = {path for reads in run.reads.values() for path in reads}
    assert "Repo/resource.repository" in read
    assert not any(path.startswith("notes/") for path in read)
    assert not run.outputs["source"].problems


def test_collect_stage_fails_on_a_broken_repository_unless_skip_broken(tmp_path):
    """The stage raises ProjectError (exit 2) for a malformed repository; skip_broken goes on."""
    root = tmp_path / "p"
    write(root, "Repo/resource.repository", "<Repository>\n<Items>")
    with pytest.raises(ProjectError) as caught:
        _collect(root)
    assert caught.value.file == "Repo/resource.repository" and caught.value.line
    run = _collect(root, skip_broken=True)
    assert run.outputs["source"].problems[0].kind == "broken_repository"


def _parts_with_digests(root: Path, digests: dict | None = None):
    files = walk_project(str(root))
    reader = Reader(str(root))
    parts = collect.PartResults.__new__(collect.PartResults)
    dict.__init__(parts, {u.id: SOURCE.parse(u, reader, {}) for u in SOURCE.plan(files, {})})
    parts.digests = {unit_id: (digests or {}).get(unit_id, f"d-{unit_id}") for unit_id in parts}
    return files, reader, parts


def test_index_carries_a_digest_derived_from_repository_and_world_parts(tmp_path):
    """With part digests the index names itself by them (no hash of 100,000 entries): the same
    parts and resource folders give the same digest, a changed repository part another; an
    attribute part does not enter it, and the index still equals one built without digests."""
    a, b = guid(20), guid(21)
    write_repository(tmp_path, "Repo", [Item(a, "a", "P", deps=(b,)), Item(b, "b", "P")])
    write_world(tmp_path, "Worlds/W.iworld", ["Levels/L.ilevel"])
    write_level(tmp_path, "Levels/L.ilevel", [a])
    files, reader, parts = _parts_with_digests(tmp_path)
    index = SOURCE.assemble(reader.root, files, parts, {}).index
    assert index.known_digest and index.digest() == index.known_digest
    plain = collect_project(str(tmp_path)).index  # with absolute paths, as the spec's sets
    assert plain == index.at(reader.root) and plain.digest() != index.digest()
    assert index.at(reader.root).digest() == index.digest()  # rooted, it keeps its name
    again = SOURCE.assemble(reader.root, files, parts, {}).index
    assert again.digest() == index.digest()
    attrs = next(u for u in parts if u.startswith("attrs:"))
    for unit_id, changes in (
        ("repo:Repo/resource.repository", True),
        ("map:Worlds/W.iworld", True),
        ("map:Levels/L.ilevel", False),
        (attrs, False),
    ):
        _, _, other = _parts_with_digests(tmp_path, {unit_id: "changed"})
        digest = SOURCE.assemble(reader.root, files, other, {}).index.digest()
        assert (digest != index.digest()) == changes, unit_id
    write(tmp_path, f"Repo/P/{a}/notes.txt", "not a payload")  # the folder's other files
    files2, _, parts2 = _parts_with_digests(tmp_path)
    assert SOURCE.assemble(reader.root, files2, parts2, {}).index.digest() == index.digest()
    write(tmp_path, f"Repo/P/{a}/a.hdr", "h")  # a file the index names
    files3, _, parts3 = _parts_with_digests(tmp_path)
    assert SOURCE.assemble(reader.root, files3, parts3, {}).index.digest() != index.digest()


def test_the_index_is_the_same_value_wherever_the_checkout_lies(tmp_path):
    """Two checkouts of one project at different paths assemble the same index, with the same
    digest (it keys the rule units that read it), holding project-relative paths; rooted, the
    rules see the spec's absolute paths under each checkout's own root."""
    a = guid(40)
    one = tmp_path / "agent-1" / "项目"
    write_repository(one, "Repo", [Item(a, "a", "P")])
    write_world(one, "Worlds/W.iworld", ["Levels/L.ilevel"])
    write_level(one, "Levels/L.ilevel", [a])
    two = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(one, two)
    indexes = []
    for root in (one, two):
        files, reader, parts = _parts_with_digests(root)
        indexes.append((reader.root, SOURCE.assemble(reader.root, files, parts, {}).index))
    (root_one, first), (root_two, second) = indexes
    assert first == second and first.digest() == second.digest()
    assert first.content_digest() == second.content_digest()
    assert str(tmp_path) not in repr(first)
    (entry,) = first.res_in_disk[a]
    assert entry.Resource == f"Repo/P/{a}/resource.xml"
    assert first.ilevels == frozenset({"Levels/L.ilevel"})
    for root, index in ((root_one, first), (root_two, second)):
        (rooted,) = index.at(root).res_in_disk[a]
        assert rooted.Resource == f"{root}/Repo/P/{a}/resource.xml"
        assert index.at(root).ilevels == frozenset({f"{root}/Levels/L.ilevel"})


def test_duplicated_guid_keeps_hard_references_over_soft_ones_across_items(tmp_path):
    """Two items of one GUID: a Deps of the second upgrades the first's soft Anno reference in
    place (hard, with its label); attribute-file GUIDs come after, once each."""
    g, t1, t2 = guid(30), guid(31), guid(32)
    write_repository(
        tmp_path, "CommonRepository", [Item(g, "x", "Q", annos=(("Shape", t1),), folder=False)]
    )
    write_repository(
        tmp_path,
        "Repository",
        [Item(g, "x", "P", deps=(t1,), attribute_body=f"<M>{t2}</M><N>{t1}</N>")],
    )
    asset = collect_project(str(tmp_path)).assets[g]
    assert asset.items == 2 and asset.virtual_paths == ("Q/x", "P/x")
    assert [(r.target, r.strength, r.label) for r in asset.refs] == [
        (t1, HARD, "Deps"),
        (t2, SOFT, "attribute file"),
    ]


def test_repository_order_puts_a_folder_before_its_subfolders(tmp_path):
    """Repositories are ordered by folder, segment by segment (ExtraRepo, ExtraRepo/Sub,
    ExtraRepoB): it orders a GUID's items in every set and decides a ResourceFile's Type."""
    g = guid(40)
    write_repository(tmp_path, "ExtraRepoB", [Item(g, "b", "P", type="Sound", folder=False)])
    write_repository(tmp_path, "ExtraRepo/Sub", [Item(g, "s", "P", type="Mesh", folder=False)])
    write_repository(tmp_path, "ExtraRepo", [Item(g, "e", "P", type="Model", folder=False)])
    write(tmp_path, "Zed/resource.repository", "<Repository><Items/></Repository>")
    write(tmp_path, f"Zed/P/{g}/resource.xml", "<R/>")
    result = collect_project(str(tmp_path))
    index = result.index
    assert [r.Repository for r in index.res_in_repo[g]] == ["ExtraRepo", "Sub", "ExtraRepoB"]
    root = posix(tmp_path)
    assert [entry[4] for entry in index.all_res()[g]] == [
        f"{root}/ExtraRepo/resource.repository",
        f"{root}/ExtraRepo/Sub/resource.repository",
        f"{root}/ExtraRepoB/resource.repository",
    ]
    (folder,) = index.res_in_disk[g]
    assert folder.Repository == "Zed" and folder.Type == "Model"
    asset = result.assets[g]
    assert asset.type == "Model" and asset.virtual_paths == ("P/e", "P/s", "P/b")


def test_repository_order_key_compares_segments():
    """`repository_order` sorts the root's repository first and a parent before its children."""
    from stages.sources.messiah.reader import repository_order

    files = [
        "ExtraRepoB/resource.repository",
        "ExtraRepo/Sub/resource.repository",
        "resource.repository",
        "ExtraRepo/resource.repository",
        "ExtraRepo/Sub/Deeper/resource.repository",
        "ExtraRepo/Sub2/resource.repository",
    ]
    assert sorted(files, key=repository_order) == [
        "resource.repository",
        "ExtraRepo/resource.repository",
        "ExtraRepo/Sub/resource.repository",
        "ExtraRepo/Sub/Deeper/resource.repository",
        "ExtraRepo/Sub2/resource.repository",
        "ExtraRepoB/resource.repository",
    ]


def test_empty_deps_are_in_the_index_but_are_no_references(tmp_path):
    """Every Deps child is in the index, an empty one as ''; references skip the empty ones."""
    g, dep = guid(41), guid(42)
    write(
        tmp_path,
        "Repo/resource.repository",
        "<Repository><Items><Item><Type>Model</Type><GUID>"
        + g
        + "</GUID><Package>P</Package><Deps/><Deps>"
        + dep
        + "</Deps><Deps>  </Deps><Name>m</Name></Item></Items></Repository>",
    )
    write(tmp_path, f"Repo/P/{g}/resource.xml", "<R/>")
    result = collect_project(str(tmp_path))
    (resource,) = result.index.res_in_repo[g]
    assert resource.Deps == ("", dep, "")
    assert result.index.all_res()[g][0][3] == ["", dep, ""]
    assert [(r.target, r.strength) for r in result.assets[g].refs] == [(dep, HARD)]


def test_an_items_problem_names_its_line_past_65535():
    """An Item without a GUID, or with a name holding a control character, past line 65,535 of
    a pretty-printed repository: the problem names the line of the Item's start tag (lxml's own
    is the next line's: stages/rules/lines.py)."""
    from stages.sources.messiah.reader import parse_repository

    lines = ["<Repository>", "<Items>"]
    for n in range(17_000):
        lines += ["  <Item>", f"    <GUID>{guid(n)}</GUID>", f"    <Name>n{n}</Name>", "  </Item>"]
    orphan = len(lines) + 1
    lines += ["  <Item>", "    <Name>orphan</Name>", "  </Item>"]
    unsafe = len(lines) + 1
    lines += ["  <Item>", f"    <GUID>{guid(17_000)}</GUID>", "    <Name>two", "lines</Name>"]
    lines += ["  </Item>", "</Items>", "</Repository>"]
    assert orphan > 65_535
    part = parse_repository("Repo/resource.repository", "\n".join(lines).encode())
    assert [(p.kind, p.line) for p in part.problems] == [
        ("item_without_guid", orphan),
        ("unsafe_name", unsafe),
    ]
