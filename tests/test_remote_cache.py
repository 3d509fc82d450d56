"""The cache as a service a farm already runs (orchestrator/cache/remote.py): a real nginx with its
WebDAV methods on a loopback port (remotekit.py) behind each build's own cache folder.

A fresh agent builds from the server alone; a forged entry or blob on the server is refused;
a server that is down or hangs never fails a build (one line, a bounded wait); the incremental
law holds across the server; the header that authenticates to it reaches it and is never shown.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import lawkit
import pytest
import urllib3
import yaml
from buildkit import cli_env, edit_build, make_project, published, run_cli
from hypothesis import given
from hypothesis import strategies as st
from remotekit import TOKEN, free_port, silent_server, start_nginx, stop, stored
from test_incremental_laws import STEP, MessiahChanges, aged_project, law_settings, settle

from orchestrator.cache import Cache, EntryKey
from orchestrator.cache.actions import _signed
from orchestrator.cache.remote import (
    AC,
    CAS,
    BlobAddress,
    RemoteEntry,
    RemoteSettings,
    RemoteStore,
    action_key,
    blob_key,
    row_check,
)
from orchestrator.core.config import load_build
from orchestrator.core.stageentries import WHOLE
from orchestrator.errors import ConfigError
from orchestrator.hashing import digest_bytes

KEY = b"0123456789abcdef0123456789abcdef"
KEY_ENV = "ORCHESTRATE_TEST_CACHE_KEY"
AUTH_ENV = "ORCHESTRATE_TEST_FARM_AUTH"
EVIL = b"EVIL-PAYLOAD: written to the cache server by someone without the farm's key"
UNAVAILABLE = "unavailable ("


@pytest.fixture(autouse=True)
def farm_key(monkeypatch):
    """The farm's key, in the environment of in-process builds as of the CLI's."""
    monkeypatch.setenv(KEY_ENV, KEY.decode())


@pytest.fixture(scope="module")
def nginx(tmp_path_factory):
    proc, server = start_nginx(tmp_path_factory.mktemp("nginx"))
    yield server
    stop(proc)


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A generated project's build file (each test builds copies of it)."""
    return make_project(tmp_path_factory.mktemp("farm"), 120, 5, executor={"kind": "local"})


def agent(project: Path, checkout: Path, cache: Path, remote: dict | None, **cache_keys) -> Path:
    """A build agent's checkout of the project at `checkout`, its own cache folder and the
    server (`remote`): a fresh agent has no output folder and an empty cache folder."""
    if not checkout.exists():
        shutil.copytree(project.parent, checkout, ignore=shutil.ignore_patterns("build"))
    shutil.rmtree(checkout / "build", ignore_errors=True)
    settings = {"path": str(cache), **cache_keys}
    if remote is not None:
        settings["remote"] = remote
    data = yaml.safe_load((checkout / project.name).read_text(encoding="utf-8"))
    data["cache"] = settings
    (checkout / project.name).write_text(yaml.safe_dump(data, allow_unicode=True), "utf-8")
    return checkout / project.name


def build(build_file: Path, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    proc = run_cli("run", str(build_file), env=cli_env(**{KEY_ENV: KEY.decode(), **env}))
    return proc, time.monotonic() - started


def lines(proc: subprocess.CompletedProcess, text: str) -> list[str]:
    return [line for line in proc.stderr.splitlines() if text in line]


# -- the build file ----------------------------------------------------------------------------------
def _build_file(tmp_path: Path, cache) -> Path:
    (tmp_path / "project").mkdir(exist_ok=True)
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump({"project": "project", "cache": cache}), encoding="utf-8")
    return path


def test_the_remote_is_an_address_or_its_settings(tmp_path, monkeypatch):
    """`cache.remote: URL` or a mapping; the header's value is read from the environment when
    a build asks for it; no remote is the default."""
    assert load_build(_build_file(tmp_path, "c")).cache_remote() is None
    plain = load_build(_build_file(tmp_path, {"remote": "http://cache.farm:8080"}))
    assert plain.cache_remote() == RemoteSettings("http://cache.farm:8080/")
    monkeypatch.setenv(AUTH_ENV, f"Bearer {TOKEN}")
    full = load_build(
        _build_file(
            tmp_path,
            {
                "remote": {
                    "url": "https://cache.farm/orchestrate/",
                    "header_env": AUTH_ENV,
                    "timeout": 2.5,
                    "connect_timeout": 0.5,
                    "upload": False,
                }
            },
        )
    ).cache_remote()
    assert full == RemoteSettings(
        "https://cache.farm/orchestrate/", "Authorization", f"Bearer {TOKEN}", 0.5, 2.5, False
    )
    assert TOKEN not in repr(full)


