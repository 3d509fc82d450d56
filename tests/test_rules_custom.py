"""Custom code (`func_str`) in killable worker processes: isolation, time limits, what crosses."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rules_helpers import REPOSITORY, CountedKeyed, make_index, run_rules, write_files

from orchestrator.errors import InternalError
from stages.rules.custom.host import (
    CustomCode,
    CustomCodeError,
    CustomCodeHost,
    close_workers,
    custom_code_host,
)
from stages.rules.functions import IndexView
from stages.rules.sandbox import CustomCodeTimeout

REPOSITORY_FILE = "Repository/resource.repository"


@pytest.fixture
def project(tmp_path) -> Path:
    return write_files(tmp_path / "proj", {REPOSITORY_FILE: REPOSITORY})


@pytest.fixture
def index(project):
    return make_index(project, {})


@pytest.fixture(autouse=True)
def fresh_workers():
    """Each test starts and ends without custom-code workers."""
    close_workers()
    yield
    close_workers()


def rule(**fields) -> dict:
    base = {"id": "r", "rpath": r"resource\.repository$", "xpath": "*/Items/Item,Name"}
    return {**base, **fields}


def element_rules(code: str, *names: str) -> list[dict]:
    """One rule per function of `code`, each checking the items as elements with it."""
    return [
        rule(id=name, xpath="*/Items/Item,{dom}", condition=[f"func_{name}"], func_str=code)
        for name in names
    ]


def only_failure(doc: dict) -> dict:
    assert doc["rule_errors"] == [], doc["rule_errors"]
    [failure] = doc["failures"]
    return failure


def test_custom_code_runs_in_another_process(project, index):
    """A func_str never runs in the validating process (the driver or a Ray worker)."""
    code = "import os\ndef f(**kw):\n    return [os.getpid()]\n"
    failure = only_failure(run_rules(project, [rule(condition=["func_f"], func_str=code)], index))
    [pid] = failure["errors"]
    assert pid != os.getpid()


@pytest.mark.parametrize(
    "body",
    [
        "import time\n    time.sleep(60)",  # one long C call: no signal or trace reaches it
        "return sum(range(10 ** 12))",  # a C loop that holds the interpreter
        "import re\n    re.match('(a*)*b', 'a' * 40)",  # catastrophic backtracking
    ],
)
def test_a_long_c_call_is_stopped_at_the_timeout(project, index, body):
    """Rule code stuck inside one C call is killed at rules.timeout; the source fails, naming it."""
    code = f"def f(**kw):\n    {body}\n"
    started = time.monotonic()
    doc = run_rules(project, [rule(condition=["func_f"], func_str=code)], index, timeout=0.5)
    assert time.monotonic() - started < 20
    failure = only_failure(doc)
    assert failure["rule"] == "r" and failure["errors"] == []
    assert (
        "condition func_f: custom code timed out after 0.5 s (rules.timeout)" in failure["message"]
    )


def test_a_filter_stuck_in_c_is_stopped_too(project, index):
    """A custom filter gets the same limit; the next rule still runs in a fresh worker."""
    slow = rule(
        filter="artfunc_f",
        condition=["exists"],
        func_str=("import time\ndef f(data, filepath):\n    time.sleep(60)\n"),
    )
    fine = rule(
        id="fine", condition=["func_g"], func_str="def g(data, **kw):\n    return data[:1]\n"
    )
    doc = run_rules(project, [slow, fine], index, timeout=0.5)
    messages = {f["rule"]: f for f in doc["failures"]}
    assert "filter artfunc_f: custom code timed out after 0.5 s" in messages["r"]["message"]
    assert messages["fine"]["errors"] == ["Hole_mat"]


@pytest.mark.parametrize(
    "body,message",
    [
        ("import sys\n    sys.exit(0)", "condition func_f raised SystemExit: 0"),
        ("raise KeyboardInterrupt", "condition func_f raised KeyboardInterrupt"),
        ("import os\n    os._exit(3)", "condition func_f ended its worker process (exit status 3)"),
        (
            "import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)",
            "condition func_f ended its worker process (killed by signal 9, SIGKILL)",
        ),
    ],
)
def test_rule_code_that_ends_its_process_is_that_rules_error(project, index, body, message):
    """sys.exit, KeyboardInterrupt raised by rule code, os._exit, a kill: the rule's failure only."""
    code = f"def f(**kw):\n    {body}\n"
    doc = run_rules(
        project,
        [rule(condition=["func_f"], func_str=code), rule(id="ok", condition=["exists"])],
        index,
    )
    failure = only_failure(doc)
    assert failure["rule"] == "r" and message in failure["message"]


