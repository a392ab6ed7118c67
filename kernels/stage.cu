/* stage.cu: the pinned staging ring and the runtime helpers of
 * libcolabfs-gpu (see stage_gpu.h). */
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <pthread.h>

#include <cuda_runtime.h>

#include "stage_gpu.h"

#define RING_MAX 16

struct cfs_stage_ring {
	struct cfs_stage *s;
	int device;
	uint64_t slot_bytes;
	unsigned n;
	void *buf[RING_MAX];
	cudaStream_t st[RING_MAX];
	cudaEvent_t ev[RING_MAX];
	pthread_mutex_t lock;
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
	*out = r;
	return 0;
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
	for (uint64_t off = 0; off < total && !rc; off += r->slot_bytes) {
		uint64_t len = total - off < r->slot_bytes ? total - off : r->slot_bytes;
		/* the slot's previous copy must be done before it is refilled */
		if ((rc = cuda_err(cudaEventSynchronize(r->ev[k]), "event sync")) != 0)
			break;
		if ((rc = cfs_stage_copy_part(r->s, p, off, len, r->buf[k])) != 0)
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
	for (unsigned i = 0; i < used; i++) {
		int r2 = cuda_err(cudaStreamWaitEvent((cudaStream_t)stream, r->ev[i], 0),
				  "stream wait");
		if (!rc)
			rc = r2;
	}
	pthread_mutex_unlock(&r->lock);
	return rc;
}
