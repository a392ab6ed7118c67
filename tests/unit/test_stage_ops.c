/* test_stage_ops: the CPU batch kernels (kernels/ops_cpu.c), the oracle of the
 * CUDA ones, against straightforward reference code: normalisation in double
 * precision, float16/bfloat16 rounding checked as "nearest representable,
 * ties to even" by decoding neighbours, gather by hand, crc32c against known
 * vectors and a bitwise reference, and the chunked crc32c (the CUDA kernel's
 * combining math) against the plain one. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "crc32c.h"
#include "gpuops.h"
#include "opsmath.h"

static uint64_t rng = 88172645463325252ULL;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static double half_to_double(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
	return (h & 0x8000) ? -v : v;
}

static double bf16_to_double(uint16_t b)
{
	uint32_t x = (uint32_t)b << 16;
	float f;
	memcpy(&f, &x, 4);
	return f;
}

/* r is the correctly rounded (nearest, ties to even) encoding of v among
 * finite values, judged against its two neighbours. */
static int nearest(double v, uint16_t r, double (*dec)(uint16_t))
{
	double d = fabs(dec(r) - v);
	for (int k = -1; k <= 1; k += 2) {
		uint16_t nb = (uint16_t)(r + k);
		if ((nb & 0x7fff) == 0x7fff || ((r & 0x7fff) == 0 && k < 0))
			continue;
		double dn = fabs(dec(nb) - v);
		if (dn < d || (dn == d && (r & 1)))
			return 0;
	}
	return 1;
}

static void test_conversions(void)
{
	int bad16 = 0, badbf = 0;
	for (int i = 0; i < 200000; i++) {
		uint32_t x = (uint32_t)next();
		float f;
		/* finite values within half's range (2^-27 .. 2^15) */
		x = (x & 0x807fffffu) | ((uint32_t)(100 + next() % 42) << 23); /* < 2^15 */
		memcpy(&f, &x, 4);
		if (!nearest(f, cfs_f32_to_f16(f), half_to_double))
			bad16++;
		if (!nearest(f, cfs_f32_to_bf16(f), bf16_to_double))
			badbf++;
	}
	CHECK_EQ(bad16, 0);
	CHECK_EQ(badbf, 0);
	CHECK_EQ(cfs_f32_to_f16(1.0f), 0x3c00);
	CHECK_EQ(cfs_f32_to_f16(-2.0f), 0xc000);
	CHECK_EQ(cfs_f32_to_f16(65504.0f), 0x7bff);
	CHECK_EQ(cfs_f32_to_f16(65520.0f), 0x7c00);
	CHECK_EQ(cfs_f32_to_f16(ldexpf(1, -24)), 0x0001);
	CHECK_EQ(cfs_f32_to_f16(ldexpf(1, -25)), 0x0000); /* tie: to even */
	CHECK_EQ(cfs_f32_to_f16(1.0f + ldexpf(1, -11)), 0x3c00); /* tie: to even */
	CHECK_EQ(cfs_f32_to_bf16(1.0f), 0x3f80);
	CHECK_EQ(cfs_f32_to_bf16(INFINITY), 0x7f80);
	CHECK(cfs_f32_to_bf16(NAN) & 0x40);
}

static void test_normalize(void)
{
	const uint32_t n = 3, h = 5, w = 7, c = 3;
	const float mean[3] = { 0.485f, 0.456f, 0.406f }, std[3] = { 0.229f, 0.224f, 0.225f };
	size_t cnt = (size_t)n * h * w * c;
	uint8_t *src = malloc(cnt);
	float *out = malloc(cnt * 4);
	uint16_t *o16 = malloc(cnt * 2), *obf = malloc(cnt * 2);
	for (size_t i = 0; i < cnt; i++)
		src[i] = (uint8_t)next();
	src[0] = 0;
	src[1] = 255;
	CHECK_EQ(cfs_normalize_cpu(src, out, n, h, w, c, mean, std, CFS_DT_F32, NULL), 0);
	CHECK_EQ(cfs_normalize_cpu(src, o16, n, h, w, c, mean, std, CFS_DT_F16, NULL), 0);
	CHECK_EQ(cfs_normalize_cpu(src, obf, n, h, w, c, mean, std, CFS_DT_BF16, NULL), 0);
	int bad = 0, bad16 = 0;
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t y = 0; y < h; y++)
			for (uint32_t x = 0; x < w; x++)
				for (uint32_t ch = 0; ch < c; ch++) {
					double in = src[((i * h + y) * w + x) * c + ch];
					double ref = (in / 255.0 - mean[ch]) / std[ch];
					size_t o = ((size_t)(i * c + ch) * h + y) * w + x;
					if (fabs(out[o] - ref) > 1e-5 * (1 + fabs(ref)))
						bad++;
					if (o16[o] != cfs_f32_to_f16(out[o]) ||
					    obf[o] != cfs_f32_to_bf16(out[o]))
						bad16++;
				}
	CHECK_EQ(bad, 0);
	CHECK_EQ(bad16, 0);
	float bad_std[3] = { 1, 0, 1 };
	CHECK_EQ(cfs_normalize_cpu(src, out, n, h, w, c, mean, bad_std, CFS_DT_F32, NULL), -EINVAL);
	CHECK_EQ(cfs_normalize_cpu(src, out, n, h, w, 17, mean, std, CFS_DT_F32, NULL), -EINVAL);
	CHECK_EQ(cfs_normalize_cpu(src, out, n, h, w, c, mean, std, 9, NULL), -EINVAL);
	free(src);
	free(out);
	free(o16);
	free(obf);
}