def test_sys_exit_while_loading_is_a_rule_error(project, index):
    """func_str whose top level calls sys.exit(0) is a rule error, not the end of the build."""
    doc = run_rules(
        project, [rule(condition=["exists"], func_str="import sys\nsys.exit(0)\n")], index
    )
    [error] = doc["rule_errors"]
    assert error["rule"] == "r" and "func_str raised SystemExit: 0" in error["message"]


def test_prints_in_rule_code_do_not_garble_replies(project, index, capfd):
    """Rule code's prints go to standard error; the reply still arrives."""
    code = "def f(data, **kw):\n    print('noise ' * 1000)\n    return data[:1]\n"
    failure = only_failure(run_rules(project, [rule(condition=["func_f"], func_str=code)], index))
    assert failure["errors"] == ["Hole_mat"]
    assert "noise" not in capfd.readouterr().out


def test_the_index_modules_and_plain_results_cross(project):
    """`import res_store` sees the index in the worker; a NamedTuple comes back as a tuple."""
    index = make_index(project, {"914fa3a0-62cd-4b5a-83df-92fdf494534a": {}})
    code = (
        "import res_store, res_filter, collections\n"
        "Pair = collections.namedtuple('Pair', 'guid known')\n"
        "def f(data, **kw):\n"
        "    return [Pair(g, g in res_store.res_in_repo and g in res_filter.ALL_RES) for g in data]\n"
    )
    doc = run_rules(
        project, [rule(xpath="*/Items/Item,GUID", condition=["func_f"], func_str=code)], index
    )
    errors = only_failure(doc)["errors"]
    assert ["914fa3a0-62cd-4b5a-83df-92fdf494534a", True] in errors
    assert all(isinstance(e, list) and len(e) == 2 for e in errors)


def test_elements_cross_as_copies_and_come_back_with_their_lines(project, index):
    """{dom} elements reach custom code with their subtree and lines; given ones come back as
    themselves, new ones as copies with their lines."""
    code = (
        "def given(data, **kw):\n"
        "    return [e for e in data if e.findtext('Type') == 'Mesh']\n"
        "def child(data, **kw):\n"
        "    return [e.find('Name') for e in data if e.findtext('Type') == 'Model']\n"
        "def parent(data, **kw):\n"
        "    return [str(e.getparent()) for e in data[:1]]\n"
    )
    rules = element_rules(code, *("given", "child", "parent"))
    doc = run_rules(project, rules, index)
    found = {f["rule"]: (f["errors"], f["lines"]) for f in doc["failures"]}
    assert found["given"] == (["<Item> line 20"], [20])
    assert found["child"] == (["<Name> line 34"], [None])
    assert found["parent"] == (["None"], [None])  # the parent stays behind


def test_a_rogue_worker_cannot_run_code_in_the_validating_process(project, index, tmp_path):
    """Rule code that writes a crafted pickle on the reply pipe gets its call refused; nothing runs."""
    sentinel = tmp_path / "escaped"
    code = (
        "import os, pickle, sys\n"
        "from multiprocessing.connection import Connection\n"
        "class Evil:\n"
        "    def __reduce__(self):\n"
        f"        return (os.system, ('touch {sentinel}',))\n"
        "def f(**kw):\n"
        "    Connection(int(sys.argv[2]), readable=False).send_bytes(pickle.dumps(Evil()))\n"
        "    return []\n"
    )
    failure = only_failure(run_rules(project, [rule(condition=["func_f"], func_str=code)], index))
    assert "sent back an unreadable reply" in failure["message"]
    assert "os.system" in failure["message"] or "posix.system" in failure["message"]
    assert not sentinel.exists()


