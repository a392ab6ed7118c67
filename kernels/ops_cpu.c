/* ops_cpu: CPU implementations of the batch kernels (see gpuops.h) — the test
 * oracle for the CUDA launchers and the fallback without a GPU.  Straight
 * loops over the same arithmetic as the CUDA code (opsmath.h). */
#include "gpuops.h"

#include <errno.h>
#include <math.h>
#include <string.h>

#include "crc32c.h"
#include "opsmath.h"

int cfs_normalize_cpu(const uint8_t *src, void *dst, uint32_t n, uint32_t h, uint32_t w,
		      uint32_t c, const float *mean, const float *std, int dtype, void *stream)
{
	struct cfs_norm_coef k;
	(void)stream;
	if (cfs_norm_coef_make(mean, std, c, &k) != 0 || dtype < CFS_DT_F32 || dtype > CFS_DT_BF16)
		return -EINVAL;
	size_t plane = (size_t)h * w, img = plane * c, total = img * n;
	if (total && (!src || !dst))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		for (size_t px = 0; px < plane; px++) {
			const uint8_t *s = src + i * img + px * c;
			for (uint32_t ch = 0; ch < c; ch++) {
				float v = fmaf((float)s[ch], k.a[ch], k.b[ch]);
				size_t o = i * img + ch * plane + px;
				if (dtype == CFS_DT_F32)
					((float *)dst)[o] = v;
				else if (dtype == CFS_DT_F16)
					((uint16_t *)dst)[o] = cfs_f32_to_f16(v);
				else
					((uint16_t *)dst)[o] = cfs_f32_to_bf16(v);
			}
		}
	}
	return 0;
}

int cfs_gather_cpu(const uint8_t *src, const uint64_t *offs, const uint32_t *lens, uint32_t n,
		   uint32_t maxlen, uint32_t elem_size, uint8_t pad, uint8_t *dst,
		   uint32_t *out_lens, void *stream)
{
	(void)stream;
	if (elem_size != 1 && elem_size != 2 && elem_size != 4 && elem_size != 8)
		return -EINVAL;
	if (n && (!src || !offs || !lens || !dst))
		return -EINVAL;
	size_t row = (size_t)maxlen * elem_size;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t l = lens[i] < maxlen ? lens[i] : maxlen;
		size_t b = (size_t)l * elem_size;
		memcpy(dst + i * row, src + offs[i], b);
		memset(dst + i * row + b, pad, row - b);
		if (out_lens)
			out_lens[i] = l;
	}
	return 0;
}

int cfs_crc32c_batch_cpu(const uint8_t *data, const uint64_t *offs, const uint32_t *lens,
			 uint32_t n, uint32_t *crcs, void *stream)
{
	(void)stream;
	if (n && (!data || !offs || !lens || !crcs))
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		crcs[i] = cfs_crc32c(0, data + offs[i], lens[i]);
	return 0;
}

uint32_t cfs_crc32c_chunked(const uint8_t *p, uint64_t len, unsigned chunks)
{
	uint32_t table[256], crc = 0;
	cfs_crc32c_table(table);
	if (chunks == 0)
		chunks = 1;
	uint64_t per = (len + chunks - 1) / chunks;
	for (unsigned i = 0; i < chunks; i++) {
		uint64_t a = (uint64_t)i * per, b = a + per;
		if (a > len)
			a = len;
		if (b > len)
			b = len;
		uint32_t c = cfs_crc32c_bytes(table, 0, p + a, b - a);
		crc = i == 0 ? c : cfs_crc32c_combine(crc, c, b - a);
	}
	return crc;
}