static void test_gather(void)
{
	uint8_t src[1000];
	for (int i = 0; i < 1000; i++)
		src[i] = (uint8_t)(i * 7 + 1);
	uint64_t offs[4] = { 0, 10, 100, 998 };
	uint32_t lens[4] = { 10, 0, 40, 1 }, got[4];
	uint8_t dst[4 * 16];
	CHECK_EQ(cfs_gather_cpu(src, offs, lens, 4, 16, 1, 0xee, dst, got, NULL), 0);
	int bad = 0;
	for (int i = 0; i < 4; i++) {
		uint32_t l = lens[i] < 16 ? lens[i] : 16;
		if (got[i] != l)
			bad++;
		for (uint32_t j = 0; j < 16; j++)
			if (dst[i * 16 + j] != (j < l ? src[offs[i] + j] : 0xee))
				bad++;
	}
	CHECK_EQ(bad, 0);
	/* 4-byte elements: lengths in elements */
	uint8_t d4[2 * 3 * 4];
	uint64_t o4[2] = { 0, 40 };
	uint32_t l4[2] = { 2, 5 };
	CHECK_EQ(cfs_gather_cpu(src, o4, l4, 2, 3, 4, 0, d4, got, NULL), 0);
	CHECK(memcmp(d4, src, 8) == 0);
	CHECK(d4[8] == 0 && d4[11] == 0);
	CHECK(memcmp(d4 + 12, src + 40, 12) == 0);
	CHECK_EQ(got[0], 2);
	CHECK_EQ(got[1], 3);
	CHECK_EQ(cfs_gather_cpu(src, o4, l4, 2, 3, 3, 0, d4, got, NULL), -EINVAL);
}

static uint32_t crc_bitwise(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
	}
	return ~c;
}

static void test_crc(void)
{
	const uint8_t v[] = "123456789";
	uint64_t off0 = 0;
	uint32_t len9 = 9, out = 0;
	CHECK_EQ(cfs_crc32c_batch_cpu(v, &off0, &len9, 1, &out, NULL), 0);
	CHECK_EQ(out, 0xE3069283u);
	/* RFC 3720 B.4: 32 bytes of zeros, of 0xff */
	uint8_t z[32], f[32];
	memset(z, 0, 32);
	memset(f, 0xff, 32);
	CHECK_EQ(cfs_crc32c(0, z, 32), 0x8A9136AAu);
	CHECK_EQ(cfs_crc32c(0, f, 32), 0x62A8AB43u);

	size_t n = 3 << 20;
	uint8_t *buf = malloc(n);
	for (size_t i = 0; i < n; i++)
		buf[i] = (uint8_t)next();
	uint64_t offs[5] = { 0, 1, 4096, 1 << 20, 5 };
	uint32_t lens[5] = { 1 << 20, 0, 12345, 2 << 20, 1 }, crcs[5];
	CHECK_EQ(cfs_crc32c_batch_cpu(buf, offs, lens, 5, crcs, NULL), 0);
	int bad = 0;
	for (int i = 0; i < 5; i++)
		if (crcs[i] != crc_bitwise(buf + offs[i], lens[i]))
			bad++;
	CHECK_EQ(bad, 0);
	unsigned chunks[] = { 1, 2, 3, 7, 256, 1000 };
	size_t sizes[] = { 0, 1, 255, 256, 4097, 1 << 20 };
	bad = 0;
	for (size_t a = 0; a < 6; a++)
		for (size_t b = 0; b < 6; b++)
			if (cfs_crc32c_chunked(buf, sizes[b], chunks[a]) != cfs_crc32c(0, buf, sizes[b]))
				bad++;
	CHECK_EQ(bad, 0);
	CHECK_EQ(cfs_crc32c_combine(cfs_crc32c(0, v, 4), cfs_crc32c(0, v + 4, 5), 5), 0xE3069283u);
	free(buf);
}

int main(void)
{
	test_conversions();
	test_normalize();
	test_gather();
	test_crc();
	return check_done("test_stage_ops");
}