def test_workers_are_reused_and_a_thread_gets_its_own(project, index):
    """Calls reuse an idle worker; concurrent calls get one each; close ends them all."""
    host = custom_code_host()
    view = IndexView(index, str(project), "test-view")
    code = CustomCode("k", "r", "import time\ndef f(**kw):\n    time.sleep(0.5)\n    return [1]\n")
    assert host.define(code, view, 5) == ["f"]
    assert host.call(code, view, "f", "condition", {}, 5) == [1]
    assert len(host.worker_pids()) == 1
    results = []
    threads = [
        threading.Thread(
            target=lambda: results.append(host.call(code, view, "f", "condition", {}, 5))
        )
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[1], [1]]
    pids = host.worker_pids()
    assert len(pids) == 2
    close_workers()
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_closed_worker_ends_without_tearing_down_and_its_prints_arrive(project, index, capfd):
    """Closing the workers does not wait for a teardown: a worker ends at once when its pipe
    closes, without running rule code's exit handlers, after flushing what rule code printed."""
    host = custom_code_host()
    view = IndexView(index, str(project), "test-view")
    slow_exit = (
        "import atexit, sys, time\n"
        "atexit.register(time.sleep, 5)\n"
        "def f(**kw):\n"
        "    sys.stderr.write('unflushed')\n"
        "    return []\n"
    )
    code = CustomCode("exit", "r", slow_exit)
    assert host.define(code, view, 5) == ["f"]
    assert host.call(code, view, "f", "condition", {}, 5) == []
    started = time.monotonic()
    close_workers()
    assert time.monotonic() - started < 2
    assert "unflushed" in capfd.readouterr().err


def test_a_timed_out_worker_is_killed_and_replaced(project, index):
    """The worker of a call past its timeout is gone; the next call starts a fresh one."""
    host = custom_code_host()
    view = IndexView(index, str(project), "test-view")
    code = CustomCode(
        "k2",
        "r",
        "import time\ndef slow(**kw):\n    time.sleep(60)\ndef fast(**kw):\n    return 7\n",
    )
    host.define(code, view, 5)
    [first] = host.worker_pids()
    with pytest.raises(CustomCodeTimeout):
        host.call(code, view, "slow", "condition", {}, 0.3)
    assert host.worker_pids() == []
    with pytest.raises(ChildProcessError):
        os.waitpid(first, os.WNOHANG)
    with pytest.raises(CustomCodeError, match="returned int, not a list of failing values"):
        host.call(code, view, "fast", "condition", {}, 5)
    assert host.worker_pids() != [first]


