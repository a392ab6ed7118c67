/* Unit tests: crc32c, table and SSE4.2 paths against known values and each
 * other. */
#include <stdint.h>
#include <stdlib.h>

#include "check.h"
#include "crc32c.h"

static void test_vectors(void)
{
	unsigned char b[32];
	CHECK(cfs_crc32c_sw(0, "123456789", 9) == 0xE3069283u);
	CHECK(cfs_crc32c_hw(0, "123456789", 9) == 0xE3069283u);
	CHECK(cfs_crc32c(0, "123456789", 9) == 0xE3069283u);
	CHECK(cfs_crc32c(0, "", 0) == 0);
	/* RFC 3720 B.4 */
	memset(b, 0, sizeof(b));
	CHECK(cfs_crc32c_sw(0, b, 32) == 0x8A9136AAu);
	CHECK(cfs_crc32c_hw(0, b, 32) == 0x8A9136AAu);
	memset(b, 0xff, sizeof(b));
	CHECK(cfs_crc32c_sw(0, b, 32) == 0x62A8AB43u);
	CHECK(cfs_crc32c_hw(0, b, 32) == 0x62A8AB43u);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)i;
	CHECK(cfs_crc32c_sw(0, b, 32) == 0x46DD794Eu);
	CHECK(cfs_crc32c_hw(0, b, 32) == 0x46DD794Eu);
	for (int i = 0; i < 32; i++)
		b[i] = (unsigned char)(31 - i);
	CHECK(cfs_crc32c_sw(0, b, 32) == 0x113FDB5Cu);
	CHECK(cfs_crc32c_hw(0, b, 32) == 0x113FDB5Cu);
}

static void test_paths_agree(void)
{
	size_t n = 70000;
	unsigned char *buf = malloc(n + 16);
	uint64_t x = 88172645463325252ULL;
	int same = 1, chain = 1;

	for (size_t i = 0; i < n + 16; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	/* every alignment and many lengths, including the short tails */
	for (size_t align = 0; align < 8; align++)
		for (size_t len = 0; len < 300; len++)
			if (cfs_crc32c_sw(0, buf + align, len) != cfs_crc32c_hw(0, buf + align, len))
				same = 0;
	for (size_t len = 1000; len <= n; len += 7919)
		if (cfs_crc32c_sw(0, buf + 3, len) != cfs_crc32c_hw(0, buf + 3, len))
			same = 0;
	CHECK(same);
	/* checksumming in pieces equals checksumming at once */
	uint32_t whole = cfs_crc32c(0, buf, n);
	for (size_t cut = 0; cut < n; cut += 4099) {
		if (cfs_crc32c_sw(cfs_crc32c_sw(0, buf, cut), buf + cut, n - cut) != whole)
			chain = 0;
		if (cfs_crc32c_hw(cfs_crc32c_hw(0, buf, cut), buf + cut, n - cut) != whole)
			chain = 0;
	}
	CHECK(chain);
	/* a flipped bit changes it */
	buf[777] ^= 4;
	CHECK(cfs_crc32c(0, buf, n) != whole);
	free(buf);
}

int main(void)
{
	test_vectors();
	test_paths_agree();
	printf("test_crc32c: sse4.2 %s\n", cfs_crc32c_hw_available() ? "used" : "not available");
	return check_done("test_crc32c");
}
