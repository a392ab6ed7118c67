"""The GPU loader: training data from a colabfs mount straight out of its block cache.

A ctypes binding of libcolabfs-gpu (kernels/stage.h, gpuops.h, stage_gpu.h); no
build-time dependency on torch or numpy.  Blocks resident in the mount's cache
are copied from the cache arenas (read-only, checked against torn reads and by
crc32c); the rest are read through the mount, which fetches and caches them.

    loader = colabfs.Loader(paths, batch_size=64, depth=2)
    for batch in loader:
        x = torch.as_tensor(batch.normalize(224, 224, 3, mean, std), device="cuda")

On a machine with a CUDA device (and a library built with nvcc) batches live
in device memory and expose ``__cuda_array_interface__`` (v3); otherwise they
are host buffers: ``batch.data`` is a bytearray for ``torch.frombuffer`` or
``numpy.frombuffer``, and arrays expose ``__array_interface__``.  Batches and
arrays also speak DLPack (``__dlpack__``/``__dlpack_device__``, a capsule
built with ctypes), so ``torch.from_dlpack(batch)`` takes them without a copy
on either device.

COLABFS_GPU_PINNED (e.g. "2G") keeps the most used cached blocks in pinned
host memory across epochs (see kernels/stage.h); ``Stage.stats()`` has its
counters (hot_hits, hot_misses, hot_bytes, ...).

The library is found through $COLABFS_GPU_LIB, else where ``make install``
put it, else the dynamic loader's search path.
"""

import ctypes
import os
import queue
import threading

from ._mountinfo import mount_of

__all__ = ["Loader", "Batch", "Stage", "HostArray", "DeviceArray", "gpu_available", "stage_stats"]

# ---- the library ---------------------------------------------------------------

_lib = None
_lib_lock = threading.Lock()


class _Range(ctypes.Structure):
    _fields_ = [("path", ctypes.c_char_p), ("off", ctypes.c_uint64), ("len", ctypes.c_uint64)]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "plans", "blocks_cached", "blocks_mount", "bytes_cached", "bytes_mount",
        "retries", "crc_errors", "unresolved", "hot_hits", "hot_misses", "hot_bytes",
        "hot_blocks", "hot_refreshes", "hot_dropped", "hot_cuda")]


TO_EOF = (1 << 64) - 1
DTYPES = {"float32": (0, 4, "<f4"), "float16": (1, 2, "<f2"), "bfloat16": (2, 2, "<V2")}


def _candidates():
    env = os.environ.get("COLABFS_GPU_LIB")
    if env:
        yield env
    try:
        from . import _paths  # written by make install
        yield os.path.join(_paths.LIBDIR, "libcolabfs-gpu.so")
    except ImportError:
        pass
    yield "libcolabfs-gpu.so"


