/* ops.cu: CUDA launchers of the batch kernels (see gpuops.h for what each
 * computes; opsmath.h holds the arithmetic shared with ops_cpu.c, so results
 * are bit-identical to the CPU oracle).
 *
 *   normalize  one thread per pixel: reads its c bytes (HWC), writes c
 *              values, one per plane (NCHW), so writes coalesce along x.
 *   gather     one CUDA block per record, threads striding over the padded
 *              row.
 *   crc32c     one CUDA block per record; each of 256 threads takes a
 *              contiguous chunk (table in shared memory), then the chunk
 *              crcs are joined pairwise in a tree with crc32c_combine. */
#include <cerrno>
#include <cstdio>

#include <cuda_runtime.h>

#include "gpuops.h"
#include "opsmath.h"

#define CRC_THREADS 256

static int cuda_check(cudaError_t e, const char *what)
{
	if (e == cudaSuccess)
		return 0;
	fprintf(stderr, "colabfs-gpu: %s: %s\n", what, cudaGetErrorString(e));
	return -EIO;
}

__global__ void k_normalize(const uint8_t *src, void *dst, uint64_t pixels, uint32_t plane,
			    uint32_t c, cfs_norm_coef k, int dtype)
{
	uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= pixels)
		return;
	uint64_t img = i / plane, px = i % plane;
	const uint8_t *s = src + i * c;
	for (uint32_t ch = 0; ch < c; ch++) {
		float v = fmaf((float)s[ch], k.a[ch], k.b[ch]);
		uint64_t o = (img * c + ch) * plane + px;
		if (dtype == CFS_DT_F32)
			((float *)dst)[o] = v;
		else if (dtype == CFS_DT_F16)
			((uint16_t *)dst)[o] = cfs_f32_to_f16(v);
		else
			((uint16_t *)dst)[o] = cfs_f32_to_bf16(v);
	}
}

extern "C" int cfs_normalize_cuda(const uint8_t *src, void *dst, uint32_t n, uint32_t h,
				  uint32_t w, uint32_t c, const float *mean, const float *std,
				  int dtype, void *stream)
{
	cfs_norm_coef k;
	if (cfs_norm_coef_make(mean, std, c, &k) != 0 || dtype < CFS_DT_F32 || dtype > CFS_DT_BF16)
		return -EINVAL;
	uint64_t pixels = (uint64_t)n * h * w;
	if (!pixels)
		return 0;
	if (!src || !dst)
		return -EINVAL;
	unsigned threads = 256;
	uint64_t blocks = (pixels + threads - 1) / threads;
	if (blocks > 0x7fffffffu)
		return -EINVAL;
	k_normalize<<<(unsigned)blocks, threads, 0, (cudaStream_t)stream>>>(
		src, dst, pixels, h * w, c, k, dtype);
	return cuda_check(cudaGetLastError(), "normalize");
}

__global__ void k_gather(const uint8_t *src, const uint64_t *offs, const uint32_t *lens,
			 uint32_t maxlen, uint32_t elem, uint8_t pad, uint8_t *dst,
			 uint32_t *out_lens)
{
	uint32_t i = blockIdx.x;
	uint32_t l = lens[i] < maxlen ? lens[i] : maxlen;
	uint64_t row = (uint64_t)maxlen * elem, b = (uint64_t)l * elem;
	const uint8_t *s = src + offs[i];
	uint8_t *d = dst + i * row;
	for (uint64_t j = threadIdx.x; j < row; j += blockDim.x)
		d[j] = j < b ? s[j] : pad;
	if (out_lens && threadIdx.x == 0)
		out_lens[i] = l;
}

extern "C" int cfs_gather_cuda(const uint8_t *src, const uint64_t *offs, const uint32_t *lens,
			       uint32_t n, uint32_t maxlen, uint32_t elem_size, uint8_t pad,
			       uint8_t *dst, uint32_t *out_lens, void *stream)
{
	if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
		return -EINVAL;
	if (!n)
		return 0;
	if (!src || !offs || !lens || !dst || n > 0x7fffffffu)
		return -EINVAL;
	k_gather<<<n, 256, 0, (cudaStream_t)stream>>>(src, offs, lens, maxlen, elem_size, pad, dst,
						      out_lens);
	return cuda_check(cudaGetLastError(), "gather");
}

__constant__ uint32_t c_crc_table[256];

__global__ void k_crc32c(const uint8_t *data, const uint64_t *offs, const uint32_t *lens,
			 uint32_t *crcs)
{
	__shared__ uint32_t table[256];
	__shared__ uint32_t crc[CRC_THREADS];
	__shared__ uint64_t len[CRC_THREADS];
	uint32_t t = threadIdx.x, i = blockIdx.x;
	table[t] = c_crc_table[t]; /* CRC_THREADS == 256 */
	__syncthreads();
	uint64_t total = lens[i], per = (total + CRC_THREADS - 1) / CRC_THREADS;
	uint64_t a = (uint64_t)t * per, b = a + per;
	if (a > total)
		a = total;
	if (b > total)
		b = total;
	crc[t] = cfs_crc32c_bytes(table, 0, data + offs[i] + a, b - a);
	len[t] = b - a;
	__syncthreads();
	for (uint32_t stride = 1; stride < CRC_THREADS; stride *= 2) {
		if (t % (2 * stride) == 0) {
			crc[t] = cfs_crc32c_combine(crc[t], crc[t + stride], len[t + stride]);
			len[t] += len[t + stride];
		}
		__syncthreads();
	}
	if (t == 0)
		crcs[i] = crc[0];
}

extern "C" int cfs_crc32c_batch_cuda(const uint8_t *data, const uint64_t *offs,
				     const uint32_t *lens, uint32_t n, uint32_t *crcs,
				     void *stream)
{
	static int table_ready;
	if (!n)
		return 0;
	if (!data || !offs || !lens || !crcs || n > 0x7fffffffu)
		return -EINVAL;
	if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE)) {
		uint32_t tab[256];
		cfs_crc32c_table(tab);
		int rc = cuda_check(cudaMemcpyToSymbol(c_crc_table, tab, sizeof(tab)), "crc table");
		if (rc)
			return rc;
		__atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
	}
	k_crc32c<<<n, CRC_THREADS, 0, (cudaStream_t)stream>>>(data, offs, lens, crcs);
	return cuda_check(cudaGetLastError(), "crc32c");
}

extern "C" int cfs_gpu_built(void)
{
	return 1;
}
