"""Workers store what their units make (orchestrator/cache/workers.py): the blobs a worker writes
are the driver's own, readable by the driver and by later runs, checked on every read; a worker
that does not see the cache folder, or a build whose results must reach a cache server, leaves
storing to the driver; a worker killed while writing leaves nothing a later run trusts."""

from __future__ import annotations

import os
import pickle
import signal
import sqlite3

import pytest
from enginekit import build_toy, write_toy
from test_executors import toy_files

from orchestrator.cache import Cache, CacheCorrupt, RemoteSettings
from orchestrator.cache.blobs import LARGE_BLOB_BYTES, blob_file
from orchestrator.cache.workers import StoredBlobs, worker_store
from orchestrator.codec import dumps, loads
from orchestrator.errors import MissingBlob
from orchestrator.executors import LazyBlobs, WorkItem, Workplace
from orchestrator.hashing import digest_bytes
from orchestrator.typing import Parts, StoredParts

BIG = b"\x07" * (LARGE_BLOB_BYTES + 10)


def test_what_a_worker_stores_is_what_the_driver_would_and_it_reads_it_back(tmp_path):
    driver = Cache(tmp_path / "cache")
    own = driver.put_blob(b"the driver's own")  # its index read before the worker writes
    target = driver.store_target()
    assert target is not None and (tmp_path / "cache" / target.probe).read_text() == target.run
    assert driver.store_target() == target  # one probe per run
    writer = worker_store(target)
    assert writer is not None
    stored = writer.store(Parts({"a": ("small", 1), "b": BIG}))
    plain = writer.store(["x" * 5000])  # over what the driver keeps in memory
    writer.flush()
    parts = StoredParts({"a": digest_bytes(dumps(("small", 1))), "b": digest_bytes(dumps(BIG))})
    assert stored.digest == digest_bytes(dumps(parts)) and stored.parts == tuple(
        parts.digests.values()
    )
    assert (stored.small, stored.value) == (True, parts)
    assert (plain.small, plain.value, plain.parts) == (False, None, ())
    # the large part went to a file of its own, the others to the worker's pack
    assert (tmp_path / "cache/cas" / parts.digests["b"][:2] / parts.digests["b"]).is_file()
    assert {digest for digest, _ in stored.packed + plain.packed} == {
        parts.digests["a"],
        stored.digest,
        plain.digest,
    }
    driver.learn_blobs(stored.packed + plain.packed)
    assert loads(driver.get_blob(stored.digest)) == parts
    assert loads(driver.get_blob(parts.digests["a"])) == ("small", 1)
    assert driver.get_blob(parts.digests["b"]) == dumps(BIG)
    assert loads(driver.get_blob(plain.digest)) == ["x" * 5000]
    assert driver.get_blob(own) == b"the driver's own"
    driver.close()
    assert not (tmp_path / "cache" / target.probe).exists()  # no worker stores after the run
    later = Cache(tmp_path / "cache")  # a later run finds them through the index
    assert loads(later.get_blob(plain.digest)) == ["x" * 5000]
    assert later.store_target() != target
    later.close()


def test_a_worker_that_does_not_see_the_folder_at_its_path_stores_nothing(tmp_path):
    driver = Cache(tmp_path / "cache")
    target = driver.store_target()
    assert target is not None
    assert worker_store(target._replace(root=str(tmp_path / "elsewhere"))) is None
    assert worker_store(target._replace(run="another run")) is None
    (tmp_path / "cache" / target.probe).write_text("another run's token")
    assert worker_store(target) is None
    (tmp_path / "cache" / target.probe).write_text(target.run)
    assert worker_store(target._replace(probe="tmp/workers-another")) is None
    driver.close()


def test_results_a_cache_server_must_get_are_stored_by_the_driver(tmp_path):
    """The credential for the server stays in the driver (RemoteSettings): so does storing."""
    sending = Cache(tmp_path / "a", remote=RemoteSettings("http://127.0.0.1:9/"))
    assert sending.store_target() is None
    sending.close()
    reading = Cache(tmp_path / "b", remote=RemoteSettings("http://127.0.0.1:9/", upload=False))
    assert reading.store_target() is not None
    reading.close()