def _load():
    global _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        err = None
        for path in _candidates():
            try:
                lib = ctypes.CDLL(path)
                break
            except OSError as e:
                err = e
        else:
            raise OSError("cannot load libcolabfs-gpu.so (set COLABFS_GPU_LIB): %s" % err)
        vp, u64, u32, i = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint32, ctypes.c_int
        sig = {
            "cfs_stage_open": (i, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint,
                                   ctypes.POINTER(vp)]),
            "cfs_stage_close": (None, [vp]),
            "cfs_stage_block_size": (u32, [vp]),
            "cfs_stage_plan_new": (i, [vp, ctypes.POINTER(_Range), ctypes.c_size_t,
                                       ctypes.POINTER(vp)]),
            "cfs_stage_plan_free": (None, [vp]),
            "cfs_stage_plan_bytes": (u64, [vp]),
            "cfs_stage_plan_offset": (u64, [vp, ctypes.c_size_t]),
            "cfs_stage_plan_length": (u64, [vp, ctypes.c_size_t]),
            "cfs_stage_copy": (i, [vp, vp, vp, u64]),
            "cfs_stage_get_stats": (None, [vp, ctypes.POINTER(_Stats)]),
            "cfs_stage_set_pinned": (i, [vp, u64]),
            "cfs_stage_hot_refresh": (i, [vp]),
            "cfs_normalize_cpu": (i, [vp, vp, u32, u32, u32, u32, vp, vp, i, vp]),
            "cfs_normalize_cuda": (i, [vp, vp, u32, u32, u32, u32, vp, vp, i, vp]),
            "cfs_gather_cpu": (i, [vp, vp, vp, u32, u32, u32, ctypes.c_uint8, vp, vp, vp]),
            "cfs_gather_cuda": (i, [vp, vp, vp, u32, u32, u32, ctypes.c_uint8, vp, vp, vp]),
            "cfs_crc32c_batch_cpu": (i, [vp, vp, vp, u32, vp, vp]),
            "cfs_crc32c_batch_cuda": (i, [vp, vp, vp, u32, vp, vp]),
            "cfs_gpu_built": (i, []),
            "cfs_gpu_device_count": (i, []),
            "cfs_gpu_alloc": (i, [i, u64, ctypes.POINTER(vp)]),
            "cfs_gpu_free": (i, [vp]),
            "cfs_gpu_to_host": (i, [vp, vp, u64]),
            "cfs_gpu_to_device": (i, [vp, vp, u64]),
            "cfs_gpu_stream_new": (i, [i, ctypes.POINTER(vp)]),
            "cfs_gpu_stream_free": (i, [vp]),
            "cfs_gpu_stream_sync": (i, [vp]),
            "cfs_stage_ring_new": (i, [vp, i, u64, ctypes.c_uint, ctypes.POINTER(vp)]),
            "cfs_stage_ring_free": (None, [vp]),
            "cfs_stage_ring_copy": (i, [vp, vp, vp, u64, vp]),
        }
        for name, (res, args) in sig.items():
            f = getattr(lib, name)
            f.restype = res
            f.argtypes = args
        _lib = lib
        return lib


def _check(rc, what):
    if rc < 0:
        raise OSError(-rc, "%s: %s" % (what, os.strerror(-rc)))
    return rc


def gpu_available():
    """True when the library has CUDA and a device is present."""
    lib = _load()
    return bool(lib.cfs_gpu_built()) and lib.cfs_gpu_device_count() > 0


# ---- DLPack --------------------------------------------------------------------

_DL_CPU, _DL_CUDA = 1, 2
_DL_TYPES = {"|u1": (1, 8), "<u4": (1, 32), "<f4": (2, 32), "<f2": (2, 16), "<V2": (4, 16)}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    pass


_DL_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(_DLManagedTensor))
_DLManagedTensor._fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                             ("deleter", _DL_DELETER)]

# What a handed-out tensor keeps alive (the owner, the struct, its shape),
# by the address of its DLManagedTensor, until the consumer calls the deleter.
_dl_live = {}
_dl_lock = threading.Lock()


@_DL_DELETER
def _dl_deleter(mt):
    with _dl_lock:
        _dl_live.pop(ctypes.addressof(mt.contents), None)


_CAPSULE_DTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_py = ctypes.pythonapi
_py.PyCapsule_New.restype = ctypes.py_object
_py.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, _CAPSULE_DTOR]
_py.PyCapsule_IsValid.restype = ctypes.c_int
_py.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_py.PyCapsule_GetPointer.restype = ctypes.c_void_p
_py.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]


@_CAPSULE_DTOR
def _capsule_dtor(cap):
    # a capsule nobody consumed still owns its tensor ("used_dltensor" once taken)
    if _py.PyCapsule_IsValid(cap, b"dltensor"):
        p = _py.PyCapsule_GetPointer(cap, b"dltensor")
        with _dl_lock:
            _dl_live.pop(p, None)


def _dlpack(owner, ptr, shape, typestr, device):
    """A "dltensor" capsule over ptr (compact, row-major) that keeps owner alive."""
    if typestr not in _DL_TYPES:
        raise TypeError("no DLPack type for %s" % typestr)
    code, bits = _DL_TYPES[typestr]
    mt = _DLManagedTensor()
    shp = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = mt.dl_tensor
    t.data = ptr or None
    t.device = _DLDevice(_DL_CPU, 0) if device == "cpu" else _DLDevice(_DL_CUDA, int(device))
    t.ndim = len(shape)
    t.dtype = _DLDataType(code, bits, 1)
    t.shape = ctypes.cast(shp, ctypes.POINTER(ctypes.c_int64))
    t.strides = None
    t.byte_offset = 0
    mt.manager_ctx = None
    mt.deleter = _dl_deleter
    addr = ctypes.addressof(mt)
    with _dl_lock:
        _dl_live[addr] = (owner, mt, shp)
    return _py.PyCapsule_New(addr, b"dltensor", _capsule_dtor)