@pytest.mark.ray
def test_on_ray_custom_code_runs_beside_the_ray_worker_not_in_it(tmp_path, ray_local):
    """Units on Ray call their func_str in a custom-code worker that the Ray worker started."""
    import json
    import shutil

    import psutil
    import yaml
    from buildkit import TESTS, run_inprocess

    case = tmp_path / "case"
    shutil.copytree(TESTS / "data" / "bad" / "_base", case)
    code = (
        "import os, sys\n"
        "def where(**kw):\n"
        "    return [sys.argv[0].replace(os.sep, '/').endswith('rules/custom/worker.py'),\n"
        "            os.getppid()]\n"
    )
    rules = [
        {
            "id": "where",
            "rpath": "texture\\.xml$",
            "xpath": "Texture,Width",
            "condition": ["func_where"],
            "func_str": code,
        }
    ]
    (case / "rules.yaml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    assert run_inprocess("run", str(case / "build.yaml"), "--executor", "ray") == 1
    report = json.loads((case / "build" / "out" / "reports" / "validate.json").read_text())
    [failure] = report["failures"]
    in_custom_worker, parent = failure["errors"]
    assert in_custom_worker is True and parent != os.getpid()
    assert any("ray" in part.lower() for part in psutil.Process(parent).cmdline())


# -- large files, and whose fault a failure is ---------------------------------------------------


def test_elements_past_line_65535_reach_custom_code_with_their_lines(tmp_path):
    """lxml stores a line a program sets in 16 bits: a copy of an element past line 65,535
    (every repository of a large project has them) still tells custom code its line, and comes
    back with it, given or new."""
    items = "".join(f"    <Item><Name>n{i}</Name></Item>\n" for i in range(5))
    padding = "\n" * 70_000  # whitespace between elements: the items start past line 70,000
    xml = f"<Repository>\n  <Items>{padding}\n{items}  </Items>\n</Repository>\n"
    first = xml.splitlines().index("    <Item><Name>n0</Name></Item>") + 1
    assert first > 70_000
    project = write_files(tmp_path / "big", {REPOSITORY_FILE: xml})
    code = (
        "def lines(data, **kw):\n"
        "    return [[e.findtext('Name'), e.sourceline, e[0].sourceline] for e in data[-2:]]\n"
        "def given(data, **kw):\n"
        "    return [e for e in data if e.findtext('Name') == 'n4']\n"
        "def child(data, **kw):\n"
        "    return [e.find('Name') for e in data if e.findtext('Name') == 'n3']\n"
    )
    rules = element_rules(code, *("lines", "given", "child"))
    doc = run_rules(project, rules, make_index(project, {}))
    assert doc["rule_errors"] == []
    found = {f["rule"]: f for f in doc["failures"]}
    assert found["lines"]["errors"] == [["n3", first + 3, first + 3], ["n4", first + 4, first + 4]]
    assert (found["given"]["errors"], found["given"]["lines"]) == (
        [f"<Item> line {first + 4}"],
        [first + 4],
    )
    assert found["child"]["errors"] == [f"<Name> line {first + 3}"]


FAULT_IN_THE_WORKER = """
import stages.rules.custom.crossing as crossing

def element_from(xml, lines):
    raise RuntimeError("injected fault in the worker's own code")

crossing.element_from = element_from
"""


@pytest.fixture
def faulty_workers(tmp_path, monkeypatch):
    """Custom-code workers started from now on fail in their own code (not the rule's) when
    they rebuild an element; the fixture's end puts things back."""
    folder = tmp_path / "fault"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text(FAULT_IN_THE_WORKER, encoding="utf-8")
    close_workers()
    monkeypatch.syspath_prepend(str(folder))  # a worker's import path is this process's
    yield
    close_workers()


def test_a_failure_of_the_workers_own_code_is_an_internal_error_not_a_result(
    project, index, faulty_workers
):
    """The worker's code failing is named as orchestrate's bug (exit 3), not as the rule's."""
    code = "def f(data, **kw):\n    return [e.tag for e in data]\n"
    with pytest.raises(InternalError) as caught:
        run_rules(project, [rule(xpath="*/Items/Item,{dom}", condition=["func_f"], func_str=code)])
    assert caught.value.exit_code == 3
    message = str(caught.value)
    assert "a bug in orchestrate" in message and "not in the rule" in message
    assert "RuntimeError: injected fault in the worker's own code" in message
    assert "sitecustomize.py" in message  # where it failed


def test_an_internal_error_in_a_worker_ends_the_build_and_is_not_cached(
    tmp_path, faulty_workers, monkeypatch, capsys
):
    """`orchestrate run` exits 3 naming the internal error; nothing is stored for the rule, so
    the next run (the fault gone) runs it and finds what it finds."""
    import json
    import shutil
    import sys

    import yaml
    from buildkit import TESTS, run_inprocess

    case = tmp_path / "case"
    shutil.copytree(TESTS / "data" / "bad" / "_base", case)
    code = "def tags(data, **kw):\n    return [e.tag for e in data]\n"
    rules = [
        {
            "id": "tags",
            "rpath": "texture\\.xml$",
            "xpath": "Texture,{dom}",
            "condition": ["func_tags"],
            "func_str": code,
        }
    ]
    (case / "rules.yaml").write_text(yaml.safe_dump(rules), encoding="utf-8")
    build = str(case / "build.yaml")
    assert run_inprocess("run", build) == 3
    err = capsys.readouterr().err
    assert "internal error (a bug in orchestrate" in err
    assert "injected fault in the worker's own code" in err
    close_workers()
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not p.endswith("fault")])
    assert run_inprocess("run", build) == 1
    report = json.loads((case / "build" / "out" / "reports" / "validate.json").read_text())
    [failure] = report["failures"]
    assert failure["rule"] == "tags" and failure["errors"] == ["Texture"]


def test_a_failure_of_this_processs_own_code_is_an_internal_error_too(project, index, monkeypatch):
    """On the validating side as well: a request that cannot be sent, or the engine failing
    around a condition, stops the check as orchestrate's bug instead of failing the rule."""
    import stages.rules.conditions as conditions
    import stages.rules.custom.host as host

    def cannot_send(message):
        raise TypeError("injected fault while sending")

    monkeypatch.setattr(host, "dump_request", cannot_send)
    code = "def f(data, **kw):\n    return data\n"
    with pytest.raises(InternalError, match="injected fault while sending"):
        run_rules(project, [rule(condition=["func_f"], func_str=code)], index)
    monkeypatch.undo()

    def broken_unique(values, lines):
        raise TypeError("injected fault in the engine")

    monkeypatch.setattr(conditions, "_unique", broken_unique)
    with pytest.raises(TypeError, match="injected fault in the engine"):
        run_rules(project, [rule(condition=["unique"])], index)


