"""The report of a build that differs from the last one only in some bundles' files (an asset
cooked again), made by patching what the last render kept instead of reading every file of
the output folder again.

The last render keeps its page data (`report-content.cache`), its build state
(`build-state.json`) and the manifest both were made from. When the new manifest differs from
that one in bundles' file fields alone (`bundle_file_changes` proves it by comparing the bytes)
and the cook list and link.xml are the same files, what moves is known exactly: those bundles'
columns, the assets whose first copy they hold (read from the new tables of contents), the byte
figures, the rule failures when validate.json changed, and the state's rows for those bundles
and assets. Anything else makes the caller render from the files as before; a test checks
that both ways give the same page data, state and changes.
"""

from __future__ import annotations

from bisect import bisect_left
from pathlib import Path
from typing import NamedTuple

from orchestrator import ProjectError, digest_file
from stages.publishing.manifests import FileFieldsChange

from .diff import PatchDiff, diff_states
from .outputs import LOOSE_FILES, VALIDATE_JSON, read_json, read_toc
from .pagedata import failures_of, file_columns, size_figures
from .state import ENTRY_HASH_LEN, BuildState


class PatchedReport(NamedTuple):
    data: dict  # the page data
    figures: dict
    state: dict  # the build state document (BuildState.to_json's shape)
    diff: PatchDiff  # against the last render's state


def patch_report(
    output_dir: Path,
    data: dict,
    figures: dict,
    state: dict,
    changes: dict[str, FileFieldsChange],
    validation_changed: bool,
) -> PatchedReport | None:
    """The last render's page data, figures and state with `changes` applied (all three are
    modified in place); None when a change is not one this knows how to apply exactly."""
    if figures.get("unreadable_bundles"):
        return None
    bundles, assets = data["bundles"], data["assets"]
    position = {name: i for i, name in enumerate(bundles["name"])}
    state_ids = state["assets"]["id"]
    before_rows: dict[str, list] = {}
    touched: set[str] = set()
    for name, change in sorted(changes.items()):
        i = position.get(name)
        if i is None or str(i) in bundles["errors"] or name not in state["bundles"]:
            return None
        fields = file_columns(name, change.after)
        bundles["file"][i], bundles["size"][i] = fields.file, fields.size
        bundles["hash"][i] = fields.hash
        after = change.after
        state["bundles"][name] = [
            after["file"],
            after["size"],
            after["content_hash"],
            after["raw_hash"],
        ]
        try:
            entries = read_toc(output_dir, after["file"])
        except ProjectError:
            return None
        members = {assets["id"][m]: m for m in bundles["assets"][i]}
        if sorted(members) != sorted(entry.id for entry in entries):
            return None  # the bundle's assets moved: not a change of its file alone
        for entry in entries:
            row = members[entry.id]
            held = assets["bundle"][row]
            first = min(held) if isinstance(held, list) else held
            at = bisect_left(state_ids, entry.id)
            if first < 0 or not entry.name or at == len(state_ids) or state_ids[at] != entry.id:
                return None
            if first == i:
                assets["name"][row], assets["size"][row] = entry.name, entry.stored_size
                assets["raw"][row] = entry.size
            if state["assets"]["bundles"][at][0] == name:
                before_rows.setdefault(entry.id, _state_row(state, at))
                _set_state_row(state, at, entry.name, entry.hash, entry.stored_size)
            touched.add(entry.id)
    if validation_changed:
        data["validation"] = failures_of(read_json(output_dir, VALIDATE_JSON))
    figures.update(size_figures(output_dir, data))
    old_loose = dict(state["loose"])
    for relpath in LOOSE_FILES:
        path = output_dir / relpath
        if path.is_file():
            state["loose"][relpath] = [path.stat().st_size, digest_file(str(path))]
        else:
            state["loose"].pop(relpath, None)
    diff = diff_states(
        _partial(state, touched, before_rows, old_loose, changes),
        _partial(state, touched, {}, state["loose"], {}),
    )
    return PatchedReport(data, figures, state, diff)


def _state_row(state: dict, at: int) -> list:
    columns = state["assets"]
    return [columns["name"][at], columns["bundles"][at], columns["hash"][at], columns["size"][at]]


def _set_state_row(state: dict, at: int, name: str, payload_hash: str, size: int) -> None:
    columns = state["assets"]
    columns["name"][at], columns["hash"][at] = name, payload_hash[:ENTRY_HASH_LEN]
    columns["size"][at] = size


def _partial(
    state: dict,
    touched: set[str],
    rows: dict[str, list],
    loose: dict,
    changes: dict[str, FileFieldsChange],
) -> BuildState:
    """The state with every bundle but only the touched assets (the others are the same on
    both sides, so the comparison of two such states is the comparison of the whole ones);
    `rows` and `changes` give the values before the patch."""
    ids = state["assets"]["id"]
    columns: dict[str, list] = {key: [] for key in state["assets"]}
    for asset in sorted(touched):
        at = bisect_left(ids, asset)
        row = rows.get(asset) or _state_row(state, at)
        for key, value in zip(("id", "name", "bundles", "hash", "size"), (asset, *row)):
            columns[key].append(value)
    bundles = dict(state["bundles"])
    for name, change in changes.items():
        before = change.before
        bundles[name] = [
            before["file"],
            before["size"],
            before["content_hash"],
            before["raw_hash"],
        ]
    return BuildState.from_json(
        {
            "format": state["format"],
            "bundles": bundles,
            "assets": columns,
            "loose": loose,
            "link_types": state["link_types"],
        }
    )