@pytest.mark.parametrize(
    ("remote", "key", "message"),
    [
        ("ftp://cache.farm/", "cache.remote.url", "expected an http:// or https:// address"),
        ("http:///nohost", "cache.remote.url", "expected an http:// or https:// address"),
        ("http://user:pw@cache.farm/", "cache.remote.url", "holds credentials"),
        ("http://cache.farm/?a=1", "cache.remote.url", "query or a fragment"),
        ("http://cache.farm:port/", "cache.remote.url", "Port could not be cast"),
        ({"url": "http://c/", "timeout": 0}, "cache.remote.timeout", "greater than 0"),
        ({"url": "http://c/", "header": "Bad Header"}, "cache.remote.header", "header name"),
        ({"url": "http://c/", "tiemout": 1}, "cache.remote.tiemout", "did you mean 'timeout'"),
    ],
)
def test_a_bad_remote_names_the_file_the_line_and_the_key(tmp_path, remote, key, message):
    with pytest.raises(ConfigError) as refused:
        load_build(_build_file(tmp_path, {"path": "c", "remote": remote}))
    assert message in refused.value.message
    assert refused.value.key == key and refused.value.file == str(tmp_path / "build.yaml")
    assert refused.value.line is not None


@pytest.mark.parametrize("value", [None, "Bearer a\nX-Injected: 1", "Bearer 令牌"])
def test_a_header_that_cannot_be_sent_names_the_variable(tmp_path, monkeypatch, value):
    """Unset, or holding what no header may (a line break would add a header of its own)."""
    if value is None:
        monkeypatch.delenv(AUTH_ENV, raising=False)
    else:
        monkeypatch.setenv(AUTH_ENV, value)
    path = _build_file(tmp_path, {"remote": {"url": "http://c/", "header_env": AUTH_ENV}})
    with pytest.raises(ConfigError) as refused:
        load_build(path).cache_remote()
    assert refused.value.key == "cache.remote.header_env" and AUTH_ENV in refused.value.message
    assert "令牌" not in refused.value.message


