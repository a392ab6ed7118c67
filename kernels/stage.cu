/* stage.cu: the pinned staging ring and the runtime helpers of
 * libcolabfs-gpu (see stage_gpu.h).
 *
 * Registered arenas.  Where the device supports read-only host registration
 * (cudaDevAttrHostRegisterReadOnlySupported), each read-only arena mapping
 * the plans point into is registered once (cudaHostRegister, ReadOnly |
 * Portable; kept until the ring is freed, as the stage keeps old mappings
 * until close) and whole resident blocks are DMA'd straight from it to the
 * device on the first stream, after the rest of the batch went through the
 * pinned ring (a ring slot's copy spans the skipped blocks' bytes too, so
 * the direct copies must land last; no overlap of the two yet).  Then the
 * copied blocks' crc32c is
 * computed on the device (cfs_crc32c_batch_cuda) and their rows re-read
 * (stage_int.h: a punched slot stays pinned by the registration, so a DMA
 * can read an old block's pages; the crc on the copy catches that, the row
 * check catches a rewrite during the copy).  A block that fails either is
 * copied again through the ring.  When registration fails (driver, limits,
 * a file system that refuses pinning) or COLABFS_GPU_NO_REGISTER is set, or
 * the stage has CFS_STAGE_NO_VERIFY (no crc, no proof), only the ring is
 * used.  None of this has run on a GPU yet. */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

#include <cuda_runtime.h>

#include "gpuops.h"
#include "stage_gpu.h"
#include "stage_int.h"

#define RING_MAX 16
#define REG_MAX 512 /* mappings: one per arena (up to 144 classes) and per growth */

struct reg_map {
	const void *base;
	size_t len;
};

struct cfs_stage_ring {
	struct cfs_stage *s;
	int device;
	uint64_t slot_bytes;
	unsigned n;
	void *buf[RING_MAX];
	cudaStream_t st[RING_MAX];
	cudaEvent_t ev[RING_MAX];
	pthread_mutex_t lock;
	int direct;             /* registered path on (0 after a registration failed) */
	struct reg_map reg[REG_MAX];
	unsigned nreg;
	void *d_meta;           /* device: offs[cap] u64, lens[cap] u32, crcs[cap] u32 */
	size_t meta_cap;
	uint64_t direct_blocks, direct_fallbacks;
};

static int cuda_err(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "colabfs-gpu: %s: %s\n", what, cudaGetErrorString(e));
	if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver)
		return -ENODEV;
	if (e == cudaErrorMemoryAllocation)
		return -ENOMEM;
	return -EIO;
}

extern "C" int cfs_gpu_device_count(void)
{
	int n = 0;
	if (cudaGetDeviceCount(&n) != cudaSuccess) {
		cudaGetLastError(); /* clear it */
		return 0;
	}
	return n;
}

extern "C" int cfs_gpu_alloc(int device, uint64_t bytes, void **dev)
{
	*dev = NULL;
	int rc = cuda_err(cudaSetDevice(device), "cudaSetDevice");
	if (!rc)
		rc = cuda_err(cudaMalloc(dev, bytes ? bytes : 1), "cudaMalloc");
	return rc;
}

extern "C" int cfs_gpu_free(void *dev)
{
	return dev ? cuda_err(cudaFree(dev), "cudaFree") : 0;
}

