/* crc32c: table (slicing-by-8) and SSE4.2 implementations (see crc32c.h). */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t table[8][256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ POLY : c >> 1;
		table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
}

static inline uint64_t load_le64(const unsigned char *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

uint32_t cfs_crc32c_sw(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint32_t c = ~crc;

	pthread_once(&table_once, table_init);
	while (n && ((uintptr_t)p & 7)) {
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
		n--;
	}
	while (n >= 8) {
		uint64_t w = load_le64(p) ^ c;
		c = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
		    table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
		    table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		c = (c >> 8) ^ table[0][(c ^ *p++) & 0xff];
	return ~c;
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t crc, const void *buf, size_t n)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;

	while (n && ((uintptr_t)p & 7)) {
		c = _mm_crc32_u8((uint32_t)c, *p++);
		n--;
	}
	while (n >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
		p += 8;
		n -= 8;
	}
	while (n--)
		c = _mm_crc32_u8((uint32_t)c, *p++);
	return ~(uint32_t)c;
}

int cfs_crc32c_hw_available(void)
{
	static int state; /* 0 unknown, 1 yes, 2 no */
	int s = __atomic_load_n(&state, __ATOMIC_RELAXED);
	if (!s) {
		__builtin_cpu_init();
		s = __builtin_cpu_supports("sse4.2") ? 1 : 2;
		__atomic_store_n(&state, s, __ATOMIC_RELAXED);
	}
	return s == 1;
}

uint32_t cfs_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
	return cfs_crc32c_hw_available() ? crc_sse42(crc, p, n) : cfs_crc32c_sw(crc, p, n);
}
#else
int cfs_crc32c_hw_available(void)
{
	return 0;
}

uint32_t cfs_crc32c_hw(uint32_t crc, const void *p, size_t n)
{
	return cfs_crc32c_sw(crc, p, n);
}
#endif

uint32_t cfs_crc32c(uint32_t crc, const void *p, size_t n)
{
	return cfs_crc32c_hw(crc, p, n);
}