def _dl_device(device):
    return (_DL_CPU, 0) if device == "cpu" else (_DL_CUDA, int(device))


def _sync_for_dlpack(stream):
    # our device buffers are complete when handed out (the loader synced its
    # stream), so any consumer stream may use them at once
    return None


# ---- buffers -------------------------------------------------------------------


class HostArray:
    """A host array over a bytearray, for numpy (``__array_interface__``) and
    torch.frombuffer (``.data``)."""

    def __init__(self, data, shape, typestr):
        self.data = data
        self.shape = tuple(shape)
        self.typestr = typestr

    @property
    def __array_interface__(self):
        addr = ctypes.addressof((ctypes.c_char * max(len(self.data), 1)).from_buffer(self.data)) \
            if len(self.data) else 0
        return {"shape": self.shape, "typestr": self.typestr, "data": (addr, False),
                "version": 3}

    def __dlpack__(self, stream=None, **kw):
        return _dlpack(self, _host_ptr(self.data).value if len(self.data) else 0, self.shape,
                       self.typestr, "cpu")

    def __dlpack_device__(self):
        return _dl_device("cpu")


class DeviceArray:
    """Device memory owned by this object, exposing ``__cuda_array_interface__``
    v3.  The bytes are complete when the object is handed out (stream None)."""

    def __init__(self, nbytes, shape, typestr, device=0):
        lib = _load()
        p = ctypes.c_void_p()
        _check(lib.cfs_gpu_alloc(device, nbytes, ctypes.byref(p)), "cudaMalloc")
        self.ptr = p.value or 0
        self.nbytes = nbytes
        self.shape = tuple(shape)
        self.typestr = typestr
        self.device = device

    @property
    def __cuda_array_interface__(self):
        return {"shape": self.shape, "typestr": self.typestr, "data": (self.ptr, False),
                "version": 3, "strides": None, "stream": None}

    def __dlpack__(self, stream=None, **kw):
        _sync_for_dlpack(stream)
        return _dlpack(self, self.ptr, self.shape, self.typestr, self.device)

    def __dlpack_device__(self):
        return _dl_device(self.device)

    def to_host(self):
        """The bytes, copied back (a bytearray)."""
        out = bytearray(self.nbytes)
        if self.nbytes:
            buf = (ctypes.c_char * self.nbytes).from_buffer(out)
            _check(_load().cfs_gpu_to_host(buf, ctypes.c_void_p(self.ptr), self.nbytes), "D2H")
        return out

    @classmethod
    def from_host(cls, data, shape=None, typestr="|u1", device=0):
        data = bytearray(data)
        d = cls(len(data), shape or (len(data),), typestr, device)
        if data:
            buf = (ctypes.c_char * len(data)).from_buffer(data)
            _check(_load().cfs_gpu_to_device(ctypes.c_void_p(d.ptr), buf, len(data)), "H2D")
        return d

    def __del__(self):
        if getattr(self, "ptr", 0) and _lib is not None:
            _lib.cfs_gpu_free(ctypes.c_void_p(self.ptr))
            self.ptr = 0


def _host_ptr(data):
    return ctypes.cast((ctypes.c_char * max(len(data), 1)).from_buffer(data), ctypes.c_void_p) \
        if len(data) else None


def _u64s(vals):
    return bytearray((ctypes.c_uint64 * len(vals))(*vals))


def _u32s(vals):
    return bytearray((ctypes.c_uint32 * len(vals))(*vals))


# ---- stage ---------------------------------------------------------------------

_stages = {}
_stages_lock = threading.Lock()


