/* gpuops: the loader's batch kernels, each as a CPU implementation (the test
 * oracle and the fallback) and a CUDA launcher with the same signature.
 *
 *   normalize  uint8 images [n, h, w, c] (HWC, packed) -> [n, c, h, w]
 *              (NCHW) of float32, float16 or bfloat16:
 *                out = (in / 255 - mean[ch]) / std[ch]
 *              computed as fmaf(in, a[ch], b[ch]) with a = 1 / (255 std),
 *              b = -mean / std (rounded to float once, on the host), and
 *              float16/bfloat16 rounded to nearest even by the same code on
 *              both sides, so GPU and CPU results are bit-identical.
 *   gather     variable-length records (record i: lens[i] elements of
 *              elem_size bytes at byte offset offs[i] of src) -> a padded
 *              batch [n, maxlen] (longer records truncated, the rest filled
 *              with the byte pad) and the lengths kept, min(lens[i], maxlen).
 *   crc32c     crcs[i] = crc32c of lens[i] bytes at byte offset offs[i] of
 *              data (Castagnoli, as cache/crc32c.h).
 *
 * CPU functions take host pointers and ignore stream.  CUDA launchers
 * (built only with nvcc, in libcolabfs-gpu) take device pointers for the
 * arrays (src, dst, offs, lens, crcs, out_lens), host pointers for mean/std,
 * and a cudaStream_t passed as void * (NULL: the default stream); they only
 * enqueue work.  All return 0, -EINVAL (bad arguments: c outside 1..16, an
 * unknown dtype or elem_size, a NULL array with n > 0) or -EIO (a CUDA
 * error, logged to stderr once).  No CUDA types here. */
#ifndef CFS_GPUOPS_H
#define CFS_GPUOPS_H

#include <stddef.h>
#include <stdint.h>

#include "stage.h" /* CFS_GPU_API */

#ifdef __cplusplus
extern "C" {
#endif

enum cfs_dtype { CFS_DT_F32 = 0, CFS_DT_F16 = 1, CFS_DT_BF16 = 2 };
#define CFS_NORM_MAX_C 16

CFS_GPU_API int cfs_normalize_cpu(const uint8_t *src, void *dst, uint32_t n, uint32_t h,
				  uint32_t w, uint32_t c, const float *mean, const float *std,
				  int dtype, void *stream);
CFS_GPU_API int cfs_gather_cpu(const uint8_t *src, const uint64_t *offs, const uint32_t *lens,
			       uint32_t n, uint32_t maxlen, uint32_t elem_size, uint8_t pad,
			       uint8_t *dst, uint32_t *out_lens, void *stream);
CFS_GPU_API int cfs_crc32c_batch_cpu(const uint8_t *data, const uint64_t *offs,
				     const uint32_t *lens, uint32_t n, uint32_t *crcs,
				     void *stream);

CFS_GPU_API int cfs_normalize_cuda(const uint8_t *src, void *dst, uint32_t n, uint32_t h,
				   uint32_t w, uint32_t c, const float *mean, const float *std,
				   int dtype, void *stream);
CFS_GPU_API int cfs_gather_cuda(const uint8_t *src, const uint64_t *offs, const uint32_t *lens,
				uint32_t n, uint32_t maxlen, uint32_t elem_size, uint8_t pad,
				uint8_t *dst, uint32_t *out_lens, void *stream);
CFS_GPU_API int cfs_crc32c_batch_cuda(const uint8_t *data, const uint64_t *offs,
				      const uint32_t *lens, uint32_t n, uint32_t *crcs,
				      void *stream);

/* The chunked crc32c the CUDA kernel runs (per-chunk crcs joined with
 * crc32c_combine), on the CPU: lets the host test the combining math. */
CFS_GPU_API uint32_t cfs_crc32c_chunked(const uint8_t *p, uint64_t len, unsigned chunks);

/* 1 when the library was built with CUDA (the *_cuda functions then work;
 * otherwise they return -ENOSYS). */
CFS_GPU_API int cfs_gpu_built(void);

#ifdef __cplusplus
}
#endif

#endif