extern "C" int cfs_gpu_to_host(void *host, const void *dev, uint64_t n)
{
	return cuda_err(cudaMemcpy(host, dev, n, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
}

extern "C" int cfs_gpu_to_device(void *dev, const void *host, uint64_t n)
{
	return cuda_err(cudaMemcpy(dev, host, n, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
}

extern "C" int cfs_gpu_stream_new(int device, void **stream)
{
	cudaStream_t s = NULL;
	*stream = NULL;
	int rc = cuda_err(cudaSetDevice(device), "cudaSetDevice");
	if (!rc)
		rc = cuda_err(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
	if (!rc)
		*stream = (void *)s;
	return rc;
}

extern "C" int cfs_gpu_stream_free(void *stream)
{
	return stream ? cuda_err(cudaStreamDestroy((cudaStream_t)stream), "stream destroy") : 0;
}

extern "C" int cfs_gpu_stream_sync(void *stream)
{
	return cuda_err(cudaStreamSynchronize((cudaStream_t)stream), "stream sync");
}

extern "C" int cfs_gpu_host_alloc(uint64_t bytes, void **p)
{
	*p = NULL;
	cudaError_t e = cudaHostAlloc(p, bytes ? bytes : 1, cudaHostAllocPortable);
	if (e != cudaSuccess) {
		*p = NULL;
		cudaGetLastError(); /* not sticky: the caller falls back to plain memory */
		return e == cudaErrorMemoryAllocation ? -ENOMEM : -ENODEV;
	}
	return 0;
}

extern "C" int cfs_gpu_host_free(void *p)
{
	return p ? cuda_err(cudaFreeHost(p), "cudaFreeHost") : 0;
}

extern "C" void cfs_stage_ring_free(struct cfs_stage_ring *r)
{
	if (!r)
		return;
	cudaSetDevice(r->device);
	for (unsigned i = 0; i < r->nreg; i++)
		cudaHostUnregister((void *)r->reg[i].base);
	if (r->d_meta)
		cudaFree(r->d_meta);
	for (unsigned i = 0; i < r->n; i++) {
		if (r->ev[i]) {
			cudaEventSynchronize(r->ev[i]);
			cudaEventDestroy(r->ev[i]);
		}
		if (r->st[i])
			cudaStreamDestroy(r->st[i]);
		if (r->buf[i])
			cudaFreeHost(r->buf[i]);
	}
	pthread_mutex_destroy(&r->lock);
	free(r);
}

extern "C" int cfs_stage_ring_new(struct cfs_stage *s, int device, uint64_t slot_bytes,
				  unsigned nslots, struct cfs_stage_ring **out)
{
	*out = NULL;
	if (!s || nslots < 1 || nslots > RING_MAX || slot_bytes < 4096)
		return -EINVAL;
	struct cfs_stage_ring *r = (struct cfs_stage_ring *)calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	pthread_mutex_init(&r->lock, NULL);
	r->s = s;
	r->device = device;
	r->slot_bytes = slot_bytes;
	r->n = nslots;
	int rc = cuda_err(cudaSetDevice(device), "cudaSetDevice");
	for (unsigned i = 0; i < nslots && !rc; i++) {
		rc = cuda_err(cudaHostAlloc(&r->buf[i], slot_bytes, cudaHostAllocPortable),
			      "cudaHostAlloc");
		if (!rc)
			rc = cuda_err(cudaStreamCreateWithFlags(&r->st[i], cudaStreamNonBlocking),
				      "stream");
		if (!rc)
			rc = cuda_err(cudaEventCreateWithFlags(&r->ev[i], cudaEventDisableTiming),
				      "event");
	}
	if (rc) {
		cfs_stage_ring_free(r);
		return rc;
	}
	int ro = 0;
	const char *off = getenv("COLABFS_GPU_NO_REGISTER");
	if (cudaDeviceGetAttribute(&ro, cudaDevAttrHostRegisterReadOnlySupported, device) !=
	    cudaSuccess)
		cudaGetLastError();
	r->direct = ro && !(off && *off && *off != '0') &&
		    !(cfs_stage_flags(s) & (CFS_STAGE_NO_VERIFY | CFS_STAGE_NO_CACHE));
	*out = r;
	return 0;
}

/* Registers the mapping [base, base + len) once; 0 when it is registered. */
static int ensure_registered(struct cfs_stage_ring *r, const void *base, size_t len)
{
	for (unsigned i = 0; i < r->nreg; i++)
		if (r->reg[i].base == base && r->reg[i].len == len)
			return 0;
	if (r->nreg == REG_MAX)
		return -ENOSPC;
	cudaError_t e = cudaHostRegister((void *)base, len,
					 cudaHostRegisterReadOnly | cudaHostRegisterPortable);
	if (e != cudaSuccess) {
		fprintf(stderr, "colabfs-gpu: cudaHostRegister of a cache arena (%zu bytes): %s; "
				"using the pinned ring only\n", len, cudaGetErrorString(e));
		cudaGetLastError();
		return -EIO;
	}
	r->reg[r->nreg].base = base;
	r->reg[r->nreg].len = len;
	r->nreg++;
	return 0;
}

/* Keeps the direct pieces whose mapping is (now) registered; a registration
 * failure turns the direct path off for later batches (a full table only
 * sends that mapping's pieces through the ring). */
static size_t direct_register(struct cfs_stage_ring *r, struct cfs_stage_direct *d, size_t nd)
{
	size_t k = 0;
	for (size_t i = 0; i < nd; i++) {
		int rc = r->direct ? ensure_registered(r, d[i].map, d[i].maplen) : -EIO;
		if (rc == 0)
			d[k++] = d[i];
		else if (rc != -ENOSPC)
			r->direct = 0;
	}
	return k;
}

/* Enqueues the direct copies and their device crcs on stream 0 of the ring
 * and waits for them (the ring copies of the batch must be done, since a
 * ring slot's copy covers the bytes of the skipped pieces too). */
static int direct_enqueue(struct cfs_stage_ring *r, const struct cfs_stage_direct *d, size_t n,
			  void *dev)
{
	int rc = 0;

	size_t need = n * 16;
	if (need > r->meta_cap) {
		if (r->d_meta)
			cudaFree(r->d_meta);
		r->d_meta = NULL;
		r->meta_cap = 0;
		if ((rc = cuda_err(cudaMalloc(&r->d_meta, need * 2), "cudaMalloc")) != 0)
			return rc;
		r->meta_cap = need * 2;
	}
	uint64_t *offs = (uint64_t *)malloc(n * 8);
	uint32_t *lens = (uint32_t *)malloc(n * 4);
	if (!offs || !lens) {
		free(offs);
		free(lens);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n && !rc; i++) {
		offs[i] = d[i].dst;
		lens[i] = d[i].len;
		rc = cuda_err(cudaMemcpyAsync((char *)dev + d[i].dst, d[i].src, d[i].len,
					      cudaMemcpyHostToDevice, r->st[0]),
			      "cudaMemcpyAsync (registered)");
	}
	char *m = (char *)r->d_meta;
	if (!rc)
		rc = cuda_err(cudaMemcpyAsync(m, offs, n * 8, cudaMemcpyHostToDevice, r->st[0]),
			      "offs H2D");
	if (!rc)
		rc = cuda_err(cudaMemcpyAsync(m + n * 8, lens, n * 4, cudaMemcpyHostToDevice,
					      r->st[0]), "lens H2D");
	/* both host arrays must live until those copies ran */
	if (!rc)
		rc = cuda_err(cudaStreamSynchronize(r->st[0]), "stream sync");
	free(offs);
	free(lens);
	if (!rc)
		rc = cfs_crc32c_batch_cuda((const uint8_t *)dev, (const uint64_t *)m,
					   (const uint32_t *)(m + n * 8), (uint32_t)n,
					   (uint32_t *)(m + n * 12), r->st[0]);
	return rc;
}

extern "C" int cfs_stage_ring_copy(struct cfs_stage_ring *r, struct cfs_stage_plan *p, void *dev,
				   uint64_t cap, void *stream)
{
	uint64_t total = cfs_stage_plan_bytes(p);
	if (cap < total)
		return -ENOSPC;
	pthread_mutex_lock(&r->lock);
	int rc = cuda_err(cudaSetDevice(r->device), "cudaSetDevice");
	unsigned used = 0, k = 0;
	struct cfs_stage_direct *d = NULL;
	size_t nd = 0;
	unsigned char *skip = NULL;
	if (!rc && r->direct && (rc = cfs_stage_direct_list(r->s, p, &d, &nd)) == 0 && nd &&
	    (nd = direct_register(r, d, nd)) != 0) {
		skip = (unsigned char *)calloc(cfs_stage_plan_pieces(p), 1);
		if (!skip)
			rc = -ENOMEM;
		for (size_t i = 0; skip && i < nd; i++)
			skip[d[i].piece] = 1;
	}
	for (uint64_t off = 0; off < total && !rc; off += r->slot_bytes) {
		uint64_t len = total - off < r->slot_bytes ? total - off : r->slot_bytes;
		/* the slot's previous copy must be done before it is refilled */
		if ((rc = cuda_err(cudaEventSynchronize(r->ev[k]), "event sync")) != 0)
			break;
		if ((rc = cfs_stage_copy_part_skip(r->s, p, off, len, r->buf[k], skip)) != 0)
			break;
		rc = cuda_err(cudaMemcpyAsync((char *)dev + off, r->buf[k], len,
					      cudaMemcpyHostToDevice, r->st[k]),
			      "cudaMemcpyAsync");
		if (!rc)
			rc = cuda_err(cudaEventRecord(r->ev[k], r->st[k]), "event record");
		if (used < r->n)
			used++;
		k = (k + 1) % r->n;
	}
	if (!rc && nd) {
		/* the direct copies go after every ring copy (a ring slot's copy also
		 * covers the skipped pieces' bytes, with junk); then the device crc and
		 * the row check; a failed piece alone goes again through the ring */
		for (unsigned i = 0; i < used && !rc; i++)
			rc = cuda_err(cudaStreamWaitEvent(r->st[0], r->ev[i], 0), "stream wait");
		if (!rc)
			rc = direct_enqueue(r, d, nd, dev);
		uint32_t *crcs = (uint32_t *)malloc(nd * 4);
		unsigned char *ok = (unsigned char *)malloc(nd);
		if (!crcs || !ok)
			rc = -ENOMEM;
		if (!rc)
			rc = cuda_err(cudaMemcpyAsync(crcs, (char *)r->d_meta + nd * 12, nd * 4,
						      cudaMemcpyDeviceToHost, r->st[0]), "crc D2H");
		if (!rc)
			rc = cuda_err(cudaStreamSynchronize(r->st[0]), "stream sync");
		if (!rc)
			rc = cfs_stage_direct_check(r->s, p, d, nd, ok);
		for (size_t i = 0; i < nd && !rc; i++) {
			if (ok[i] && crcs[i] == d[i].crc) {
				r->direct_blocks++;
				continue;
			}
			r->direct_fallbacks++;
			for (uint64_t o = 0; o < d[i].len && !rc; o += r->slot_bytes) {
				uint64_t l = d[i].len - o < r->slot_bytes ? d[i].len - o : r->slot_bytes;
				if ((rc = cuda_err(cudaEventSynchronize(r->ev[k]), "event sync")) != 0 ||
				    (rc = cfs_stage_copy_part(r->s, p, d[i].dst + o, l, r->buf[k])) != 0)
					break;
				rc = cuda_err(cudaMemcpyAsync((char *)dev + d[i].dst + o, r->buf[k], l,
							      cudaMemcpyHostToDevice, r->st[k]),
					      "cudaMemcpyAsync");
				if (!rc)
					rc = cuda_err(cudaEventRecord(r->ev[k], r->st[k]), "event record");
				if (used < r->n)
					used++;
				k = (k + 1) % r->n;
			}
		}
		free(crcs);
		free(ok);
	}
	free(d);
	free(skip);
	for (unsigned i = 0; i < used; i++) {
		int r2 = cuda_err(cudaStreamWaitEvent((cudaStream_t)stream, r->ev[i], 0),
				  "stream wait");
		if (!rc)
			rc = r2;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}
