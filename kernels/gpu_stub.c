/* gpu_stub: the CUDA entry points of libcolabfs-gpu when it is built without
 * nvcc: each returns -ENOSYS (cfs_gpu_device_count 0), so callers such as the
 * Python binding can probe instead of failing to load. */
#include <errno.h>

#include "gpuops.h"
#include "stage_gpu.h"

int cfs_gpu_built(void)
{
	return 0;
}

int cfs_gpu_device_count(void)
{
	return 0;
}

int cfs_gpu_alloc(int device, uint64_t bytes, void **dev)
{
	*dev = 0;
	return -ENOSYS;
}

int cfs_gpu_free(void *dev)
{
	return dev ? -ENOSYS : 0;
}

int cfs_gpu_to_host(void *host, const void *dev, uint64_t n)
{
	return -ENOSYS;
}

int cfs_gpu_to_device(void *dev, const void *host, uint64_t n)
{
	return -ENOSYS;
}

int cfs_gpu_stream_new(int device, void **stream)
{
	*stream = 0;
	return -ENOSYS;
}

int cfs_gpu_stream_free(void *stream)
{
	return stream ? -ENOSYS : 0;
}

int cfs_gpu_stream_sync(void *stream)
{
	return -ENOSYS;
}

int cfs_gpu_host_alloc(uint64_t bytes, void **p)
{
	*p = 0;
	return -ENOSYS;
}

int cfs_gpu_host_free(void *p)
{
	return p ? -ENOSYS : 0;
}

int cfs_stage_ring_new(struct cfs_stage *s, int device, uint64_t slot_bytes, unsigned nslots,
		       struct cfs_stage_ring **out)
{
	*out = 0;
	return -ENOSYS;
}

void cfs_stage_ring_free(struct cfs_stage_ring *r)
{
}

int cfs_stage_ring_copy(struct cfs_stage_ring *r, struct cfs_stage_plan *p, void *dev,
			uint64_t cap, void *stream)
{
	return -ENOSYS;
}

int cfs_normalize_cuda(const uint8_t *src, void *dst, uint32_t n, uint32_t h, uint32_t w,
		       uint32_t c, const float *mean, const float *std, int dtype, void *stream)
{
	return -ENOSYS;
}

int cfs_gather_cuda(const uint8_t *src, const uint64_t *offs, const uint32_t *lens, uint32_t n,
		    uint32_t maxlen, uint32_t elem_size, uint8_t pad, uint8_t *dst,
		    uint32_t *out_lens, void *stream)
{
	return -ENOSYS;
}

int cfs_crc32c_batch_cuda(const uint8_t *data, const uint64_t *offs, const uint32_t *lens,
			  uint32_t n, uint32_t *crcs, void *stream)
{
	return -ENOSYS;
}