def test_a_dry_run_s_workers_store_in_its_scratch_folder(tmp_path):
    dry = Cache(tmp_path / "cache", scratch=True)
    target = dry.store_target()
    assert dry.scratch is not None and target is not None
    assert target.root == str(dry.scratch.root)
    writer = worker_store(target)
    assert writer is not None
    stored = writer.store("a dry run's result")
    writer.flush()
    dry.learn_blobs(stored.packed)
    assert loads(dry.get_blob(stored.digest)) == "a dry run's result"
    dry.close()
    assert not (tmp_path / "cache/cas/packs").exists()


def test_a_worker_killed_while_writing_leaves_nothing_a_later_run_trusts(tmp_path):
    driver = Cache(tmp_path / "cache")
    target = driver.store_target()
    written = []
    pid = os.fork()
    if pid == 0:  # a worker killed after writing its blobs, before their index lines
        writer = worker_store(target)
        assert writer is not None
        writer.store(BIG)
        writer.store("half done")
        writer.packs._writer.flush()  # the bytes reached the pack; the index line did not
        os.kill(os.getpid(), signal.SIGKILL)
    os.waitpid(pid, 0)
    written = [digest_bytes(dumps(BIG)), digest_bytes(dumps("half done"))]
    driver.close()
    later = Cache(tmp_path / "cache")
    # the large blob was renamed into place whole, or not at all; the small one is not found
    assert later.has_blob(written[0]) and later.get_blob(written[0]) == dumps(BIG)
    assert not later.has_blob(written[1])
    later.close()


def test_a_damaged_blob_a_worker_wrote_is_refused_when_read(tmp_path):
    driver = Cache(tmp_path / "cache")
    writer = worker_store(driver.store_target())
    assert writer is not None
    stored = writer.store("intact")
    writer.flush()
    (digest, (pack, offset, length)), *_ = stored.packed
    path = tmp_path / "cache/cas/packs" / pack
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))
    driver.learn_blobs(stored.packed)
    with pytest.raises(CacheCorrupt):
        driver.get_blob(digest)
    driver.close()


def _results(base, whole: bool) -> list[str]:
    """The results the action entries of a build's cache name: its units' (or, `whole`, those
    of the stages kept whole)."""
    with sqlite3.connect(base / "cache/actions.sqlite") as db:
        rows = db.execute("SELECT stage, result FROM actions").fetchall()
    return sorted(bytes(r).hex() for stage, r in rows if stage.startswith("whole:") == whole)


def _writers(base, digests) -> set[str]:
    """The processes whose packs hold these blobs (a pack is `<host>-<pid>-<ns>.pack`)."""
    lines = (base / "cache/cas/packs/index.log").read_text().splitlines()
    packs = {line.split()[1]: line.split()[2] for line in lines}
    return {packs[digest].split("-")[-2] for digest in digests}


@pytest.mark.ray
def test_ray_workers_store_the_results_a_local_build_would(tmp_path, ray_local):
    """Every result of a Ray build is written by a worker, not the driver; the action entries
    name the results a local build records, and the outputs are the same bytes."""
    files = toy_files()
    local = build_toy(write_toy(tmp_path / "local", files), executor="local")
    remote = build_toy(write_toy(tmp_path / "ray", files), executor="ray")
    assert local.outputs == remote.outputs

    driver = str(os.getpid())
    units = _results(tmp_path / "ray", whole=False)
    assert units == _results(tmp_path / "local", whole=False)
    assert _writers(tmp_path / "local", units) == {driver}
    assert driver not in _writers(tmp_path / "ray", units)  # every unit's result: by a worker
    # what the driver itself makes (a stage kept whole for a fresh checkout) it stores itself
    assert _writers(tmp_path / "ray", _results(tmp_path / "ray", whole=True)) == {driver}
    assert not os.listdir(tmp_path / "ray/cache/tmp")  # the probe went with the run