# -- an index patched in a worker ------------------------------------------------------------------

#: Custom code that answers with all it sees of the index: every set in its order, the levels.
WHOLE_INDEX_CODE = """
import res_store
def seen(**kw):
    return [
        [[g, [[r.Name, r.Package, list(r.Deps)] for r in items]] for g, items in res_store.res_in_repo.items()],
        [[p, [r.GUID for r in items]] for p, items in res_store.res_virt_info.items()],
        sorted(res_store.ilevels),
    ]
"""

GUIDS = [f"{n:08x}-0000-4000-8000-000000000000" for n in range(12)]
RESOURCE = st.fixed_dictionaries(
    {
        "name": st.sampled_from(["a", "b", "英雄", "c_1"]),
        "package": st.sampled_from(["P", "Q"]),
        "deps": st.lists(st.sampled_from(GUIDS), max_size=3),
    }
)
INDEXES = st.lists(
    st.tuples(st.dictionaries(st.sampled_from(GUIDS), RESOURCE, max_size=8), st.booleans()),
    min_size=2,
    max_size=5,
)


def stored_view(root: Path, resources: dict, level: bool, key: str) -> IndexView:
    """A view of an index as validate makes it: stored by entry, decoded when read."""
    from orchestrator import Keyed
    from stages.rules.functions import StoredIndex
    from stages.sources.base import index_of

    index = make_index(root, resources, ("L1",) if level else ())
    entries = Keyed("index", memory=index.entries())
    stored = StoredIndex(lambda: index_of(entries), key, True, entries=entries)
    return IndexView(stored, str(root), key)


def seen_by_a_fresh_worker(code: CustomCode, view: IndexView):
    """What `code`'s function `seen` answers in a worker of a new host, sent the index whole."""
    fresh = CustomCodeHost()
    try:
        return fresh.call(code, view, "seen", "condition", {}, 10)
    finally:
        fresh.close()


def noted_index_frames(host: CustomCodeHost) -> list[str]:
    """The keys of the views whose whole index `host` makes a frame of, from now on."""
    made: list[str] = []
    real = host._index_frame

    def noting(view):
        made.append(view.key)
        return real(view)

    host._index_frame = noting  # type: ignore[method-assign]
    return made


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each example starts workers
)
@given(indexes=INDEXES)
def test_a_worker_patched_from_index_to_index_sees_what_one_sent_it_whole_sees(
    tmp_path_factory, indexes
):
    """A worker holding an earlier index is sent only the entries that differ (a resident
    build after an edit): what custom code sees of the index (each set in order, the levels) is
    what a fresh worker sent the same index whole sees."""
    root = tmp_path_factory.mktemp("patched")
    code = CustomCode("k", "r", WHOLE_INDEX_CODE)
    host = custom_code_host()
    host.patch_indexes(True)  # as in orchestrate watch
    sent: list[str] = []
    seen: list = []
    real = host._patch_frame

    def noting(worker, view):
        frame = real(worker, view)
        sent.append("patch" if frame is not None else "whole")
        return frame

    host._patch_frame = noting  # type: ignore[method-assign]
    try:
        for step, (resources, level) in enumerate(indexes):
            view = stored_view(root, resources, level, f"v{step}")
            patched = host.call(code, view, "seen", "condition", {}, 10)
            whole = seen_by_a_fresh_worker(code, stored_view(root, resources, level, "w"))
            assert patched == whole, step
            seen.append(whole)
        # The first index again: the worker forgot it (it keeps two), and is sent it anew.
        first = stored_view(root, *indexes[0], "v0")
        assert host.call(code, first, "seen", "condition", {}, 10) == seen[0]
    finally:
        close_workers()
    assert sent[0] == "whole" and set(sent[1:]) <= {"patch"}, sent


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],  # each example starts workers
)
@given(indexes=INDEXES, extra=st.sets(st.sampled_from(GUIDS), max_size=3))
def test_a_worker_told_which_entries_changed_reads_only_their_digests(
    tmp_path_factory, indexes, extra
):
    """Told which entries changed since the index the stage last ran with (validate's index
    changes: an `IndexEdit`, a superset of the keys that differ), the host makes the patch from
    their digests alone, without reading every entry's, and the worker sees what one sent the
    index whole sees."""
    from orchestrator import Keyed
    from stages.rules.functions import StoredIndex, view_key
    from stages.rules.keyed_index import IndexEdit
    from stages.rules.traced import PREFIXES
    from stages.sources.base import index_of

    root = tmp_path_factory.mktemp("told")
    code = CustomCode("k", "r", WHOLE_INDEX_CODE)
    host = custom_code_host()
    host.patch_indexes(True)
    previous: dict | None = None
    try:
        for step, (resources, level) in enumerate(indexes):
            entries = make_index(root, resources, ("L1",) if level else ()).entries()
            edit = None
            if previous is not None:
                differing = {
                    k for k in entries.keys() | previous.keys() if entries.get(k) != previous.get(k)
                }
                edit = IndexEdit(
                    f"t{step - 1}",
                    frozenset(differing | {PREFIXES["res_in_repo"] + g for g in extra}),
                )
            keyed = Keyed("index", memory=entries)
            stored = StoredIndex(
                lambda keyed=keyed: index_of(keyed), f"t{step}", True, entries=keyed, edit=edit
            )
            view = IndexView(stored, str(root), view_key(f"t{step}", str(root)))
            with CountedKeyed() as counted:
                told = host.call(code, view, "seen", "condition", {}, 10)
            assert counted.calls == (1 if step == 0 else 0), step  # the first is sent whole
            whole = seen_by_a_fresh_worker(code, stored_view(root, resources, level, "w"))
            assert told == whole, step
            previous = entries
    finally:
        close_workers()


