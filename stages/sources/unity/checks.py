"""Rule checks for Unity projects, registered in the entry-point group `orchestrate.checks`.

`["condfunc.unity_guid_resolves"]` fails every value that is not a GUID naming something that
exists: a GUID no `.meta` declares (unless it is one of Unity's built-in resource files or a
script the Unity source found outside the project, in a package), and a GUID whose `.meta`
remains but whose asset file is gone. Scripts count as present: program code is not content. The
check reads the Unity project index, so the rule's results are cached against its digest.
"""

from __future__ import annotations

from .classes import is_code
from .reader import is_builtin_guid

_HEX = frozenset("0123456789abcdef")


def guid_resolves(data: list, filepath: str, condition: list, context=None) -> list:
    """The values that name no existing asset of this project (malformed GUIDs included)."""
    index = getattr(getattr(context, "view", None), "index", None)
    if index is None or not all(hasattr(index, n) for n in ("path_of", "external", "orphans")):
        raise ValueError("condfunc.unity_guid_resolves needs a Unity project index (source: unity)")
    external, orphans = set(index.external), set(index.orphans)
    return [
        value
        for value in data
        if not _resolves(str(value).strip().lower(), index, external, orphans)
    ]


def _resolves(guid: str, index, external: set[str], orphans: set[str]) -> bool:
    if len(guid) != 32 or not set(guid) <= _HEX:
        return False
    path = index.path_of(guid)
    if path is None:
        return guid in external or is_builtin_guid(guid)
    return path not in orphans or is_code(path)
