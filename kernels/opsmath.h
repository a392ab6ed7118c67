/* opsmath: the arithmetic the CPU and CUDA kernels share, so their results are
 * bit-identical by construction: the normalisation coefficients, float ->
 * float16/bfloat16 rounding (to nearest even), and crc32c combining
 * (crc(A||B) from crc(A), crc(B) and |B|, as zlib's crc32_combine, with the
 * Castagnoli polynomial).  Header-only; CFS_HD marks functions for both host
 * and device under nvcc.  Pure code. */
#ifndef CFS_OPSMATH_H
#define CFS_OPSMATH_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define CFS_HD static __host__ __device__ __forceinline__
#else
#define CFS_HD static inline
#endif

#define CFS_CRC32C_POLY 0x82F63B78u

struct cfs_norm_coef {
	float a[16], b[16];
};

/* a = 1 / (255 std), b = -mean / std, each rounded to float once. */
static inline int cfs_norm_coef_make(const float *mean, const float *std, uint32_t c,
				     struct cfs_norm_coef *k)
{
	if (c < 1 || c > 16 || !mean || !std)
		return -1;
	memset(k, 0, sizeof(*k));
	for (uint32_t i = 0; i < c; i++) {
		if (!(std[i] != 0.0f))
			return -1;
		k->a[i] = (float)(1.0 / (255.0 * (double)std[i]));
		k->b[i] = (float)(-(double)mean[i] / (double)std[i]);
	}
	return 0;
}

CFS_HD uint32_t cfs_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
	return __float_as_uint(f);
#else
	uint32_t x;
	memcpy(&x, &f, 4);
	return x;
#endif
}

CFS_HD uint16_t cfs_f32_to_f16(float f)
{
	uint32_t x = cfs_f32_bits(f);
	uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
	if (ax >= 0x7f800000u) /* inf, nan (kept quiet) */
		return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
	if (ax >= 0x477ff000u) /* rounds to >= 65520: inf */
		return (uint16_t)(sign | 0x7c00u);
	if (ax < 0x38800000u) { /* below 2^-14: a half subnormal or zero */
		if (ax < 0x33000000u)
			return (uint16_t)sign;
		uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
		uint32_t shift = 126u - e, r = m >> shift;
		uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rem > half || (rem == half && (r & 1)))
			r++;
		return (uint16_t)(sign | r);
	}
	uint32_t h = ((ax >> 13) - (112u << 10)), rem = ax & 0x1fffu;
	if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

CFS_HD uint16_t cfs_f32_to_bf16(float f)
{
	uint32_t x = cfs_f32_bits(f);
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((x >> 16) | 0x40u);
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

/* (a * b) mod P, in zlib's reflected representation (x^0 is bit 31). */
CFS_HD uint32_t cfs_crc_multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;
	while (m) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = (b & 1) ? (b >> 1) ^ CFS_CRC32C_POLY : b >> 1;
	}
	return p;
}

/* x^(8 n) mod P. */
CFS_HD uint32_t cfs_crc_x8n(uint64_t n)
{
	uint32_t p = 1u << 31, sq = 1u << 30; /* 1 and x */
	/* x^8 = x^(2^3): square x three times */
	for (int i = 0; i < 3; i++)
		sq = cfs_crc_multmodp(sq, sq);
	while (n) {
		if (n & 1)
			p = cfs_crc_multmodp(sq, p);
		n >>= 1;
		if (n)
			sq = cfs_crc_multmodp(sq, sq);
	}
	return p;
}

/* crc32c(A || B) from crc32c(A), crc32c(B) and the length of B. */
CFS_HD uint32_t cfs_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return cfs_crc_multmodp(cfs_crc_x8n(len_b), crc_a) ^ crc_b;
}

/* Byte-at-a-time table step (table: the 256-entry reflected table). */
CFS_HD uint32_t cfs_crc32c_bytes(const uint32_t *table, uint32_t crc, const uint8_t *p,
				 uint64_t n)
{
	crc = ~crc;
	for (uint64_t i = 0; i < n; i++)
		crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
	return ~crc;
}

static inline void cfs_crc32c_table(uint32_t *t)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CFS_CRC32C_POLY : c >> 1;
		t[i] = c;
	}
}

#endif