@pytest.mark.parametrize(
    "source, touches",
    [
        ("def f(**kw):\n    return []\n", False),
        ("import res_store\ndef f(**kw):\n    return list(res_store.res_in_repo)\n", False),
        ("import res_store\nN = len(res_store.res_in_repo)\ndef f(**kw):\n    return []\n", True),
        ("from res_filter import guidToRealPath\ndef g(**kw):\n    return []\n", True),
        (
            "import res_store\ntry:\n    K = list(res_store.res_in_repo)\nexcept Exception:\n"
            "    K = []\nif K:\n    def f(**kw):\n        return K\n",
            True,
        ),
    ],
)
def test_names_are_learned_without_the_index_unless_the_top_level_reads_it(
    project, index, source, touches
):
    """Loading rules learns a func_str's names without sending the index to a worker (a
    fresh checkout whose units all come from the cache never sends it); a top level that reads
    the index, even one that catches what it gets, is run again with it: the names are those
    the code defines with the index either way."""
    host = custom_code_host()
    sent: list[str] = []
    real = host._send_index

    def noting(worker, view):
        sent.append(view.key)
        return real(worker, view)

    host._send_index = noting  # type: ignore[method-assign]
    view = IndexView(index, str(project), "names-view")
    names = host.define(CustomCode("k", "r", source), view, 10)
    assert bool(sent) == touches
    fresh = CustomCodeHost()
    try:
        with fresh._worker() as worker:
            fresh._send_index(worker, view)
            expected = worker.request(("define", "k", view.key, "r", source), 10)
    finally:
        fresh.close()
    assert names == expected


def test_a_top_level_error_without_the_index_is_the_rules_error(project, index):
    """A func_str whose top level fails without touching the index fails as it does with it."""
    view = IndexView(index, str(project), "names-view")
    with pytest.raises(CustomCodeError, match="raised ZeroDivisionError"):
        custom_code_host().define(CustomCode("k", "r", "X = 1 / 0\n"), view, 10)


def test_a_build_that_is_not_resident_sends_each_index_whole(tmp_path):
    """`orchestrate run` builds once: the host keeps no entry digests to patch against (reading
    them is a pass over the index's rows) and a worker is sent each index whole."""
    code = CustomCode("k", "r", WHOLE_INDEX_CODE)
    host = custom_code_host()
    made = noted_index_frames(host)
    first = {GUIDS[0]: {"name": "a", "package": "P", "deps": []}}
    second = {**first, GUIDS[1]: {"name": "b", "package": "P", "deps": [GUIDS[0]]}}
    for step, resources in enumerate((first, second)):
        host.call(
            code, stored_view(tmp_path, resources, False, f"s{step}"), "seen", "condition", {}, 10
        )
    assert made == ["s0", "s1"] and host._index_digests == {}