def test_help_and_the_cache_modules_do_not_import_the_http_client():
    """urllib3 is imported when a build names a remote, not before."""
    code = (
        "import sys; from orchestrator.shell.cli import main\ntry:\n main(['--help'])\n"
        "except SystemExit: pass\nimport orchestrator.cache, orchestrator.core.config\n"
        "print('urllib3' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().endswith("False")


# -- a fresh agent -----------------------------------------------------------------------------------
def test_a_fresh_agent_builds_from_the_server_alone(tmp_path, project, nginx):
    """Agent A builds into its own cache folder and the server; agent B, a fresh machine with
    the same checkout (its own empty cache folder, no output folder), runs no unit at all and
    publishes A's bytes. The server holds what the protocol says: content under the SHA-256 of
    its bytes (bazel-remote checks that), every key 64 hex digits."""
    url, folder = nginx.folder()
    checkout = tmp_path / "workspace"
    first = agent(project, checkout, tmp_path / "cache-a", url, key_env=KEY_ENV)
    built, _ = build(first)
    assert "Traceback" not in built.stderr and not lines(built, UNAVAILABLE), built.stderr[-3000:]
    outputs = published(checkout / "build" / "out")

    content, keys = stored(folder, CAS), stored(folder, AC)
    assert content and keys
    assert all(BlobAddress.of(data).sha256 == name for name, data in content.items())
    assert all(len(name) == 64 and int(name, 16) >= 0 for name in [*content, *keys])

    second = agent(project, checkout, tmp_path / "cache-b", url, key_env=KEY_ENV)
    # a dry run finds every unit on the server, and keeps nothing it fetched, here or there
    server = lawkit.footprint(folder)
    dry = run_cli("run", str(second), "--dry-run", env=cli_env(**{KEY_ENV: KEY.decode()}))
    assert dry.returncode == 0 and "nothing to do" in dry.stdout, dry.stderr[-3000:]
    assert lawkit.footprint(folder) == server and not (tmp_path / "cache-b" / "cas").exists()
    fresh = lawkit.build(second)
    assert not fresh.error and not fresh.ran_anything(), fresh.ran
    assert fresh.outputs == outputs
    # what it fetched is in its own folder now: without the server, nothing runs either
    offline = agent(project, checkout, tmp_path / "cache-b", None, key_env=KEY_ENV)
    again = lawkit.build(offline)
    assert not again.ran_anything() and again.outputs == outputs


def test_a_stale_agent_takes_what_another_built_of_the_new_commit(tmp_path, project, nginx):
    """Agent A built commit N; agent B built N+1 (one payload edited) and sent it; A, moved to
    N+1, finds the edited units' entries of N in its folder, which no longer match, and takes
    B's from the server: it runs nothing."""
    url, _ = nginx.folder()
    checkout = tmp_path / "workspace"
    stale = lawkit.build(agent(project, checkout, tmp_path / "cache-a", url, key_env=KEY_ENV))
    assert not stale.error and stale.ran_anything()
    payload = sorted((checkout / "project").rglob("texture.data"))[0]
    payload.write_bytes(payload.read_bytes() + b"commit N+1")
    other = lawkit.build(agent(project, checkout, tmp_path / "cache-b", url, key_env=KEY_ENV))
    assert other.ran.get("cook"), "the edit reaches no cook unit"
    moved = lawkit.build(agent(project, checkout, tmp_path / "cache-a", url, key_env=KEY_ENV))
    assert not moved.ran_anything(), moved.ran
    assert moved.planned.get("cook") and moved.outputs == other.outputs


def test_an_agent_that_only_reads_writes_nothing_to_the_server(tmp_path, project, nginx):
    url, folder = nginx.folder()
    reader = agent(
        project, tmp_path / "ws", tmp_path / "cache", {"url": url, "upload": False},
        key_env=KEY_ENV,
    )  # fmt: skip
    proc, _ = build(reader)
    assert proc.returncode in (0, 1) and not lines(proc, UNAVAILABLE), proc.stderr[-3000:]
    assert not folder.exists()


# -- forgeries ---------------------------------------------------------------------------------------
def _server_blob(folder: Path, digest: str) -> tuple[BlobAddress, bytes]:
    address = BlobAddress.decode((folder / AC / blob_key(digest)).read_bytes())
    assert address is not None
    return address, (folder / CAS / address.sha256).read_bytes()


def _world_entry(folder: Path) -> tuple[RemoteEntry, str, str]:
    """A cook entry on the server holding a world (a root: always published): the entry, the
    world's name, its part's digest."""
    from orchestrator.codec import allow_package, loads

    allow_package("stages")
    for data in stored(folder, AC).values():
        entry = RemoteEntry.decode(data)
        if entry is None or entry.stage != "cook":
            continue
        parts = loads(_server_blob(folder, entry.result.hex())[1]).digests
        world = next((name for name in sorted(parts) if name.endswith(".iworld")), None)
        if world is not None:
            return entry, world, parts[world]
    raise AssertionError("no cook entry holds a world")


def forge_entry(url: str, folder: Path, signer: EntryKey | None) -> str:
    """What someone who can write to the server but has no key does: rewrite a cooked world,
    upload its blobs under their digests, and replace the cook unit's action entry with one
    naming them (unsigned, or signed with a key of their own). Returns the world."""
    from orchestrator.codec import dumps, loads
    from orchestrator.typing import StoredParts

    http = urllib3.PoolManager()

    def upload(data: bytes) -> tuple[bytes, BlobAddress]:
        digest, address = digest_bytes(data), BlobAddress.of(data)
        assert http.request("PUT", f"{url}{CAS}/{address.sha256}", body=data).status < 300
        body = address.encode()
        assert http.request("PUT", f"{url}{AC}/{blob_key(digest)}", body=body).status < 300
        return bytes.fromhex(digest), address

    # An agent takes a stage whole from its whole-stage entry (core/stageentries.py) without
    # looking its units up: the forger deletes those, so that the unit's entry is read.
    for name, data in stored(folder, AC).items():
        found = RemoteEntry.decode(data)
        if found is not None and found.stage.startswith(WHOLE):
            (folder / AC / name).unlink()
    entry, world, part = _world_entry(folder)
    parts = loads(_server_blob(folder, entry.result.hex())[1]).digests
    cooked = loads(_server_blob(folder, part)[1])
    forged = cooked._replace(content=digest_bytes(EVIL), size=len(EVIL), data=EVIL)
    parts = {**parts, world: upload(dumps(forged))[0].hex()}
    result, address = upload(dumps(StoredParts(parts)))
    fields = _signed(entry.stage, entry.key, result, entry.reads)
    signature = None if signer is None else signer.sign(*fields)
    check = row_check(result, entry.reads)
    value = RemoteEntry(entry.stage, entry.key, result, address, entry.reads, check, signature)
    response = http.request(
        "PUT", f"{url}{AC}/{action_key(entry.stage, entry.key)}", body=value.encode()
    )
    assert response.status < 300
    return world


@pytest.mark.parametrize(
    ("signer", "keyed"),
    [(None, True), (EntryKey(KEY[::-1], "the forger's"), True), (None, False)],
    ids=["unsigned", "signed-with-another-key", "read-without-a-key"],
)
def test_a_forged_entry_on_the_server_is_refused_with_the_key(
    tmp_path, project, nginx, signer, keyed
):
    """A forged action entry written straight to the server: an agent with the key refuses it
    (one `cache.refused` line), runs the unit again and publishes the right bytes, with the
    same exit code; an agent without a key publishes the forgery (what the key is for)."""
    url, folder = nginx.folder()
    keys = {"key_env": KEY_ENV} if keyed else {}
    checkout = tmp_path / "workspace"
    built, _ = build(agent(project, checkout, tmp_path / "cache-a", url, **keys))
    outputs = published(checkout / "build" / "out")
    assert not any(EVIL in data for data in outputs.values())
    forge_entry(url, folder, signer)

    again, _ = build(agent(project, checkout, tmp_path / "cache-b", url, **keys))
    shipped = published(checkout / "build" / "out")
    assert again.returncode == built.returncode, again.stderr[-3000:]
    if not keyed:
        assert any(EVIL in data for data in shipped.values()), "the forgery is not effective"
        return
    refused = lines(again, "cache.refused")
    assert len(refused) == 1, again.stderr[-3000:]
    assert "action entry of cook" in refused[0] and KEY.decode() not in again.stderr
    assert shipped == outputs
    # the unit's genuine entry went back to the server: the next fresh agent refuses nothing
    third, _ = build(agent(project, checkout, tmp_path / "cache-c", url, **keys))
    assert not lines(third, "cache.refused") and published(checkout / "build" / "out") == outputs


@pytest.mark.parametrize(
    "signer", [None, EntryKey(KEY[::-1], "the forger's")], ids=["unsigned", "another-key"]
)
def test_a_forged_whole_stage_entry_is_refused_with_the_key(tmp_path, project, nginx, signer):
    """The cook stage's whole-stage entry on the server re-pointed at the pack stage's rows
    (a valid blob of another stage): an agent with the key refuses it in one line, finds the
    cook units one by one, and publishes the right bytes."""
    url, folder = nginx.folder()
    checkout = tmp_path / "workspace"
    built, _ = build(agent(project, checkout, tmp_path / "cache-a", url, key_env=KEY_ENV))
    outputs = published(checkout / "build" / "out")
    entries = {}
    for name, data in stored(folder, AC).items():
        entry = RemoteEntry.decode(data)
        if entry is not None and entry.stage in (WHOLE + "cook", WHOLE + "pack"):
            entries[entry.stage] = (name, entry)
    (name, cook), (_, pack) = entries[WHOLE + "cook"], entries[WHOLE + "pack"]
    fields = _signed(cook.stage, cook.key, pack.result, cook.reads)
    forged = cook._replace(
        result=pack.result,
        address=pack.address,
        check=row_check(pack.result, cook.reads),
        signature=None if signer is None else signer.sign(*fields),
    )
    (folder / AC / name).write_bytes(forged.encode())

    again, _ = build(agent(project, checkout, tmp_path / "cache-b", url, key_env=KEY_ENV))
    assert again.returncode == built.returncode, again.stderr[-3000:]
    refused = lines(again, "cache.refused")
    assert len(refused) == 1 and f"action entry of {WHOLE}cook" in refused[0], again.stderr
    assert published(checkout / "build" / "out") == outputs


@pytest.mark.parametrize("readdressed", [False, True], ids=["in-place", "readdressed"])
def test_a_forged_blob_on_the_server_is_refused_by_its_digest(
    tmp_path, project, nginx, readdressed
):
    """A cook unit's result rewritten on the server, in place (its SHA-256 then no longer
    holds either), or stored under the new bytes' SHA-256 with the entry's and the blob's
    addresses pointed there: the fetch fails its BLAKE3 digest, is refused once, and the unit
    runs again."""
    url, folder = nginx.folder()
    checkout = tmp_path / "workspace"
    built, _ = build(agent(project, checkout, tmp_path / "cache-a", url, key_env=KEY_ENV))
    outputs = published(checkout / "build" / "out")
    entry, _, _ = _world_entry(folder)
    address, data = _server_blob(folder, entry.result.hex())
    forged = data[:-8] + b"EVIL!!!!"
    if readdressed:  # the address is not signed: only the BLAKE3 digest it leads to counts
        moved = BlobAddress.of(forged)
        (folder / CAS / moved.sha256).write_bytes(forged)
        (folder / AC / blob_key(entry.result.hex())).write_bytes(moved.encode())
        pointed = entry._replace(address=moved).encode()
        (folder / AC / action_key(entry.stage, entry.key)).write_bytes(pointed)
    else:
        (folder / CAS / address.sha256).write_bytes(forged)

    again, _ = build(agent(project, checkout, tmp_path / "cache-b", url, key_env=KEY_ENV))
    assert again.returncode == built.returncode, again.stderr[-3000:]
    refused = lines(again, "cache.refused")
    assert len(refused) == 1 and "does not match its digest" in refused[0], again.stderr[-3000:]
    assert published(checkout / "build" / "out") == outputs


# -- a server that is down or hangs ---------------------------------------------------------------
@contextmanager
def hanging_server():
    listener, port, held = silent_server()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        listener.close()
        for connection in held:
            connection.close()


@contextmanager
def nothing_listening():
    yield f"http://127.0.0.1:{free_port()}/"


@pytest.mark.parametrize("server", [nothing_listening, hanging_server], ids=["down", "hangs"])
def test_a_server_down_or_hanging_never_fails_the_build(tmp_path, project, server):
    """The build succeeds with the outputs it makes without a server, says so in one line, and
    waits for the server about one timeout (the defaults: 1 s to connect, 5 s for an answer)."""
    reference, _ = build(agent(project, tmp_path / "ws", tmp_path / "cache-0", None))
    outputs = published(tmp_path / "ws" / "build" / "out")
    with server() as url:
        proc, seconds = build(agent(project, tmp_path / "ws", tmp_path / "cache-1", url))
    assert proc.returncode == reference.returncode, proc.stderr[-3000:]
    assert published(tmp_path / "ws" / "build" / "out") == outputs
    (line,) = lines(proc, UNAVAILABLE)
    assert f"remote cache {url} unavailable" in line and "building without it" in line
    assert "Traceback" not in proc.stderr
    assert seconds < 30, f"the build waited {seconds:.0f} s for a server that does not answer"


def test_an_upload_queue_never_outlives_a_server_gone_mid_build():
    """The server goes away between uploads: the waiting ends, and the remote is off."""
    url = f"http://127.0.0.1:{free_port()}/"
    store = RemoteStore(RemoteSettings(url, connect_timeout=0.5, timeout=0.5), None)
    for number in range(50):
        store.submit(lambda: store.put(CAS, "0" * 64, b"x"), 1 + number)
    started = time.monotonic()
    store.close()
    assert not store.available and time.monotonic() - started < 10
    assert store.get(AC, "0" * 64, 10) is None


# -- the incremental law across the server ---------------------------------------------------------
@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    return aged_project(tmp_path_factory.mktemp("template"))


@contextmanager
def without_remote(build_file: Path):
    """The build file with no server for a while (`cache` is no stage's input)."""
    text = build_file.read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    data["cache"].pop("remote")
    build_file.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    try:
        yield
    finally:
        build_file.write_text(text, encoding="utf-8")


@law_settings(5)
@given(steps=st.lists(STEP, min_size=1, max_size=3), settled=st.booleans())
def test_incremental_builds_across_the_server_equal_clean_builds(
    template, tmp_path_factory, nginx, steps, settled
):
    """After each random change, an incremental build (its cache folder and the server), a
    fresh agent's build (an empty cache folder and the server, which earlier builds filled
    with entries of older states) and a clean build (an empty cache folder, no server) publish
    the same bytes and leave the same units and values."""
    base = tmp_path_factory.mktemp("laws")
    shutil.copytree(template, base, dirs_exist_ok=True)
    url, _ = nginx.folder()
    build_file = edit_build(base / "build.yaml", cache={"path": "build/cache", "remote": url})
    changes = MessiahChanges(base)
    first = lawkit.build(build_file)
    assert not first.error and first.outputs, first.error
    done: list[str] = []
    for number, step in enumerate(steps, 1):
        done.extend(changes.apply(kind, a, b) for kind, a, b in step)
        if settled:
            settle(base / "project", number)
        story = "; ".join(done)
        incremental = lawkit.build(build_file)
        fresh = lawkit.build(build_file, f"fresh{number}/out", f"fresh{number}/cache")
        with without_remote(build_file):
            clean = lawkit.build(build_file, f"clean{number}/out", f"clean{number}/cache")
        for name, outcome in (("incremental", incremental), ("fresh agent", fresh)):
            problems = lawkit.differences(outcome, clean)
            assert not problems, f"{name} != clean after: {story}\n" + "\n".join(problems)
        shutil.rmtree(base / f"fresh{number}")
        shutil.rmtree(base / f"clean{number}")


# -- authenticating to the server ------------------------------------------------------------------
def _everything_written(*folders: Path) -> bytes:
    return b"".join(
        path.read_bytes() for folder in folders for path in folder.rglob("*") if path.is_file()
    )


def test_the_header_reaches_the_server_and_is_never_shown(tmp_path, project, nginx):
    """The server's folder answers only requests with `Authorization: Bearer <token>`: with
    the token in `cache.remote.header_env` a fresh agent builds from what another stored; with
    a wrong one the build goes on without the server, saying so once. The token (right or
    wrong) appears in no output, log, report or cache file."""
    url, folder = nginx.folder(private=True)
    remote = {"url": url, "header_env": AUTH_ENV}
    checkout = tmp_path / "workspace"
    wrong = "Bearer wrong-token-31e2c6a8"
    env = {AUTH_ENV: f"Bearer {TOKEN}"}
    first, _ = build(agent(project, checkout, tmp_path / "cache-a", remote, key_env=KEY_ENV), **env)
    assert not lines(first, UNAVAILABLE) and stored(folder, AC), first.stderr[-3000:]
    second = agent(project, checkout, tmp_path / "cache-b", remote, key_env=KEY_ENV)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(AUTH_ENV, f"Bearer {TOKEN}")
        assert not lawkit.build(second).ran_anything()
    requests = [
        line
        for line in nginx.access_log.read_text(encoding="utf-8").splitlines()
        if f"/{folder.name}/" in line
    ]
    assert requests and all(line.endswith(f' "Bearer {TOKEN}"') for line in requests)

    third = agent(project, checkout, tmp_path / "cache-c", remote, key_env=KEY_ENV)
    refused, _ = build(third, **{AUTH_ENV: wrong})
    assert refused.returncode == first.returncode
    (line,) = lines(refused, UNAVAILABLE)
    assert "HTTP 401" in line
    for proc in (first, refused):
        assert TOKEN not in proc.stdout + proc.stderr and "wrong-token" not in proc.stderr
    written = _everything_written(checkout / "build", *tmp_path.glob("cache-*"))
    assert TOKEN.encode() not in written and b"wrong-token" not in written


def test_a_remote_without_a_key_is_warned_about(tmp_path, project, nginx):
    url, _ = nginx.folder()
    proc, _ = build(agent(project, tmp_path / "ws", tmp_path / "cache", url))
    assert len(lines(proc, "is read without a cache key")) == 1, proc.stderr[-3000:]


def test_the_cache_folder_is_read_first(tmp_path):
    """A blob the folder holds is never asked of the server (nothing listens there: asking
    would turn the remote off)."""
    url = f"http://127.0.0.1:{free_port()}/"
    cache = Cache(tmp_path, remote=RemoteSettings(url, upload=False))
    digest = cache.put_blob(b"local")
    assert cache.get_blob(digest) == b"local" and cache.has_blob(digest)
    assert cache.remote is not None and cache.remote.available
    assert not cache.has_blob("ab" * 32) and not cache.remote.available
    cache.close()