class Stage:
    """The mount's cache opened read-only (one per cache folder per process;
    use Stage.get to share it)."""

    def __init__(self, mountpoint, cache_dir=None, verify=True):
        lib = _load()
        h = ctypes.c_void_p()
        _check(lib.cfs_stage_open(os.fsencode(cache_dir) if cache_dir else None,
                                  os.fsencode(mountpoint), 0 if verify else 1,
                                  ctypes.byref(h)), "open the cache of %s" % mountpoint)
        self._h = h
        self.mountpoint = mountpoint
        self.block_size = lib.cfs_stage_block_size(h)
        self.lock = threading.Lock()

    @classmethod
    def get(cls, mountpoint, cache_dir=None, verify=True):
        key = (os.path.realpath(mountpoint), cache_dir)
        with _stages_lock:
            s = _stages.get(key)
            if s is None:
                s = _stages[key] = cls(mountpoint, cache_dir, verify)
            return s

    def plan(self, ranges):
        """A plan for [(path, off, len)] (len None: to the end)."""
        arr = (_Range * max(len(ranges), 1))()
        keep = []
        for i, (p, off, ln) in enumerate(ranges):
            b = os.fsencode(p)
            keep.append(b)
            arr[i] = _Range(b, off, TO_EOF if ln is None else ln)
        h = ctypes.c_void_p()
        _check(_load().cfs_stage_plan_new(self._h, arr, len(ranges), ctypes.byref(h)), "plan")
        return _Plan(h, len(ranges))

    def read(self, ranges):
        """(bytearray, offsets, lengths) of the ranges packed back to back."""
        p = self.plan(ranges)
        try:
            out = bytearray(p.nbytes)
            _check(_load().cfs_stage_copy(self._h, p.h, _host_ptr(out), len(out)), "copy")
            return out, p.offsets, p.lengths
        finally:
            p.free()

    def set_pinned(self, nbytes):
        """Budget of the pinned hot-block cache in bytes (0: off)."""
        _check(_load().cfs_stage_set_pinned(self._h, nbytes), "pinned budget")

    def refresh_hot(self):
        """Chooses and fills the hot blocks again now (no-op when off)."""
        _check(_load().cfs_stage_hot_refresh(self._h), "hot refresh")

    def stats(self):
        st = _Stats()
        _load().cfs_stage_get_stats(self._h, ctypes.byref(st))
        return {n: getattr(st, n) for n, _ in _Stats._fields_}

    def close(self):
        if self._h:
            _load().cfs_stage_close(self._h)
            self._h = None
            with _stages_lock:
                for k, v in list(_stages.items()):
                    if v is self:
                        del _stages[k]


class _Plan:
    def __init__(self, h, n):
        lib = _load()
        self.h = h
        self.nbytes = lib.cfs_stage_plan_bytes(h)
        self.offsets = [lib.cfs_stage_plan_offset(h, i) for i in range(n)]
        self.lengths = [lib.cfs_stage_plan_length(h, i) for i in range(n)]

    def free(self):
        if self.h:
            _load().cfs_stage_plan_free(self.h)
            self.h = None


def stage_stats(mountpoint, cache_dir=None):
    """Counters of this process's GPU loader stage on mountpoint (hot_hits,
    bytes_cached, ...); the mount's own counters are colabfs.stats()."""
    return Stage.get(mountpoint, cache_dir).stats()


# ---- batches -------------------------------------------------------------------


