"""A shared cache's entries authenticated with the farm's key (orchestrator/cache/signing.py).

The attack: anyone who can write to a shared cache folder rewrites an action row and the blobs
it names consistently (content addressing and the row's plain check prove integrity, not the
writer), and a second checkout publishes the forged bytes. With `cache.key_env` / `key_file`
rows are signed; a reader with the key refuses the forged row once, recomputes, and publishes
the right bytes. Without a key the cache works as before (and the forgery goes through).
"""

from __future__ import annotations

import pickle
import shutil
import sqlite3
from pathlib import Path

import pytest
import yaml
from buildkit import cache_problems, cli_env, edit_build, make_project, published, run_cli

from orchestrator.cache import Cache, EntryKey
from orchestrator.core.config import load_build
from orchestrator.errors import ConfigError
from orchestrator.hashing import digest_bytes

KEY = b"0123456789abcdef0123456789abcdef"
KEY_ENV = "ORCHESTRATE_TEST_CACHE_KEY"
READS = {"a.xml": "11" * 32, "gone.xml": None}
RESULT = "22" * 32


# -- the signature ---------------------------------------------------------------------------------
def test_a_signature_covers_every_field_and_its_boundaries():
    key = EntryKey(KEY, "test")
    signature = key.sign(b"cook", b"ab", b"c")
    assert key.verify(signature, b"cook", b"ab", b"c")
    assert not key.verify(signature, b"cook", b"a", b"bc")  # lengths are part of what is signed
    assert not key.verify(signature, b"cook", b"ab", b"d")
    assert not EntryKey(KEY[::-1], "other").verify(signature, b"cook", b"ab", b"c")
    assert not key.verify(None, b"cook", b"ab", b"c")


def test_the_key_is_long_enough_and_never_leaves_the_process():
    with pytest.raises(ValueError, match="at least 16 random bytes"):
        EntryKey(b"short", "test")
    key = EntryKey(KEY, "cache.key_env X")
    assert KEY.decode() not in repr(key)
    with pytest.raises(TypeError):
        pickle.dumps(key)


# -- the action cache --------------------------------------------------------------------------------
def _write(root: Path, key: EntryKey | None, stage: str = "cook", unit: str = "33" * 32) -> None:
    cache = Cache(root, key=key)
    cache.actions.put(stage, unit, READS, RESULT)
    cache.close()


def _read(root: Path, key: EntryKey | None, stage: str = "cook", unit: str = "33" * 32):
    cache = Cache(root, key=key)
    entries = cache.actions.get(stage, unit)
    cache.close()
    return entries, cache.refused_entries


def test_rows_signed_with_the_key_are_read_with_it_and_without_it(tmp_path):
    _write(tmp_path, EntryKey(KEY, "test"))
    for reader in (EntryKey(KEY, "test"), None):
        entries, refused = _read(tmp_path, reader)
        assert [e.result for e in entries] == [RESULT] and refused == 0


def test_a_reader_with_the_key_refuses_unsigned_and_foreign_rows_once(tmp_path):
    """Unsigned (a build without the key, or a forger), or signed with another key: refused,
    reported, deleted (a second reader finds nothing to report); without a key, read as before."""
    for writer in (None, EntryKey(KEY[::-1], "another farm")):
        root = tmp_path / repr(writer)
        _write(root, writer)
        assert _read(root, None)[0] != []  # today's behaviour without a key
        entries, refused = _read(root, EntryKey(KEY, "test"))
        assert entries == [] and refused == 1
        assert _read(root, EntryKey(KEY, "test")) == ([], 0)


def test_a_signed_row_moved_to_another_key_is_refused(tmp_path):
    """The signature binds the row to its stage and unit key: a genuine row replayed under
    another unit's key proves nothing."""
    key = EntryKey(KEY, "test")
    _write(tmp_path, key, unit="33" * 32)
    db = sqlite3.connect(tmp_path / "actions.sqlite")
    db.execute("UPDATE actions SET key = ?", (bytes.fromhex("44" * 32),))
    db.commit()
    db.close()
    assert _read(tmp_path, key, unit="44" * 32) == ([], 1)


# -- the build file ----------------------------------------------------------------------------------
def _build_file(tmp_path: Path, cache) -> Path:
    (tmp_path / "project").mkdir(exist_ok=True)
    path = tmp_path / "build.yaml"
    path.write_text(yaml.safe_dump({"project": "project", "cache": cache}), encoding="utf-8")
    return path


def test_the_cache_is_a_folder_or_a_folder_and_a_key(tmp_path, monkeypatch):
    assert load_build(_build_file(tmp_path, "c")).cache_dir == tmp_path / "c"
    plain = load_build(_build_file(tmp_path, {"path": "c"}))
    assert plain.cache_dir == tmp_path / "c" and plain.cache_key() is None
    (tmp_path / "farm.key").write_bytes(KEY + b"\n")
    from_file = load_build(_build_file(tmp_path, {"path": "c", "key_file": "farm.key"}))
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    from_env = load_build(_build_file(tmp_path, {"key_env": KEY_ENV}))
    assert from_env.cache_dir == tmp_path / "build" / "cache"
    signature = from_file.cache_key().sign(b"x")  # type: ignore[union-attr]
    assert from_env.cache_key().verify(signature, b"x")  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("cache", "message"),
    [
        ({"key_file": "missing.key"}, "cannot read the cache key"),
        ({"key_env": "ORCHESTRATE_TEST_UNSET_KEY"}, "ORCHESTRATE_TEST_UNSET_KEY is not set"),
        ({"key_file": "short.key"}, "the cache key has 5 bytes"),
    ],
)
def test_a_key_that_cannot_be_had_names_the_build_file_and_the_key(tmp_path, cache, message):
    (tmp_path / "short.key").write_bytes(b"short")
    build = load_build(_build_file(tmp_path, cache))
    with pytest.raises(ConfigError) as refused:
        build.cache_key()
    assert message in refused.value.message
    assert refused.value.file == str(tmp_path / "build.yaml") and refused.value.line == 2
    assert refused.value.key in ("cache.key_file", "cache.key_env")


