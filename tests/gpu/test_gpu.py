"""The CUDA kernels and the pinned-ring loader against the CPU oracle.  Skips
unless libcolabfs-gpu was built with nvcc and a CUDA device is present."""
import ctypes

import numpy as np
import pytest

import colabfs

lib = colabfs._gpu._load()
if not lib.cfs_gpu_built():
    pytest.skip("libcolabfs-gpu built without CUDA (configure found no nvcc)",
                allow_module_level=True)
if lib.cfs_gpu_device_count() < 1:
    pytest.skip("no CUDA device", allow_module_level=True)

D = colabfs.DeviceArray
vp = ctypes.c_void_p


def host(a):
    return ctypes.c_void_p(a.ctypes.data)


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_normalize_matches_cpu(dtype):
    rng = np.random.default_rng(0)
    n, h, w, c = 5, 61, 67, 3
    src = rng.integers(0, 256, size=(n, h, w, c), dtype=np.uint8)
    mean = (ctypes.c_float * 3)(0.485, 0.456, 0.406)
    std = (ctypes.c_float * 3)(0.229, 0.224, 0.225)
    code, size, _ = colabfs.DTYPES[dtype]
    ref = np.zeros(n * c * h * w * size, dtype=np.uint8)
    assert lib.cfs_normalize_cpu(host(src), host(ref), n, h, w, c, mean, std, code, None) == 0
    d_src = D.from_host(src.tobytes())
    d_out = D(ref.size, (ref.size,), "|u1")
    assert lib.cfs_normalize_cuda(vp(d_src.ptr), vp(d_out.ptr), n, h, w, c, mean, std, code,
                                  None) == 0
    assert lib.cfs_gpu_stream_sync(None) == 0
    assert bytes(d_out.to_host()) == ref.tobytes()


def test_gather_matches_cpu():
    rng = np.random.default_rng(1)
    src = rng.integers(0, 256, size=100000, dtype=np.uint8)
    n, maxlen = 300, 700
    lens = rng.integers(0, 1000, size=n).astype(np.uint32)
    offs = np.array([rng.integers(0, src.size - l) for l in lens], dtype=np.uint64)
    ref = np.zeros(n * maxlen, dtype=np.uint8)
    ref_lens = np.zeros(n, dtype=np.uint32)
    assert lib.cfs_gather_cpu(host(src), host(offs), host(lens), n, maxlen, 1, 9, host(ref),
                              host(ref_lens), None) == 0
    d = [D.from_host(a.tobytes()) for a in (src, offs, lens)]
    out, out_lens = D(ref.size, (ref.size,), "|u1"), D(4 * n, (n,), "<u4")
    assert lib.cfs_gather_cuda(vp(d[0].ptr), vp(d[1].ptr), vp(d[2].ptr), n, maxlen, 1, 9,
                               vp(out.ptr), vp(out_lens.ptr), None) == 0
    assert lib.cfs_gpu_stream_sync(None) == 0
    assert bytes(out.to_host()) == ref.tobytes()
    assert bytes(out_lens.to_host()) == ref_lens.tobytes()


def test_crc32c_matches_cpu():
    rng = np.random.default_rng(2)
    data = rng.integers(0, 256, size=5 << 20, dtype=np.uint8)
    lens = np.array([1 << 20, 0, 1, 255, 256, 4097, 12345, 4 << 20], dtype=np.uint32)
    offs = np.array([0, 7, 9, 100, 1000, 3, 77, 1 << 20], dtype=np.uint64)
    n = lens.size
    ref = np.zeros(n, dtype=np.uint32)
    assert lib.cfs_crc32c_batch_cpu(host(data), host(offs), host(lens), n, host(ref), None) == 0
    d = [D.from_host(a.tobytes()) for a in (data, offs, lens)]
    out = D(4 * n, (n,), "<u4")
    assert lib.cfs_crc32c_batch_cuda(vp(d[0].ptr), vp(d[1].ptr), vp(d[2].ptr), n, vp(out.ptr),
                                     None) == 0
    assert lib.cfs_gpu_stream_sync(None) == 0
    assert bytes(out.to_host()) == ref.tobytes()


def test_loader_on_gpu_bit_exact(fake_mount):
    from conftest import FILES
    paths = [rel for rel, _ in FILES] * 4
    loader = colabfs.Loader(paths, batch_size=5, device=0, mountpoint=fake_mount["mnt"],
                            cache_dir=fake_mount["cache"], ring_slot_bytes=64 << 10,
                            ring_slots=2)
    n = 0
    for batch in loader:
        assert batch.on_gpu
        cai = batch.__cuda_array_interface__
        assert cai["version"] == 3 and cai["typestr"] == "|u1"
        host_bytes = batch.data.to_host()
        for i, (path, _, _) in enumerate(batch.items):
            o, ln = batch.offsets[i], batch.lengths[i]
            assert bytes(host_bytes[o:o + ln]) == fake_mount["data"][path]
            n += 1
    assert n == len(paths)
    loader.close()