class Batch:
    """Items packed back to back: ``data`` (a bytearray, or a DeviceArray on
    the GPU), ``offsets`` and ``lengths`` (bytes), ``items`` (what was asked)."""

    def __init__(self, data, offsets, lengths, items, device):
        self.data = data
        self.offsets = offsets
        self.lengths = lengths
        self.items = items
        self.device = device

    def __len__(self):
        return len(self.lengths)

    @property
    def on_gpu(self):
        return self.device != "cpu"

    def item(self, i):
        """The bytes of item i (host batches: a memoryview, no copy)."""
        if self.on_gpu:
            return bytes(self.data.to_host()[self.offsets[i]:self.offsets[i] + self.lengths[i]])
        return memoryview(self.data)[self.offsets[i]:self.offsets[i] + self.lengths[i]]

    @property
    def __array_interface__(self):
        if self.on_gpu:
            raise AttributeError("__array_interface__")
        return HostArray(self.data, (len(self.data),), "|u1").__array_interface__

    @property
    def __cuda_array_interface__(self):
        if not self.on_gpu:
            raise AttributeError("__cuda_array_interface__")
        return self.data.__cuda_array_interface__

    def __dlpack__(self, stream=None, **kw):
        """The batch bytes as a 1-D uint8 DLPack tensor (no copy): host memory
        on the CPU path, device memory on the GPU."""
        if self.on_gpu:
            return self.data.__dlpack__(stream)
        ptr = _host_ptr(self.data).value if len(self.data) else 0
        return _dlpack(self, ptr, (len(self.data),), "|u1", "cpu")

    def __dlpack_device__(self):
        return _dl_device(self.device)

    def padded(self, maxlen=None, pad=0):
        """(array [n, maxlen] uint8, lengths) with every item cut or padded."""
        lib = _load()
        n = len(self)
        if maxlen is None:
            maxlen = max(self.lengths, default=0)
        offs, lens = _u64s(self.offsets), _u32s(self.lengths)
        out_lens = bytearray(4 * max(n, 1))
        if not self.on_gpu:
            out = bytearray(n * maxlen)
            _check(lib.cfs_gather_cpu(_host_ptr(self.data), _host_ptr(offs), _host_ptr(lens), n,
                                      maxlen, 1, pad, _host_ptr(out), _host_ptr(out_lens), None),
                   "gather")
            got = list((ctypes.c_uint32 * n).from_buffer(out_lens)) if n else []
            return HostArray(out, (n, maxlen), "|u1"), got
        d_offs = DeviceArray.from_host(offs, device=self.data.device)
        d_lens = DeviceArray.from_host(lens, device=self.data.device)
        d_out_lens = DeviceArray(4 * max(n, 1), (n,), "<u4", self.data.device)
        out = DeviceArray(n * maxlen, (n, maxlen), "|u1", self.data.device)
        _check(lib.cfs_gather_cuda(ctypes.c_void_p(self.data.ptr), ctypes.c_void_p(d_offs.ptr),
                                   ctypes.c_void_p(d_lens.ptr), n, maxlen, 1, pad,
                                   ctypes.c_void_p(out.ptr), ctypes.c_void_p(d_out_lens.ptr),
                                   None), "gather")
        _check(lib.cfs_gpu_stream_sync(None), "sync")
        return out, [min(ln, maxlen) for ln in self.lengths]

    def normalize(self, h, w, c, mean, std, dtype="float32"):
        """Items that are uint8 HWC images of h x w x c -> [n, c, h, w] of
        (x / 255 - mean) / std, as float32, float16 or bfloat16."""
        lib = _load()
        n = len(self)
        if any(ln != h * w * c for ln in self.lengths):
            raise ValueError("every item must be %d bytes (h * w * c)" % (h * w * c))
        if any(self.offsets[i] != i * h * w * c for i in range(n)):
            raise ValueError("items are not packed back to back")
        code, size, typestr = DTYPES[dtype]
        m = (ctypes.c_float * c)(*mean)
        s = (ctypes.c_float * c)(*std)
        shape = (n, c, h, w)
        if not self.on_gpu:
            out = bytearray(n * c * h * w * size)
            _check(lib.cfs_normalize_cpu(_host_ptr(self.data), _host_ptr(out), n, h, w, c, m, s,
                                         code, None), "normalize")
            return HostArray(out, shape, typestr)
        out = DeviceArray(n * c * h * w * size, shape, typestr, self.data.device)
        _check(lib.cfs_normalize_cuda(ctypes.c_void_p(self.data.ptr), ctypes.c_void_p(out.ptr),
                                      n, h, w, c, m, s, code, None), "normalize")
        _check(lib.cfs_gpu_stream_sync(None), "sync")
        return out


# ---- loader --------------------------------------------------------------------


def _find_mount(path):
    """The FUSE mountpoint under which path lies."""
    mp = mount_of(path, fuse_only=True)
    if mp is None:
        raise ValueError("%s is not under a FUSE mount; pass mountpoint=" % path)
    return mp