def test_a_stored_index_is_decoded_by_the_worker_alone(tmp_path):
    """In a one-off run the index is in the build state: the worker is sent its entries as
    stored (codec bytes, checked here) and decodes them; this process never decodes the index
    for it (that and pickling it doubled the cost at 100,000 resources), and custom code sees
    what it sees of the index sent whole."""
    from test_cache_entries import open_state

    from orchestrator import Keyed
    from stages.rules.functions import StoredIndex
    from stages.sources.base import index_of

    code = CustomCode("k", "r", WHOLE_INDEX_CODE)
    resources = {
        GUIDS[0]: {"name": "a", "package": "P", "deps": []},
        GUIDS[1]: {"name": "英雄", "package": "Q", "deps": [GUIDS[0]]},
    }
    index = make_index(tmp_path, resources, ("L1",))
    state = open_state(tmp_path)
    host = custom_code_host()
    try:
        state.values.replace_entries("index", index.entries())
        entries = Keyed("index", state.values)
        decoded: list[bool] = []

        def load():
            decoded.append(True)
            return index_of(entries)

        view = IndexView(StoredIndex(load, "stored", True, entries=entries), str(tmp_path), "s")
        assert host._index_frame(view).find(b"encoded") >= 0
        seen = host.call(code, view, "seen", "condition", {}, 10)
        assert decoded == []
        whole = host.call(
            code, stored_view(tmp_path, resources, True, "w"), "seen", "condition", {}, 10
        )
        assert seen == whole and len(seen[0]) == 2 and len(seen[2]) == 1
    finally:
        close_workers()
        state.close()
        state.values.blobs.close()


def test_an_index_sent_ahead_is_the_one_the_next_call_finds_loaded(tmp_path):
    """`preload` sends a worker the index and goes on without waiting (validate does it when
    an index edit will re-run the rules whose custom code reads it): the next call leases that
    worker, reads the load's reply first, and sees what a worker sent the index at the call
    sees; the index is sent once, and a second preload of it sends nothing."""
    resources = {GUIDS[0]: {"name": "a", "deps": [GUIDS[1]]}, GUIDS[1]: {"name": "b"}}
    code = CustomCode("k", "r", WHOLE_INDEX_CODE)
    host = custom_code_host()
    frames = noted_index_frames(host)
    view = stored_view(tmp_path, resources, True, "ahead")
    host.preload(view)
    host.preload(view)
    [worker] = host._idle
    assert worker.loading and frames == ["ahead"]
    ahead = host.call(code, view, "seen", "condition", {}, 10)
    assert not worker.loading and host._idle == [worker] and frames == ["ahead"]
    fresh = CustomCodeHost()
    try:
        assert ahead == fresh.call(
            code, stored_view(tmp_path, resources, True, "w"), "seen", "condition", {}, 10
        )
    finally:
        fresh.close()


def test_a_worker_lost_while_loading_ahead_is_replaced_at_the_call(tmp_path):
    """A worker that dies while it loads an index sent ahead is an internal error of that
    lease only: it is dropped, and the call after it starts a worker that is sent the index."""
    code = CustomCode("k", "r", WHOLE_INDEX_CODE)
    host = custom_code_host()
    view = stored_view(tmp_path, {GUIDS[0]: {"name": "a"}}, False, "lost")
    host.preload(view)
    [worker] = host._idle
    worker.process.kill()
    with pytest.raises(InternalError, match="loaded the project's index"):
        host.call(code, view, "seen", "condition", {}, 10)
    assert host._idle == [] and not worker.alive
    assert host.call(code, view, "seen", "condition", {}, 10)[0][0][0] == GUIDS[0]


def test_closing_does_not_wait_for_a_worker_still_loading(tmp_path):
    """A build whose custom-code units all came from the cache closes its workers at once,
    one still decoding an index sent ahead included."""
    host = custom_code_host()
    host.preload(stored_view(tmp_path, {GUIDS[0]: {"name": "a"}}, False, "closing"))
    [worker] = host._idle
    close_workers()
    assert not worker.alive