# -- what units read ---------------------------------------------------------------------------


def _stored_values(cache: Cache) -> dict[str, object]:
    """A few results in the folder, small and large, flushed: digest → value."""
    values: dict[str, object] = {"small": ("a", 1), "large": BIG, "other": ["x"] * 10}
    found = {cache.put_blob(dumps(value)): value for value in values.values()}
    cache.flush()
    return found


def _damage(cache: Cache, digest: str) -> None:
    """Flip a byte of a packed blob where the folder holds it."""
    where = cache.locate(digest)
    assert where is not None and not isinstance(where, str)
    pack = cache.root / "cas/packs" / where.pack
    data = bytearray(pack.read_bytes())
    data[where.offset] ^= 0xFF
    pack.write_bytes(bytes(data))


def _not_loaded(digest: str):
    raise AssertionError(f"the driver read {digest[:12]}")


def test_a_worker_reads_the_results_a_unit_needs_where_they_are_stored(tmp_path):
    """Pickled for a worker that sees the folder, a unit's stored inputs are where they are
    stored: the driver reads none of them; one the folder lacks goes by value."""
    cache = Cache(tmp_path / "cache")
    values = _stored_values(cache)
    target = cache.store_target()
    assert target is not None
    elsewhere = digest_bytes(b"only in the driver")
    digests = (*values, elsewhere)

    def load(digest: str):
        return "the driver's" if digest == elsewhere else _not_loaded(digest)

    blobs = LazyBlobs(digests, load, cache.locate)
    blobs.by_reference(target)
    sent = pickle.loads(pickle.dumps(blobs))
    assert isinstance(sent, StoredBlobs) and list(sent) == list(digests)
    assert dict(sent) == {**values, elsewhere: "the driver's"}
    unlocated = LazyBlobs((elsewhere,), load)  # no way to find them: by value
    unlocated.by_reference(target)
    assert pickle.loads(pickle.dumps(unlocated)) == {elsewhere: "the driver's"}
    blobs.by_value()  # once sent by value, always: the driver mends what a worker could not read
    blobs.by_reference(target)
    with pytest.raises(AssertionError, match="the driver read"):
        pickle.dumps(blobs)
    cache.close()


def test_a_result_a_worker_cannot_read_intact_is_asked_of_the_driver(tmp_path):
    cache = Cache(tmp_path / "cache")
    values = _stored_values(cache)
    target = cache.store_target()
    assert target is not None
    small, large = list(values)[:2]
    blobs = LazyBlobs((small, large), _not_loaded, cache.locate)
    blobs.by_reference(target)
    sent = pickle.loads(pickle.dumps(blobs))
    where = cache.locate(small)
    assert where is not None
    _damage(cache, small)
    big = tmp_path / "cache" / blob_file(large)
    big.write_bytes(b"rot" + big.read_bytes()[3:])
    for digest in (small, large):
        with pytest.raises(MissingBlob) as missing:
            sent[digest]
        assert (missing.value.digest, missing.value.unseen) == (digest, False)
    elsewhere = StoredBlobs(target._replace(run="not this run"), (small,), {small: where}, {})
    with pytest.raises(MissingBlob) as missing:
        elsewhere[small]
    assert missing.value.unseen
    cache.close()


def read_blobs(payload, shared, reader):
    """A unit that reads every stored result it declares (run on a Ray worker)."""
    return [reader.blob(digest) for digest in payload]


