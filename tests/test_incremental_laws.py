"""The laws of the incremental engine over random sequences of changes to a generated project.

Law 1: after every change, an incremental build in the same checkout publishes what a clean build
(fresh cache and output folder) of the same files publishes, byte for byte, with the same content
reports, exit code, stored units and value entries. Law 2: every unit the incremental build ran
is one whose static key or the digest of a file it read differ between clean builds of the state
before and after the change (Buck2's check of DICE): an edit to one file never re-runs work for
an unrelated one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import uuid
from pathlib import Path

import lawkit
import pytest
import yaml
from buildkit import edit_build, make_project, run_inprocess
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from unity_projects import (
    build_settings,
    guid,
    material,
    prefab,
    scriptable,
    write,
    write_folder_meta,
)

from stages.rules import functions
from stages.rules.functions import StoredIndex
from stages.sources.messiah.reader import ATTRIBUTE_FILES, GUID_RE, PAYLOAD_FILES

PAST_NS = time.time_ns() - 3600 * 10**9


def age(root: Path) -> None:
    """Every file and folder under `root` an hour old: a first scan trusts their signatures."""
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            os.utime(os.path.join(dirpath, name), ns=(PAST_NS, PAST_NS))
    for dirpath, _, _ in sorted(os.walk(root), key=lambda walked: -len(walked[0])):
        os.utime(dirpath, ns=(PAST_NS, PAST_NS))


def settle(root: Path, step: int) -> None:
    """Back-date what was just changed in a project (a build started seconds after the edits):
    the scan then trusts the new signatures instead of treating the files as racily clean."""
    recent = time.time_ns() - 60 * 10**9
    stamp = PAST_NS + step * 10**9
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in [*filenames, ""]:
            path = os.path.join(dirpath, name) if name else dirpath
            if os.stat(path).st_mtime_ns > recent:
                os.utime(path, ns=(stamp, stamp))


def aged_project(base: Path) -> Path:
    """A generated project of 100 resources (the generator's smallest) under `base`, aged: the
    template the laws' checkouts are copied from."""
    make_project(base, 100, 7)
    (base / "generated.json").unlink()
    age(base)
    return base


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return aged_project(tmp_path_factory.mktemp("template"))


def checkout(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest, dirs_exist_ok=True)
    return dest / "build.yaml"


class MessiahChanges:
    """Changes to a checkout of a generated Messiah project, each picked by two integers (so
    Hypothesis shrinks them) and resolved against the files as they are now."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "project"
        self.made = 0  # names of new GUIDs, files and folders
        self.broken: dict[Path, bytes] = {}  # repositories broken on purpose → their text

    # -- what is there ---------------------------------------------------------------------------
    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*") if p.is_file())

    def folders(self) -> list[Path]:
        """Resource folders: GUID-named, holding an attribute file."""
        return sorted(
            p
            for p in self.root.rglob("*")
            if p.is_dir()
            and GUID_RE.match(p.name)
            and any((p / name).is_file() for name in ATTRIBUTE_FILES)
        )

    def repositories(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("resource.repository") if p not in self.broken)

    def maps(self) -> list[Path]:
        return sorted([*self.root.rglob("*.ilevel"), *self.root.rglob("*.iworld")])

    def guid(self, pick: int) -> str:
        """A GUID some folder has (or a fresh one when there is none)."""
        folders = self.folders()
        return folders[pick % len(folders)].name if folders else self.new_guid()

    def new_guid(self) -> str:
        self.made += 1
        return str(uuid.UUID(int=(0xC0FFEE << 96) + self.made))

    @staticmethod
    def attribute(folder: Path) -> Path:
        return next(folder / name for name in ATTRIBUTE_FILES if (folder / name).is_file())

    @staticmethod
    def payload(folder: Path) -> Path | None:
        return next((folder / n for n in PAYLOAD_FILES if (folder / n).is_file()), None)

    @staticmethod
    def pick(items: list, a: int):
        return items[a % len(items)] if items else None

    # -- the changes -----------------------------------------------------------------------------
    def apply(self, kind: str, a: int, b: int) -> str:
        """Make one change; returns what was done (for the failure message)."""
        return getattr(self, kind)(a, b)

    def edit_attribute(self, a: int, b: int) -> str:
        """An attribute file: a value, a GUID it names added or dropped, a texture's width."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        path = self.attribute(folder)
        text = path.read_text(encoding="utf-8")
        choice = b % 4
        if choice == 0:
            text = re.sub(r"\s*<Extra>\d+</Extra>", "", text)
            text = re.sub(r"(</\w+>\s*)$", rf"  <Extra>{b}</Extra>\n\1", text)
        elif choice == 1:
            text = re.sub(r"(</\w+>\s*)$", rf"  <Link>{self.guid(b // 4)}</Link>\n\1", text)
        elif choice == 2:
            text = re.sub(r"\s*<Link>[^<]*</Link>", "", text)
        else:
            text = re.sub(r"<(Width|NumFaces|Duration)>[^<]*<", rf"<\g<1>>{64 << (b % 7)}<", text)
        path.write_text(text, encoding="utf-8")
        return f"edit {path.relative_to(self.root)} ({choice})"

    def edit_payload(self, a: int, b: int) -> str:
        """A payload's bytes; half the time of the same size."""
        folder = self.pick(self.folders(), a)
        path = self.payload(folder) if folder else None
        if path is None:
            return "no payload"
        old = path.read_bytes()
        size = len(old) if b % 2 else len(old) + 1 + b % 50
        data = (b.to_bytes(8, "little") * (size // 8 + 1))[:size]
        if data == old:
            data = bytes(x ^ 1 for x in data)
        path.write_bytes(data)
        return f"rewrite {path.relative_to(self.root)}"

    def edit_repository(self, a: int, b: int) -> str:
        """One item of a repository: renamed, a Deps added or dropped, its Type changed."""
        path = self.pick(self.repositories(), b)
        if path is None:
            return "no repository"
        text = path.read_text(encoding="utf-8")
        items = list(re.finditer(r"<Item>.*?</Item>", text, re.S))
        if not items:
            return "empty repository"
        match = items[a % len(items)]
        item = match.group(0)
        choice = b % 4
        if choice == 0:
            item = re.sub(r"<Name>([^<]*)</Name>", r"<Name>\1_r</Name>", item)
        elif choice == 1:
            item = item.replace(
                "</Class>\n", f"</Class>\n      <Deps>{self.guid(a // 3 + b)}</Deps>\n", 1
            )
        elif choice == 2:
            item = re.sub(r"\s*<Deps>[^<]*</Deps>", "", item)
        else:
            item = re.sub(
                r"<Type>(\w+)</Type>",
                lambda m: f"<Type>{'Mesh' if m.group(1) != 'Mesh' else 'Texture'}</Type>",
                item,
            )
        path.write_text(text[: match.start()] + item + text[match.end() :], encoding="utf-8")
        return f"edit an item of {path.relative_to(self.root)} ({choice})"

    def edit_map(self, a: int, b: int) -> str:
        """A level gains or loses a placed resource; a world gains or loses a level."""
        path = self.pick(self.maps(), a)
        if path is None:
            return "no map"
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".ilevel":
            if b % 2:
                text = re.sub(r"\n\s*<Entity>.*?</Entity>(?=\s*</Entities>)", "", text, count=1)
            else:
                entity = f"<Entity><Name>e{b}</Name><Resource>{self.guid(b)}</Resource></Entity>"
                text = text.replace("</Entities>", f"  {entity}\n  </Entities>", 1)
        elif b % 2:
            text = re.sub(r"\n\s*<Level>.*?</Level>(?=\s*</Levels>)", "", text, count=1)
        else:
            level = self.pick(sorted(self.root.rglob("*.ilevel")), b)
            if level is not None:
                rel = level.relative_to(self.root).as_posix()
                text = text.replace(
                    "</Levels>", f"  <Level><Path>{rel}</Path></Level>\n  </Levels>", 1
                )
        path.write_text(text, encoding="utf-8")
        return f"edit {path.relative_to(self.root)}"

    def add_asset(self, a: int, b: int) -> str:
        """A new resource folder beside an existing one; half the time listed in its
        repository too, and referring to another resource."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        new_id = self.new_guid()
        new = folder.parent / new_id
        new.mkdir()
        (new / "resource.xml").write_text(
            f'<?xml version="1.0" encoding="utf-8"?>\n<Resource Type="Mesh" Name="new_{new_id[-4:]}">'
            f"\n  <Link>{self.guid(b)}</Link>\n</Resource>\n",
            encoding="utf-8",
        )
        (new / "resource.data").write_bytes(new_id.encode("ascii") * (1 + b % 5))
        if b % 2 == 0:
            # Only a repository above the folder can list it (an earlier step may have renamed
            # the one that did).
            repositories = [r for r in self.repositories() if folder.is_relative_to(r.parent)]
            if repositories:
                repository = repositories[-1]
                package = folder.parent.relative_to(repository.parent).as_posix()
                item = (
                    f"    <Item>\n      <Type>Mesh</Type>\n      <GUID>{new_id}</GUID>\n"
                    f"      <Package>{package}</Package>\n      <Class>Mesh</Class>\n"
                    f"      <Deps>{self.guid(b // 2)}</Deps>\n"
                    f"      <Name>new_{new_id[-4:]}</Name>\n    </Item>\n"
                )
                text = repository.read_text(encoding="utf-8")
                repository.write_text(text.replace("  </Items>", item + "  </Items>", 1), "utf-8")
        return f"add {new.relative_to(self.root)}"

    def add_file(self, a: int, b: int) -> str:
        """A file joins a resource folder: a source image, a header, anything."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        name = ("source.tga", "sound.hdr", f"notes_{b % 3}.txt")[b % 3]
        (folder / name).write_bytes(b"added %d\n" % b)
        return f"add {(folder / name).relative_to(self.root)}"

    def delete_file(self, a: int, b: int) -> str:
        """A payload, an attribute file (the folder stops being a resource) or another file."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        choice = b % 3
        if choice == 1:
            path = self.attribute(folder)
        else:
            others = sorted(p for p in folder.iterdir() if p.name not in ATTRIBUTE_FILES)
            path = (self.payload(folder) if choice == 0 else None) or self.pick(others, b)
        if path is None:
            return "nothing to delete"
        path.unlink()
        return f"delete {path.relative_to(self.root)}"

    def delete_asset(self, a: int, b: int) -> str:
        """A resource folder, and half the time its repository item too."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        shutil.rmtree(folder)
        if b % 2 == 0:
            for repository in self.repositories():
                text = repository.read_text(encoding="utf-8")
                pattern = rf"    <Item>(?:(?!</Item>).)*<GUID>{folder.name}</GUID>.*?</Item>\n"
                repository.write_text(re.sub(pattern, "", text, flags=re.S), encoding="utf-8")
        return f"delete {folder.relative_to(self.root)}"

    def delete_map(self, a: int, b: int) -> str:
        path = self.pick(self.maps(), a)
        if path is None:
            return "no map"
        path.unlink()
        return f"delete {path.relative_to(self.root)}"

    def rename_file(self, a: int, b: int) -> str:
        """A payload to the other payload name, or a level (its world now misses it)."""
        if b % 2:
            path = self.pick(sorted(self.root.rglob("*.ilevel")), a)
            if path is None:
                return "no level"
            target = path.with_name(f"{path.stem}_{b % 3}.ilevel")
        else:
            folder = self.pick(self.folders(), a)
            path = self.payload(folder) if folder else None
            if path is None:
                return "no payload"
            other = PAYLOAD_FILES[1 - PAYLOAD_FILES.index(path.name)]
            target = path.with_name(other)
        if target.exists():
            return "target exists"
        path.rename(target)
        return f"rename {path.relative_to(self.root)} → {target.name}"

    def move_asset(self, a: int, b: int) -> str:
        """An asset moves to another package of its repository: its folder moves to that
        package's folder and its Item's Package follows."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        repositories = [r for r in self.repositories() if folder.is_relative_to(r.parent)]
        if not repositories:
            return "no repository above the folder"
        repository = repositories[-1]
        packages = sorted(
            {f.parent for f in self.folders() if f.is_relative_to(repository.parent)}
            - {folder.parent}
        )
        target = self.pick(packages, b)
        if target is None or (target / folder.name).exists():
            return "no other package"
        folder.rename(target / folder.name)
        package = target.relative_to(repository.parent).as_posix()
        text = repository.read_text(encoding="utf-8")
        pattern = rf"(<GUID>{folder.name}</GUID>(?:(?!</Item>).)*?<Package>)[^<]*(</Package>)"
        repository.write_text(re.sub(pattern, rf"\g<1>{package}\2", text, flags=re.S), "utf-8")
        return f"move {folder.relative_to(self.root)} to {package}"

    def rename_folder(self, a: int, b: int) -> str:
        """A resource folder to a new GUID, or a package folder (every asset in it moves)."""
        folder = self.pick(self.folders(), a)
        if folder is None:
            return "no resource folder"
        if b % 2:
            source = folder.parent
            target = source.with_name(f"{source.name}_m{b % 3}")
        else:
            source, target = folder, folder.with_name(self.new_guid())
        if target.exists():
            return "target exists"
        source.rename(target)
        return f"rename {source.relative_to(self.root)} → {target.name}"

    def touch(self, a: int, b: int) -> str:
        """A file's time stamps move, or its bytes are written again, the content the same."""
        path = self.pick(self.files(), a)
        if path is None:
            return "no file"
        if b % 2:
            os.utime(path)
        else:
            path.write_bytes(path.read_bytes())
        return f"touch {path.relative_to(self.root)}"

    RULE_EDITS = (
        ("int(v) <= 2048", "int(v) <= 1024"),
        (
            "name: textures are compressed\n  severity: warning",
            "name: textures are compressed\n  severity: error",
        ),
        ("condition: ['<=', 20000]", "condition: ['<=', 5000]"),
        ("'ETC2_RGBA', 'RGBA8'", "'ETC2_RGBA'"),
        (
            "\n- id: level-resources-on-disk",
            "\n- id: resource-named\n  name: resources name themselves\n  severity: warning\n"
            "  rpath: '/resource\\.xml$'\n  xpath: 'Resource.Name'\n  condition: ['非空集合']\n"
            "\n- id: level-resources-on-disk",
        ),
    )

    def edit_rules(self, a: int, b: int) -> str:
        """A budget, a severity, an allowed value changed; a rule added or removed (each edit
        done, or undone when it is in force)."""
        path = self.base / "rules.yaml"
        text = path.read_text(encoding="utf-8")
        old, new = self.RULE_EDITS[b % len(self.RULE_EDITS)]
        if old in text and not (new in text and len(new) > len(old)):
            text = text.replace(old, new, 1)
        else:
            text = text.replace(new, old, 1)
        path.write_text(text, encoding="utf-8")
        return f"rules edit {b % len(self.RULE_EDITS)}"

    def edit_build(self, a: int, b: int) -> str:
        """One setting of the build file's slice of some stage."""
        build_file = self.base / "build.yaml"
        data = yaml.safe_load(build_file.read_text(encoding="utf-8"))
        choice = b % 14
        if choice == 0:
            codec = ("zstd", "lz4", "none")[a % 3]
            edit_build(build_file, archive={"compression": codec})
        elif choice == 1:
            edit_build(build_file, archive={"level": 1 + a % 5})
        elif choice == 2:
            edit_build(build_file, hash={"append_hash": not data["hash"]["append_hash"]})
        elif choice == 3:
            follow = not data["cook"].get("follow_soft_references", True)
            edit_build(build_file, cook={"follow_soft_references": follow})
        elif choice == 4:
            policy = ("extract", "duplicate")[a % 2]
            edit_build(build_file, bundles={"shared_dependencies": policy})
        elif choice == 5:
            edit_build(build_file, rules={"fail_on": ("error", "warning", "never")[a % 3]})
        elif choice == 6:
            always = [["UI/"], ["UI/", "Audio/"], []][a % 3]
            edit_build(build_file, cook={"always_cook": always})
        elif choice == 7:
            exclude = [[], ["**/*.hdr"], ["**/source.tga", "Levels/Archive/**"]][a % 3]
            edit_build(build_file, collect={"exclude": exclude})
        elif choice == 8:
            edit_build(build_file, rules={"scope": ("all", "cooked")[a % 2]})
        elif choice == 9:
            maps = [["Worlds/Town.iworld", "Worlds/Forest.iworld"], ["Worlds/Town.iworld"]][a % 2]
            edit_build(build_file, cook={"maps": maps})
        elif choice == 10:
            layout = data["bundles"]["layout"]
            if len(layout) > 2:
                layout = layout[:-1]
            else:
                layout = [*layout, {"name": "chars/{package}", "include": ["Characters/**"]}]
            edit_build(build_file, bundles={"layout": layout})
        elif choice == 11:
            cookers = [{}, {"Texture": "xml"}, {"Mesh": "xml", "Model": "xml"}][a % 3]
            edit_build(build_file, cook={"cookers": cookers})
        elif choice == 12:
            edit_build(build_file, cook={"never_cook": [["Dev/"], ["Dev/", "DLC/"]][a % 2]})
        else:
            edit_build(build_file, link_xml={"assembly": ("Messiah.Runtime", "Game.Core")[a % 2]})
        return f"build edit {choice}"

    def partial_build(self, a: int, b: int) -> str:
        """A run between the checked ones: only some stages (`orchestrate validate`,
        `cooklist`: the others' records fall behind and their next run sees the changes of
        several runs at once), a dry run, or a run with --no-cache."""
        choice = b % 5
        if choice < 3:
            stages = (["validate"], ["dependency"], ["cook"])[choice]
            lawkit.build(self.base / "build.yaml", stages=stages)
            return f"build {stages[0]} only"
        if choice == 3:
            lawkit.build(self.base / "build.yaml", dry_run=True)
            return "dry run"
        lawkit.build(self.base / "build.yaml", no_cache=True)
        return "build --no-cache"

    def break_repository(self, a: int, b: int) -> str:
        """A repository is cut short (the build stops, exit 2), or one cut short is mended."""
        if self.broken:
            path, text = self.broken.popitem()
            path.write_bytes(text)
            return f"mend {path.relative_to(self.root)}"
        path = self.pick(self.repositories(), a)
        if path is None:
            return "no repository"
        data = path.read_bytes()
        self.broken[path] = data
        path.write_bytes(data[: len(data) // 2])
        return f"break {path.relative_to(self.root)}"


KINDS = [
    "edit_attribute",
    "edit_payload",
    "edit_repository",
    "edit_map",
    "add_asset",
    "add_file",
    "delete_file",
    "delete_asset",
    "delete_map",
    "rename_file",
    "rename_folder",
    "move_asset",
    "touch",
    "edit_rules",
    "edit_build",
    "break_repository",
    "partial_build",
]
CHANGE = st.tuples(st.sampled_from(KINDS), st.integers(0, 999), st.integers(0, 999))
STEP = st.lists(CHANGE, min_size=1, max_size=3)


def check_step(
    base: Path, number: int, before: lawkit.BuildOutcome, done: list[str], settled: bool
) -> lawkit.BuildOutcome:
    """Build incrementally and clean, check both laws; returns the clean build (the next step's
    `before`).

    Law 2 is checked on the units the engine planned to run again when the changes were
    settled (and no build inside the step moved the state), and on the units it executed
    otherwise: a file changed within the clock's granularity of a scan is racily clean, so the
    next run re-checks its readers (answered by the action cache) rather than trust its
    signature.
    """
    incremental = lawkit.build(base / "build.yaml")
    clean = lawkit.build(base / "build.yaml", f"clean{number}/out", f"clean{number}/cache")
    shutil.rmtree(base / f"clean{number}")
    story = "; ".join(done)
    problems = lawkit.differences(incremental, clean)
    assert not problems, f"incremental != clean after: {story}\n" + "\n".join(problems)
    if not incremental.error and not clean.error:
        due = incremental.planned if settled else incremental.ran
        wrong = lawkit.unreachable_runs(before.units, clean.units, due)
        assert not wrong, f"work the change cannot reach ran after: {story}\n" + "\n".join(wrong)
    return clean


def run_sequence(
    base: Path, changes, steps: list[list[tuple[str, int, int]]], settled: bool = False
) -> None:
    """Build, then per step make its changes and check both laws; `settled`: back-date each
    step's changes before building."""
    before = lawkit.build(base / "build.yaml")
    assert not before.error and before.outputs, before.error  # a project that builds
    done: list[str] = []
    for number, step in enumerate(steps, 1):
        for kind, a, b in step:
            done.append(changes.apply(kind, a, b))
        if settled:
            settle(base / "project", number)
        done.append("build (settled)" if settled else "build")
        # A build inside the step saw changes the step then undid (a repository broken, built,
        # mended): the state moved past `before`, so the units planned again may be more than
        # the changes from `before` reach; those that ran (the action cache answers the rest)
        # may not.
        planned_from_before = settled and not any(kind == "partial_build" for kind, _, _ in step)
        before = check_step(base, number, before, done, planned_from_before)


def law_settings(examples: int) -> settings:
    """Hypothesis settings for a law: no deadline, and no shrinking (it re-runs whole build
    sequences for minutes; the failure message already tells the changes step by step)."""
    return settings(
        max_examples=examples,
        deadline=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )


@law_settings(12)
@given(steps=st.lists(STEP, min_size=2, max_size=4), settled=st.booleans())
def test_incremental_builds_equal_clean_builds_and_rerun_only_what_changes_reach(
    template, tmp_path_factory, steps, settled
):
    """After each of several random changes (edits, additions, deletions, renames, touches,
    rule and build-file edits), the incremental build equals a clean one and re-ran only units
    whose key or read files changed."""
    base = tmp_path_factory.mktemp("laws")
    checkout(template, base)
    run_sequence(base, MessiahChanges(base), steps, settled)


@pytest.mark.slow
@law_settings(25)
@given(steps=st.lists(STEP, min_size=4, max_size=7), settled=st.booleans())
def test_the_laws_over_longer_sequences(template, tmp_path_factory, steps, settled):
    """The same laws over longer sequences of changes: state carried across many runs."""
    base = tmp_path_factory.mktemp("laws")
    checkout(template, base)
    run_sequence(base, MessiahChanges(base), steps, settled)


def check_dry_run(base: Path, done: list[str]) -> None:
    """Law 3: a dry run names exactly the units the run after it runs, with the same reasons,
    or stops on the same error; and it leaves the cache, the build state and the output
    folder as they were."""
    story = "; ".join(done)
    before = lawkit.footprint(base)
    dry = lawkit.build(base / "build.yaml", dry_run=True)
    assert lawkit.footprint(base) == before, f"a dry run left something behind after: {story}"
    real = lawkit.build(base / "build.yaml", explain=True)
    assert dry.error == real.error, f"after: {story}"
    if real.error:
        return
    ran = {(stage, unit) for stage, units in real.ran.items() for unit in units}
    assert {(stage, unit) for stage, unit, _ in real.named} == ran  # what --explain names
    missing, extra = real.named - dry.named, dry.named - real.named
    assert not missing and not extra, (
        f"the dry run after: {story}\n  did not name: {sorted(missing)}\n"
        f"  named but not run: {sorted(extra)}"
    )


def test_a_dry_run_after_one_edit_prints_what_the_run_then_runs(template, tmp_path, capsys):
    """The case reported: after a build, one `<MipLevels>` edited in one texture.xml; the dry
    run printed "nothing to do" and the run then rebuilt a unit in each of seven stages. Now it
    prints each of them with its reason, and the run runs exactly those."""
    build_file = checkout(template, tmp_path)
    assert run_inprocess("run", str(build_file), "--executor", "local") in (0, 1)
    path = next(
        p for p in (tmp_path / "project").rglob("texture.xml") if "MipLevels" in p.read_text()
    )
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"<MipLevels>\d+<", "<MipLevels>3<", text, count=1), encoding="utf-8")
    capsys.readouterr()
    assert run_inprocess("run", str(build_file), "--executor", "local", "--dry-run") == 0
    printed = capsys.readouterr().out.splitlines()
    real = lawkit.build(build_file, explain=True)
    assert sorted(printed) == sorted(
        f"would run {stage}: {unit} ({reason})" for stage, unit, reason in real.named
    )
    assert {stage for stage, _, _ in real.named} >= {"collect", "cook", "write", "manifest"}


@law_settings(12)
@given(steps=st.lists(STEP, min_size=1, max_size=3), settled=st.booleans())
def test_a_dry_run_names_exactly_the_units_the_next_run_runs(
    template, tmp_path_factory, steps, settled
):
    """After each of several random changes, `run --dry-run` names exactly the units (and the
    reasons) the real run after it runs, whatever the change: the units of a stage whose
    values later stages are planned from run in scratch, so that their keys are known."""
    base = tmp_path_factory.mktemp("dry")
    checkout(template, base)
    changes = MessiahChanges(base)
    assert not lawkit.build(base / "build.yaml").error
    done: list[str] = []
    for number, step in enumerate(steps, 1):
        done += [changes.apply(kind, a, b) for kind, a, b in step]
        if settled:
            settle(base / "project", number)
        check_dry_run(base, done)


# -- what one edit reaches, exactly ------------------------------------------------------------


def readers(outcome: lawkit.BuildOutcome, stage: str, relpath: str) -> set[str]:
    """The units of a stage whose recorded reads include the file."""
    return {
        unit_id
        for unit_id, trace in outcome.units.get(stage, {}).items()
        if relpath in dict(trace.reads)
    }


@pytest.mark.parametrize("edited", ["texture.xml", "texture.data"])
def test_one_texture_edit_reruns_only_its_own_work(template, tmp_path, edited):
    """Editing one texture's attributes (or payload) plans and runs the collect shard holding
    the file, the validate units that read it, the cook shard holding its asset, write,
    archive and hash of the bundles holding that asset, and the manifest: nothing for any
    other file (the other assets of the cook shard cook to the same entries)."""
    build_file = checkout(template, tmp_path)
    first = lawkit.build(build_file)
    manifest = json.loads((tmp_path / "build" / "out" / "manifest.json").read_bytes())
    asset_id = next(
        asset
        for asset, entry in sorted(manifest["assets"].items())
        if entry["type"] == "Texture" and entry["bundles"]
    )
    path = next((tmp_path / "project").rglob(f"{asset_id}/{edited}"))
    relpath = path.relative_to(tmp_path / "project").as_posix()
    if edited == "texture.xml":
        text = path.read_text(encoding="utf-8")
        path.write_text(re.sub(r"<Width>\d+<", "<Width>96<", text), encoding="utf-8")
    else:
        path.write_bytes(path.read_bytes() + b"more")
    bundles = set(manifest["assets"][asset_id]["bundles"])
    expected = {
        "collect": readers(first, "collect", relpath),
        "validate": readers(first, "validate", relpath),
        "cook": readers(first, "cook", relpath),
        "write": bundles,
        "archive": bundles,
        "hash": bundles,
        "manifest": {"manifest"},
    }
    # The attribute file is parsed by exactly one shard; no shard reads a payload.
    assert len(expected["collect"]) == (1 if edited == "texture.xml" else 0)
    # The asset is cooked in one shard, with others (the grain changed from one unit per asset).
    (shard,) = expected["cook"]
    assert shard.startswith("<shard ") and len(first.units["cook"]) < len(manifest["assets"])
    expected = {stage: units for stage, units in expected.items() if units}
    again = lawkit.build(build_file)
    assert {stage: set(units) for stage, units in again.planned.items() if units} == expected
    assert {stage: units for stage, units in again.ran.items() if units} == expected


WIDTH_ONLY = """
- {id: width, rpath: '/texture\\.xml$', xpath: 'Texture,Width',
   condition: ['满足表达式', 'all(int(v) <= 4096 for v in d)']}
"""
INDEXED = """
- {id: known, rpath: '/texture\\.xml$', xpath: 'Texture,Width',
   condition: ['满足表达式', 'len(res_store.res_in_disk) > 0']}
"""


def counting_decodes(monkeypatch) -> list[int]:
    """A list that gains an item each time a build decodes the index from the state (from now
    on, as a new process would: no view of an earlier build's index)."""
    decoded: list[int] = []
    get = StoredIndex.get

    def counting(self):
        if not self.loaded:  # the first read of the index in this run
            decoded.append(1)
        return get(self)

    monkeypatch.setattr(StoredIndex, "get", counting)
    functions.forget_views()
    return decoded


LOOKED_UP = """
- {id: looked, rpath: '/texture\\.xml$', xpath: 'Texture,Width',
   condition: ['满足表达式', "not res_filter.ALL_RES.get(d) and d not in res_store.res_in_disk"]}
"""


@pytest.mark.parametrize(
    ("rules", "decodes"),
    [(WIDTH_ONLY, 0), (WIDTH_ONLY + LOOKED_UP, 0), (WIDTH_ONLY + INDEXED, 1)],
)
def test_an_edit_decodes_the_index_only_when_a_rule_it_reruns_reads_it(
    template, tmp_path, monkeypatch, rules, decodes
):
    """Re-checking an edited texture with rules that look at the file alone never reads the
    project index (decoding it from the state takes a second at 100,000 resources), nor do
    rules that look entries up (they read those entries); a rule reading the index whole
    (its size) decodes it."""
    build_file = checkout(template, tmp_path)
    (tmp_path / "rules.yaml").write_text(rules, encoding="utf-8")
    assert lawkit.build(build_file).exit_code in (0, 1)
    decoded = counting_decodes(monkeypatch)
    path = next((tmp_path / "project").rglob("texture.xml"))
    text = path.read_text(encoding="utf-8")
    path.write_text(re.sub(r"<Width>\d+<", "<Width>97<", text), encoding="utf-8")
    again = lawkit.build(build_file)
    assert again.ran.get("validate"), "the edited texture was not checked again"
    assert len(decoded) == decodes


def test_a_watch_warms_the_index_a_skipped_validate_reads_next(template, tmp_path, monkeypatch):
    """A resident session's first build skips validate (nothing changed since the last run)
    and decodes the index then (the stage's `warm` hook), as the watch's later builds hold it:
    the first index edit after the start patches it by the entries it changed instead of
    decoding it whole, and publishes what a clean build publishes."""
    from orchestrator.core.options import RunOptions
    from orchestrator.core.scheduler import run_in_session
    from orchestrator.core.session import Session
    from orchestrator.shell.present import setup_logging
    from orchestrator.shell.runs import load
    from stages.sources import base

    build_file = checkout(template, tmp_path)
    assert lawkit.build(build_file).exit_code in (0, 1)
    functions.forget_views()  # as a new process starts (the watch)
    decoded: list[int] = []
    index_of = base.index_of
    monkeypatch.setattr(base, "index_of", lambda entries: decoded.append(1) or index_of(entries))
    options = RunOptions(executor="local", progress=False)
    settings = load(str(build_file), "local")
    with Session(settings, options, setup_logging("json"), resident=True) as session:
        first = run_in_session(session)
        [check] = [r for r in first.context.reports if r.name == "validate"]
        assert check.skipped and decoded == [1]  # warmed: decoded while nothing waits on it
        story = MessiahChanges(tmp_path).edit_repository(0, 0)
        decoded.clear()
        second = run_in_session(session)
        [check] = [r for r in second.context.reports if r.name == "validate"]
        assert check.built and decoded == [], story  # patched, not decoded whole
    clean = lawkit.build(build_file, "clean/out", "clean/cache")
    assert lawkit.published(settings.output_dir) == lawkit.published(tmp_path / "clean/out")
    assert not clean.error


LEVELS_SELECTED = """
- {id: placed, rpath: artfunc_res_store.ilevels, xpath: 'Level',
   condition: ['满足表达式', 'len(d) >= 0']}
"""


@pytest.mark.parametrize("rules", [WIDTH_ONLY, WIDTH_ONLY + LEVELS_SELECTED])
def test_a_file_added_plans_its_shard_without_decoding_the_index(
    template, tmp_path, monkeypatch, rules
):
    """A file added plans its shard again, and a rule selecting the used levels
    (`rpath: artfunc_res_store.ilevels`) learns them from the index's one entry holding them:
    the index is not decoded whole (2.5 s at 100,000 resources) when no rule re-run reads it.
    What the build publishes is a clean build's."""
    build_file = checkout(template, tmp_path)
    (tmp_path / "rules.yaml").write_text(rules, encoding="utf-8")
    assert lawkit.build(build_file).exit_code in (0, 1)
    decoded = counting_decodes(monkeypatch)
    (tmp_path / "project" / "notes.xml").write_text("<Notes/>", encoding="utf-8")
    again = lawkit.build(build_file)
    assert decoded == []
    clean = lawkit.build(build_file, "clean/out", "clean/cache")
    assert lawkit.differences(again, clean) == []


# -- regressions: changes the laws caught ---------------------------------------------------------


def first_build(template: Path, base: Path) -> tuple[MessiahChanges, lawkit.BuildOutcome]:
    checkout(template, base)
    return MessiahChanges(base), lawkit.build(base / "build.yaml")


def test_a_type_change_that_keeps_the_cooker_reaches_the_manifest(template, tmp_path):
    """An asset whose Type changes but whose cooker does not keeps its cooked payload, and its
    new Type still reaches `cooked_types`, link.xml and the manifest (cook's incremental finish
    patched Types only for units that ran)."""
    changes, before = first_build(template, tmp_path)
    manifest = json.loads((tmp_path / "build" / "out" / "manifest.json").read_bytes())
    asset_id = next(
        asset for asset, entry in sorted(manifest["assets"].items()) if entry["type"] == "Mesh"
    )
    for repository in changes.repositories():
        text = repository.read_text(encoding="utf-8")
        pattern = rf"<Type>Mesh</Type>(?:(?!</Item>).)*<GUID>{asset_id}</GUID>"
        item = re.search(pattern, text, re.S)
        if item:
            edited = item.group(0).replace("<Type>Mesh</Type>", "<Type>Model</Type>")
            repository.write_text(text.replace(item.group(0), edited), encoding="utf-8")
    check_step(tmp_path, 1, before, [f"retype {asset_id}"], settled=False)
    manifest = json.loads((tmp_path / "build" / "out" / "manifest.json").read_bytes())
    assert manifest["assets"][asset_id]["type"] == "Model"


def test_a_rule_severity_change_reaches_the_reports(template, tmp_path):
    """A rule's severity (or id, or name) is not part of its digest, so results are reused; the
    reports still show the new severity (validate's record of the rule library left it out)."""
    changes, before = first_build(template, tmp_path)
    changes.edit_rules(0, 1)
    check_step(tmp_path, 1, before, ["texture-compressed: warning → error"], settled=False)
    report = json.loads((tmp_path / "build" / "out" / "reports" / "validate.json").read_bytes())
    severities = {f["severity"] for f in report["failures"] if f["rule"] == "texture-compressed"}
    assert severities == {"error"}


def test_a_file_added_while_builds_fail_is_seen_once_they_pass(template, tmp_path):
    """A file added during a failing build and changed again before the next one is, for a
    stage whose record is older than both, an added file (the change log was not netted out:
    the later "modified" hid the addition and the asset never listed the file)."""
    changes, before = first_build(template, tmp_path)
    done = [changes.break_repository(0, 0), "build (exit 2)"]
    assert lawkit.build(tmp_path / "build.yaml").exit_code == 2
    done += [changes.add_file(5, 2), "build (exit 2)"]
    assert lawkit.build(tmp_path / "build.yaml").exit_code == 2
    done += [changes.break_repository(0, 0), "build"]  # mended; the new file is racy: modified
    check_step(tmp_path, 1, before, done, settled=False)


# -- the same laws with a Unity project as the source ----------------------------------------------

UNITY_LIBRARY = Path(__file__).resolve().parents[1] / "configs" / "rules" / "unity-common.yaml"
REF_GUID = re.compile(r"guid: ([0-9a-f]{32})")


def unity_project(base: Path) -> Path:
    """A small Unity project: scenes in the build settings, bundles named by `.meta` files, a
    Resources folder, nested prefabs, materials and textures; the starter rule library."""
    root = base / "project"
    scenes = [("Assets/Scenes/Main.unity", 50, True), ("Assets/Scenes/Side.unity", 51, False)]
    write(root, "ProjectSettings/EditorBuildSettings.asset", build_settings(*scenes))
    write(root, "Assets/Scenes/Main.unity", prefab([("m_Hero", 30), ("m_Icon", 3)]), guid(50))
    write(root, "Assets/Scenes/Side.unity", prefab([("m_Rock", 20)]), guid(51))
    write_folder_meta(root, "Assets/UI", guid(1), bundle="ui")
    write(root, "Assets/UI/Button.prefab", prefab([("m_Sprite", 10), ("m_Mat", 20)]), guid(2))
    write(root, "Assets/UI/Icon.png", b"\x89PNG icon", guid(3))
    write(root, "Assets/Shared/Atlas.png", b"\x89PNG atlas", guid(10), bundle="atlas")
    write(root, "Assets/Shared/Moss.png", b"\x89PNG moss", guid(11))
    write(root, "Assets/Shared/Rock.mat", material(10, 11), guid(20))
    write(
        root,
        "Assets/Characters/Hero.prefab",
        prefab([("m_Mat", 20)], nested=[31]),
        guid(30),
        bundle="chars",
    )
    write(root, "Assets/Characters/Sword.prefab", prefab([("m_Icon", 3)]), guid(31))
    write(root, "Assets/Resources/Config.asset", scriptable(3, 10, 20), guid(40))
    write(root, "Assets/Other/Unused.png", b"\x89PNG unused", guid(41))
    shutil.copyfile(UNITY_LIBRARY, base / "rules.yaml")
    build = {
        "project": "project",
        "source": "unity",
        "output": "build/out",
        "cache": "build/cache",
        "executor": {"kind": "local"},
        "bundles": {"from_meta": True, "shared_dependencies": "extract"},
        "rules": {"files": ["rules.yaml"]},
        "hash": {"append_hash": True},
    }
    (base / "build.yaml").write_text(yaml.safe_dump(build, sort_keys=False), encoding="utf-8")
    age(base)
    return base / "build.yaml"


class UnityChanges(MessiahChanges):
    """Changes to the Unity project: references, payloads, `.meta` bundle names, assets added,
    deleted (with or without their `.meta`) and moved, scenes, rules and build settings."""

    TEXT = (".prefab", ".unity", ".mat", ".asset")

    def assets(self) -> list[Path]:
        return sorted(
            p
            for p in self.files()
            if p.suffix != ".meta" and p.is_relative_to(self.root / "Assets")
        )

    def guids(self) -> list[str]:
        return sorted(
            m.group(1)
            for p in self.files()
            if p.suffix == ".meta"
            for m in [re.search(r"^guid: (\w+)", p.read_text(encoding="utf-8"), re.M)]
            if m
        )

    def new_unity_guid(self) -> str:
        return self.new_guid().replace("-", "")

    def edit_refs(self, a: int, b: int) -> str:
        """One reference of a scene, prefab, material or asset now names another asset, or the
        prefab gains a field naming one."""
        path = self.pick([p for p in self.assets() if p.suffix in self.TEXT], a)
        if path is None:
            return "no text asset"
        text = path.read_text(encoding="utf-8")
        target = self.pick(self.guids(), b) or guid(999)
        refs = [m for m in REF_GUID.finditer(text) if not m.group(1).startswith("0" * 16)]
        if b % 2 and refs:
            m = refs[b // 2 % len(refs)]
            text = text[: m.start(1)] + target + text[m.end(1) :]
        elif "MonoBehaviour:\n" in text:
            field = f"  m_Extra{b}: {{fileID: 11400000, guid: {target}, type: 2}}\n"
            text = text.replace("MonoBehaviour:\n", "MonoBehaviour:\n" + field, 1)
        path.write_text(text, encoding="utf-8")
        return f"refs of {path.relative_to(self.root)}"

    def edit_bytes(self, a: int, b: int) -> str:
        path = self.pick([p for p in self.assets() if p.suffix == ".png"], a)
        if path is None:
            return "no texture"
        path.write_bytes(b"\x89PNG " + bytes([b % 256]) * (1 + b % 9))
        return f"rewrite {path.relative_to(self.root)}"

    def edit_meta(self, a: int, b: int) -> str:
        """A `.meta` (of a file or a folder) names another bundle, or none."""
        path = self.pick([p for p in self.files() if p.suffix == ".meta"], a)
        if path is None:
            return "no meta"
        bundle = ("", "ui", "extra", "chars")[b % 4]
        text = re.sub(
            r"assetBundleName:.*", f"assetBundleName: {bundle}", path.read_text(encoding="utf-8")
        )
        path.write_text(text, encoding="utf-8")
        return f"{path.relative_to(self.root)} → bundle {bundle!r}"

    def add_unity_asset(self, a: int, b: int) -> str:
        """A texture, or a prefab naming an asset, beside an existing asset; half in a bundle."""
        near = self.pick(self.assets(), a)
        folder = near.parent if near else self.root / "Assets"
        self.made += 1
        name = f"New{self.made}"
        bundle = "extra" if b % 2 else ""
        if b % 3:
            target = self.pick(self.guids(), b) or guid(999)
            content: str | bytes = prefab([("m_Ref", 0)]).replace(guid(0), target)
            rel = f"{name}.prefab"
        else:
            content, rel = b"\x89PNG new", f"{name}.png"
        path = folder / rel
        write(
            self.root,
            path.relative_to(self.root).as_posix(),
            content,
            self.new_unity_guid(),
            bundle=bundle,
        )
        return f"add {path.relative_to(self.root)}"

    def delete_unity_asset(self, a: int, b: int) -> str:
        """An asset and its `.meta`, the asset alone, or its `.meta` alone."""
        path = self.pick(self.assets(), a)
        if path is None:
            return "no asset"
        meta = path.with_name(path.name + ".meta")
        doomed = [[path, meta], [path], [meta]][b % 3]
        for victim in doomed:
            victim.unlink(missing_ok=True)
        return "delete " + ", ".join(str(v.relative_to(self.root)) for v in doomed)

    def move(self, a: int, b: int) -> str:
        """An asset moved with its `.meta` (its GUID stays), or a folder with its `.meta`."""
        path = self.pick(self.assets(), a)
        if path is None:
            return "no asset"
        if b % 2:
            source, target = path.parent, path.parent.with_name(path.parent.name + f"_{b % 3}")
        else:
            source, target = path, path.with_name(f"{path.stem}_{b % 3}{path.suffix}")
        if target.exists() or source == self.root / "Assets":
            return "target exists"
        source.rename(target)
        meta = source.with_name(source.name + ".meta")
        if meta.exists():
            meta.rename(target.with_name(target.name + ".meta"))
        return f"move {source.relative_to(self.root)} → {target.name}"

    def edit_scenes(self, a: int, b: int) -> str:
        """The build settings list other scenes, or enable and disable them."""
        scenes = [p for p in self.assets() if p.suffix == ".unity"]
        listed = [
            (p.relative_to(self.root).as_posix(), 50 + i, bool((a >> i) & 1))
            for i, p in enumerate(scenes)
        ]
        write(self.root, "ProjectSettings/EditorBuildSettings.asset", build_settings(*listed))
        return f"scenes {[enabled for _, _, enabled in listed]}"

    UNITY_RULE_EDITS = (
        ("condition: ['<=', 2048]", "condition: ['<=', 1024]"),
        ("  severity: warning\n", "  severity: error\n"),
        ("- id: prefab-guids-resolve", "- id: prefab-references-resolve"),
    )

    def edit_unity_rules(self, a: int, b: int) -> str:
        self.RULE_EDITS = self.UNITY_RULE_EDITS
        return self.edit_rules(a, b)

    def edit_unity_build(self, a: int, b: int) -> str:
        build_file = self.base / "build.yaml"
        data = yaml.safe_load(build_file.read_text(encoding="utf-8"))
        choice = b % 4
        if choice == 0:
            edit_build(build_file, bundles={"from_meta": not data["bundles"]["from_meta"]})
        elif choice == 1:
            edit_build(build_file, bundles={"shared_dependencies": ("extract", "duplicate")[a % 2]})
        elif choice == 2:
            edit_build(build_file, hash={"append_hash": not data["hash"]["append_hash"]})
        else:
            edit_build(build_file, archive={"compression": ("zstd", "lz4", "none")[a % 3]})
        return f"build edit {choice}"


UNITY_KINDS = [
    "edit_refs",
    "edit_bytes",
    "edit_meta",
    "add_unity_asset",
    "delete_unity_asset",
    "move",
    "touch",
    "edit_scenes",
    "edit_unity_rules",
    "edit_unity_build",
    "partial_build",
]
UNITY_STEP = st.lists(
    st.tuples(st.sampled_from(UNITY_KINDS), st.integers(0, 999), st.integers(0, 999)),
    min_size=1,
    max_size=3,
)


@pytest.fixture(scope="module")
def unity_template(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("unity-template")
    unity_project(base)
    return base


@pytest.mark.slow
@law_settings(15)
@given(steps=st.lists(UNITY_STEP, min_size=2, max_size=5), settled=st.booleans())
def test_the_laws_with_a_unity_project(unity_template, tmp_path_factory, steps, settled):
    """Incremental equals clean, and only reachable work re-runs, with `source: unity`: edits
    of references and payloads, bundle names in `.meta` files, assets added, deleted and moved
    with or without their `.meta`, scenes, rules and build settings."""
    base = tmp_path_factory.mktemp("unity-laws")
    checkout(unity_template, base)
    run_sequence(base, UnityChanges(base), steps, settled)


def test_a_no_cache_build_drops_the_units_that_went_away(template, tmp_path):
    """A --no-cache build plans every unit afresh; units the project no longer has must leave
    the build state with it (they stayed, and a later change to a file they had read would have
    run them again into the stage's results)."""
    changes, before = first_build(template, tmp_path)
    level = next((tmp_path / "project").rglob("Forest_02.ilevel"))
    level.unlink()
    lawkit.build(tmp_path / "build.yaml", no_cache=True)
    done = [f"delete {level.name}", "build --no-cache", changes.edit_map(0, 0), "build"]
    check_step(tmp_path, 1, before, done, settled=False)