class Loader:
    """Batches of files (or (path, offset, length) ranges) from a colabfs mount.

    items       paths, or (path, offset, length) tuples (length None: to the end)
    batch_size  items per batch; the last batch may be shorter unless drop_last
    depth       batches prepared ahead by a background thread
    device      None: the first CUDA device if there is one, else "cpu";
                "cpu"; or a device number
    mountpoint  default: the FUSE mount holding the first item
    cache_dir   default: the cache folder the mount names (user.colabfs.cache_dir)
    verify      check every cached block's crc32c (default True)
    """

    def __init__(self, items, batch_size, depth=2, device=None, mountpoint=None,
                 cache_dir=None, verify=True, drop_last=False, ring_slot_bytes=16 << 20,
                 ring_slots=4):
        self.items = [(i, 0, None) if isinstance(i, (str, bytes, os.PathLike)) else tuple(i)
                      for i in items]
        if batch_size < 1 or depth < 1:
            raise ValueError("batch_size and depth must be >= 1")
        self.batch_size = batch_size
        self.depth = depth
        self.drop_last = drop_last
        if mountpoint is None:
            if not self.items:
                raise ValueError("no items and no mountpoint")
            mountpoint = _find_mount(os.fsdecode(self.items[0][0]))
        self.stage = Stage.get(mountpoint, cache_dir, verify)
        if device is None:
            device = 0 if gpu_available() else "cpu"
        self.device = device
        self._ring = None
        self._stream = None
        if device != "cpu":
            lib = _load()
            r, st = ctypes.c_void_p(), ctypes.c_void_p()
            _check(lib.cfs_stage_ring_new(self.stage._h, device, ring_slot_bytes, ring_slots,
                                          ctypes.byref(r)), "pinned ring")
            self._ring = r
            _check(lib.cfs_gpu_stream_new(device, ctypes.byref(st)), "stream")
            self._stream = st

    def __len__(self):
        n = len(self.items) // self.batch_size
        if not self.drop_last and len(self.items) % self.batch_size:
            n += 1
        return n

    def _make(self, chunk):
        lib = _load()
        p = self.stage.plan(chunk)
        try:
            if self.device == "cpu":
                data = bytearray(p.nbytes)
                _check(lib.cfs_stage_copy(self.stage._h, p.h, _host_ptr(data), len(data)),
                       "copy")
            else:
                data = DeviceArray(p.nbytes, (p.nbytes,), "|u1", self.device)
                _check(lib.cfs_stage_ring_copy(self._ring, p.h, ctypes.c_void_p(data.ptr),
                                               p.nbytes, self._stream), "copy to the GPU")
                _check(lib.cfs_gpu_stream_sync(self._stream), "sync")
            return Batch(data, p.offsets, p.lengths, chunk, self.device)
        finally:
            p.free()

    def __iter__(self):
        self._epochs = getattr(self, "_epochs", 0) + 1
        if self._epochs > 1:
            self.stage.refresh_hot()  # the counts of the last epoch choose the hot blocks
        chunks = [self.items[i:i + self.batch_size]
                  for i in range(0, len(self.items), self.batch_size)]
        if self.drop_last and chunks and len(chunks[-1]) < self.batch_size:
            chunks.pop()
        q = queue.Queue(maxsize=self.depth)
        stop = threading.Event()

        def put(item):
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def work():
            for c in chunks:
                if stop.is_set():
                    return
                try:
                    item = self._make(c)
                except BaseException as e:  # handed to the consumer
                    item = e
                if not put(item) or isinstance(item, BaseException):
                    return
            put(None)

        t = threading.Thread(target=work, name="colabfs-loader", daemon=True)
        t.start()
        try:
            while True:
                b = q.get()
                if b is None:
                    return
                if isinstance(b, BaseException):
                    raise b
                yield b
        finally:
            stop.set()
            t.join()

    def close(self):
        lib = _load()
        if self._ring:
            lib.cfs_stage_ring_free(self._ring)
            self._ring = None
        if self._stream:
            lib.cfs_gpu_stream_free(self._stream)
            self._stream = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