@pytest.mark.ray
def test_ray_resends_a_unit_whose_worker_could_not_read_a_result(tmp_path, ray_local):
    from orchestrator.executors.ray import RayExecutor

    cache = Cache(tmp_path / "cache")
    values = _stored_values(cache)
    target = cache.store_target()
    assert target is not None
    damaged = list(values)[0]
    loaded = []

    def load(digest: str):
        loaded.append(digest)
        return values[digest]

    _damage(cache, damaged)
    items = [
        WorkItem(str(i), digests, LazyBlobs(digests, load, cache.locate))
        for i, digests in enumerate([tuple(values)[1:], tuple(values)] * 10)
    ]
    (tmp_path / "p").mkdir()
    executor = RayExecutor(Workplace(str(tmp_path / "p"), str(tmp_path / "cache")))
    done = {f.unit_id: f for f in executor.execute(read_blobs, items, None, target)}
    assert {unit: f.error for unit, f in done.items()} == dict.fromkeys(map(str, range(20)))
    for item in items:
        finished = done[item.unit_id]
        assert finished.stored is not None and finished.missing_blob is None
        cache.learn_blobs(finished.stored.packed)
        assert loads(cache.get_blob(finished.stored.digest)) == [values[d] for d in item.payload]
    # the driver read only what the ten units that could not read one were sent again with
    assert sorted(loaded) == sorted(list(values) * 10)
    cache.close()


@pytest.mark.parametrize("obstacle", ["a file where the packs folder goes", "a full disk"])
def test_results_a_worker_cannot_write_are_left_to_the_driver(tmp_path, monkeypatch, obstacle):
    from orchestrator.cache import workers
    from orchestrator.executors import Finished, store_results

    cache = Cache(tmp_path / "cache")
    target = cache.store_target()
    assert target is not None
    workers._stores.clear()
    if obstacle == "a full disk":

        def full(self):
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(workers.WorkerStore, "flush", full)
    else:
        (tmp_path / "cache/cas").mkdir(exist_ok=True)
        (tmp_path / "cache/cas/packs").write_bytes(b"")
    done = [Finished("a", result="first"), Finished("b", result=["second"])]
    assert store_results(done, target) is done
    assert [(f.result, f.stored) for f in done] == [("first", None), (["second"], None)]
    workers._stores.clear()
    cache.close()


def _parts_build(build_file, executor: str):
    """A build of toy stages whose units return Parts (`sizes`) and read them back by digest
    (`echo`)."""
    from orchestrator.core.config import load_build
    from orchestrator.core.options import RunOptions
    from orchestrator.core.registry import load_stage
    from orchestrator.core.scheduler import run_build
    from orchestrator.shell.present import setup_logging

    stages = [load_stage(name) for name in ("toy_stages.sizes", "toy_stages.echo")]
    opts = RunOptions(executor=executor, progress=False)
    return run_build(load_build(build_file), opts, setup_logging("console"), stages)


@pytest.mark.ray
@pytest.mark.parametrize("seen", [True, False], ids=["workers see the cache", "they do not"])
def test_parts_made_and_read_on_ray_workers(tmp_path, ray_local, monkeypatch, seen):
    """Parts stored by the workers that made them, read back by digest by the units that need
    them; with workers that do not see the cache folder, the driver stores them and sends them
    by value. Either way, what a local build makes."""
    files = {f"d{i}/f{i}.txt": "x\n" * (i + 1) for i in range(40)}
    local = _parts_build(write_toy(tmp_path / "local", files), "local")
    if not seen:  # the workers find no probe holding this token: as on nodes that lack the folder
        real = Cache.store_target

        def elsewhere(self):
            target = real(self)
            return None if target is None else target._replace(run=f"{target.run}-elsewhere")

        monkeypatch.setattr(Cache, "store_target", elsewhere)
    remote = _parts_build(write_toy(tmp_path / "ray", files), "ray")
    assert dict(remote.outputs["echoed"]) == dict(local.outputs["echoed"])
    assert dict(remote.outputs["sizes"]) == dict(local.outputs["sizes"])
    assert any("driver" not in o.worker for r in remote.reports for o in r.outcomes)
    units = _results(tmp_path / "ray", whole=False)
    assert units == _results(tmp_path / "local", whole=False)
    writers = _writers(tmp_path / "ray", units)
    driver = str(os.getpid())
    assert driver not in writers if seen else writers == {driver}
