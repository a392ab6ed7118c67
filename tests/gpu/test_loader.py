"""The Python Loader on the CPU path: batches bit-exact against the files,
mixing cached, partly cached, uncached and exported files; ranges; padded
gather and normalisation against numpy references."""
import numpy as np
import pytest

import colabfs

from conftest import FILES


@pytest.fixture(scope="module")
def stage(fake_mount):
    s = colabfs.Stage.get(fake_mount["mnt"], fake_mount["cache"])
    yield s
    s.close()


def test_whole_files_bit_exact(fake_mount, stage):
    paths = [rel for rel, _ in FILES] * 3
    loader = colabfs.Loader(paths, batch_size=4, depth=2, device="cpu",
                            mountpoint=fake_mount["mnt"], cache_dir=fake_mount["cache"])
    assert len(loader) == 5
    before = stage.stats()
    seen = []
    for batch in loader:
        assert not batch.on_gpu
        arr = np.frombuffer(batch.data, dtype=np.uint8)
        assert arr.size == sum(batch.lengths)
        assert np.asarray(batch).size == arr.size  # __array_interface__
        for i, (path, _, _) in enumerate(batch.items):
            assert bytes(batch.item(i)) == fake_mount["data"][path]
            seen.append(path)
    assert seen == paths
    after = stage.stats()
    assert after["blocks_cached"] > before["blocks_cached"]
    assert after["bytes_mount"] > before["bytes_mount"]  # c, d, doc.txt
    assert after["crc_errors"] == before["crc_errors"]


def test_ranges(fake_mount, stage):
    data = fake_mount["data"]["a.bin"]
    rng = np.random.default_rng(1)
    items = []
    for _ in range(50):
        off = int(rng.integers(0, len(data) + 10))
        ln = int(rng.integers(0, 100000))
        items.append(("a.bin", off, ln))
    loader = colabfs.Loader(items, batch_size=7, device="cpu", mountpoint=fake_mount["mnt"],
                            cache_dir=fake_mount["cache"])
    for batch in loader:
        for i, (_, off, ln) in enumerate(batch.items):
            assert bytes(batch.item(i)) == data[off:off + ln]


def test_padded_and_normalize(fake_mount, stage):
    buf, offs, lens = stage.read([("a.bin", 0, 224 * 224 * 3), ("a.bin", 1000, 224 * 224 * 3)])
    batch = colabfs.Batch(buf, offs, lens, [], "cpu")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    out = np.asarray(batch.normalize(224, 224, 3, mean, std))
    img = np.frombuffer(buf, dtype=np.uint8).reshape(2, 224, 224, 3).astype(np.float64)
    ref = ((img / 255.0 - np.array(mean)) / np.array(std)).transpose(0, 3, 1, 2)
    assert out.shape == (2, 3, 224, 224)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    h16 = np.asarray(batch.normalize(224, 224, 3, mean, std, "float16"))
    np.testing.assert_array_equal(h16, out.astype(np.float16))

    b2 = colabfs.Batch(*stage.read([("sub/b.bin", 0, None), ("doc.txt", 5, 10)]), [], "cpu")
    pad, got = b2.padded(maxlen=4000, pad=7)
    pad = np.asarray(pad)
    assert got == [4000, 10]
    assert bytes(pad[0]) == fake_mount["data"]["sub/b.bin"][:4000]
    assert bytes(pad[1][:10]) == fake_mount["data"]["doc.txt"][5:15]
    assert (pad[1][10:] == 7).all()


def test_missing_file(fake_mount, stage):
    with pytest.raises(FileNotFoundError):
        stage.read([("nope.bin", 0, None)])


def test_dlpack_bit_exact(fake_mount, stage):
    """torch.from_dlpack takes a CPU batch without a copy, bytes equal the files."""
    torch = pytest.importorskip("torch")
    paths = [rel for rel, _ in FILES]
    loader = colabfs.Loader(paths, batch_size=3, device="cpu", mountpoint=fake_mount["mnt"],
                            cache_dir=fake_mount["cache"])
    for batch in loader:
        assert batch.__dlpack_device__() == (1, 0)
        t = torch.from_dlpack(batch)
        assert t.dtype == torch.uint8 and t.shape == (sum(batch.lengths),)
        assert t.data_ptr() == np.frombuffer(batch.data, dtype=np.uint8).ctypes.data \
            if len(batch.data) else True
        for i, (path, _, _) in enumerate(batch.items):
            o, ln = batch.offsets[i], batch.lengths[i]
            assert bytes(t[o:o + ln].numpy()) == fake_mount["data"][path]
    # normalised arrays too, and a tensor outlives its batch
    buf, offs, lens = stage.read([("a.bin", 0, 2 * 4 * 4 * 3)])
    b = colabfs.Batch(buf, [0, 48], [48, 48], [], "cpu")
    f = torch.from_dlpack(b.normalize(4, 4, 3, [0.5] * 3, [0.25] * 3))
    ref = np.asarray(b.normalize(4, 4, 3, [0.5] * 3, [0.25] * 3))
    assert f.shape == (2, 3, 4, 4) and np.array_equal(f.numpy(), ref)
    t = torch.from_dlpack(b)
    del b
    import gc
    gc.collect()
    assert bytes(t.numpy()) == bytes(buf)
    del t
    gc.collect()
    assert not colabfs._gpu._dl_live or all(v[0] is not None for v in colabfs._gpu._dl_live.values())


def test_pinned_hot_cache(fake_mount):
    """COLABFS_GPU_PINNED on the CPU path: the second epoch copies from the hot
    set, every byte still exact."""
    s = colabfs.Stage.get(fake_mount["mnt"], fake_mount["cache"])
    s.set_pinned(8 << 20)
    try:
        paths = [rel for rel, _ in FILES]
        loader = colabfs.Loader(paths, batch_size=2, device="cpu",
                                mountpoint=fake_mount["mnt"], cache_dir=fake_mount["cache"])
        for epoch in range(3):
            for batch in loader:
                for i, (path, _, _) in enumerate(batch.items):
                    assert bytes(batch.item(i)) == fake_mount["data"][path]
        st = s.stats()
        assert st["hot_refreshes"] >= 2
        assert st["hot_blocks"] > 0 and st["hot_bytes"] > 0
        assert st["hot_hits"] > 0
        assert st["crc_errors"] == 0
    finally:
        s.set_pinned(0)
    assert s.stats()["hot_bytes"] == 0
