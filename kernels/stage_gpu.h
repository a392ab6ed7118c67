/* stage_gpu: the CUDA side of the loader — a pinned staging ring that moves a
 * plan's bytes (stage.h) to device memory, and the few runtime calls the
 * Python binding needs (device buffers, streams), so Python needs no CUDA
 * package of its own.
 *
 * The ring is nslots pinned host buffers (cudaHostAlloc) of slot_bytes, each
 * with its own stream and event.  Copying a plan fills slot k from the cache
 * (cfs_stage_copy_part: the arena copy with its torn-read guard, or a read
 * through the mount), enqueues cudaMemcpyAsync to the device on slot k's
 * stream and records its event; before slot k is filled again its event is
 * waited for.  At the end the caller's stream is made to wait for every
 * slot's event, so kernels the caller enqueues next see the whole batch, and
 * the call returns without waiting for the last copies.
 *
 * Built only with nvcc; without CUDA every function returns -ENOSYS and
 * cfs_gpu_device_count() 0.  Streams are cudaStream_t passed as void *.
 * Thread rules: a ring is used by one thread at a time (it locks).  Returns 0,
 * -errno from the stage, -ENODEV (no device), -ENOMEM, -EIO (CUDA error). */
#ifndef CFS_STAGE_GPU_H
#define CFS_STAGE_GPU_H

#include <stdint.h>

#include "stage.h"

#ifdef __cplusplus
extern "C" {
#endif

struct cfs_stage_ring;

CFS_GPU_API int cfs_gpu_device_count(void);
CFS_GPU_API int cfs_gpu_alloc(int device, uint64_t bytes, void **dev);
CFS_GPU_API int cfs_gpu_free(void *dev); /* NULL-safe */
/* Synchronous copies, for tests and small transfers. */
CFS_GPU_API int cfs_gpu_to_host(void *host, const void *dev, uint64_t n);
CFS_GPU_API int cfs_gpu_to_device(void *dev, const void *host, uint64_t n);
CFS_GPU_API int cfs_gpu_stream_new(int device, void **stream);
CFS_GPU_API int cfs_gpu_stream_free(void *stream); /* NULL-safe */
CFS_GPU_API int cfs_gpu_stream_sync(void *stream);
/* Page-locked host memory (cudaHostAlloc, portable) for the hot-block cache;
 * -ENOSYS without CUDA, -ENOMEM/-ENODEV when CUDA cannot give it. */
CFS_GPU_API int cfs_gpu_host_alloc(uint64_t bytes, void **p);
CFS_GPU_API int cfs_gpu_host_free(void *p); /* NULL-safe */

CFS_GPU_API int cfs_stage_ring_new(struct cfs_stage *s, int device, uint64_t slot_bytes,
				   unsigned nslots, struct cfs_stage_ring **out);
CFS_GPU_API void cfs_stage_ring_free(struct cfs_stage_ring *r); /* NULL-safe; waits */
/* Copies the plan's batch to dev (device memory, cap bytes) as above. */
CFS_GPU_API int cfs_stage_ring_copy(struct cfs_stage_ring *r, struct cfs_stage_plan *p,
				    void *dev, uint64_t cap, void *stream);

#ifdef __cplusplus
}
#endif

#endif