def test_one_key_source_at_a_time(tmp_path):
    with pytest.raises(ConfigError, match="key_file or in key_env, not both"):
        load_build(_build_file(tmp_path, {"key_file": "a", "key_env": "B"}))


# -- the attack, end to end ------------------------------------------------------------------------
EVIL = b"EVIL-PAYLOAD: written by someone who can write to the cache, not by a build"


def forge_cooked_asset(cache_dir: Path) -> str:
    """What an attacker with write access to the cache folder does, without the key: rewrite
    one cooked asset inside a cook unit's result, store the new blobs under their digests, point
    the action row at them and recompute the row's plain check. Returns the forged asset."""
    from orchestrator.codec import allow_package, dumps, loads
    from orchestrator.typing import StoredParts

    allow_package("stages")
    cache = Cache(cache_dir)
    db = sqlite3.connect(cache_dir / "actions.sqlite")
    rows = db.execute(
        "SELECT stage, key, result, reads FROM actions WHERE stage = 'cook' ORDER BY key"
    ).fetchall()
    worlds = {  # the cook units holding a world (a root: always published)
        row: next((name for name in sorted(parts) if name.endswith(".iworld")), None)
        for row in rows
        for parts in [loads(cache.get_blob(bytes(row[2]).hex())).digests]
    }
    (stage, key, result, reads), asset = next(item for item in worlds.items() if item[1])
    parts = loads(cache.get_blob(bytes(result).hex())).digests
    cooked = loads(cache.get_blob(parts[asset]))
    forged = cooked._replace(content=digest_bytes(EVIL), size=len(EVIL), data=EVIL)
    parts = {**parts, asset: cache.put_blob(dumps(forged))}
    new_result = bytes.fromhex(cache.put_blob(dumps(StoredParts(parts))))
    cache.close()
    check = digest_bytes(new_result + bytes(reads)).encode("ascii")[:16]
    db.execute(
        "UPDATE actions SET result = ?, check_ = ?, stamp = stamp + 1 "
        "WHERE stage = ? AND key = ? AND result = ?",
        (new_result, check, stage, key, result),
    )
    db.commit()
    db.close()
    return asset


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A generated project's build file (each test builds its checkouts into its own cache)."""
    return make_project(tmp_path_factory.mktemp("farm"), 120, 5, executor={"kind": "local"})


def _checkout(build: Path, dest: Path, cache: dict) -> Path:
    shutil.copytree(build.parent, dest, ignore=shutil.ignore_patterns("build"))
    return edit_build(dest / build.name, cache=cache)


def _run(build: Path):
    proc = run_cli("run", str(build), env=cli_env(**{KEY_ENV: KEY.decode()}))
    return proc, proc.stderr.count("cache.refused")


@pytest.mark.parametrize("keyed", [True, False], ids=["with-the-key", "without-a-key"])
def test_a_forged_entry_is_refused_by_a_checkout_with_the_key(tmp_path, project, keyed):
    """The first checkout builds; the attacker forges a cooked asset; a second checkout with the
    key refuses the row (one warning), recomputes and publishes the first checkout's bytes, with
    the same exit code; a third finds nothing left to refuse. Without a key (today's behaviour):
    every unit hits, and the forged bytes are published (what the key is for)."""
    build = project
    cache = {"path": str(tmp_path / "cache")} | ({"key_env": KEY_ENV} if keyed else {})
    first = _checkout(build, tmp_path / "first", cache)
    built, refusals = _run(first)
    assert refusals == 0 and "Traceback" not in built.stderr
    outputs = published(first.parent / "build" / "out")
    assert not any(EVIL in data for data in outputs.values())

    forged = forge_cooked_asset(tmp_path / "cache")
    second = _checkout(build, tmp_path / "second", cache)
    again, refusals = _run(second)
    assert again.returncode == built.returncode
    shipped = published(second.parent / "build" / "out")
    if not keyed:
        assert refusals == 0
        assert any(EVIL in data for data in shipped.values()), "the forgery is not effective"
        return
    assert refusals == 1, again.stderr[-3000:]
    assert "not signed with this build's key" in again.stderr and KEY.decode() not in again.stderr
    assert shipped == outputs, f"{forged}: the forged bytes were published"
    assert cache_problems(tmp_path / "cache") == []

    third, refusals = _run(_checkout(build, tmp_path / "third", cache))
    assert refusals == 0 and third.returncode == built.returncode
    assert published(tmp_path / "third" / "build" / "out") == outputs
