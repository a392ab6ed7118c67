/* tier_mac: the CPU cost of the shared cache tier's value formats (issue 24).
 *
 *     make bench/tier_mac && bench/tier_mac [MiB]    (default 1024: 1 GiB)
 *
 * Encodes (what a publish does) and checks (what a hit does) MiB of blocks
 * through tiered.h's own code, cfs_tiered_value_encode and
 * cfs_tiered_value_check, one thread, for block sizes 1 MiB and 64 KiB, in
 * both formats: 2 (HMAC-SHA256 under a 64-byte key) and 1 (crc32c, the
 * unkeyed format of --shared-cache-trusted).  Each row is the best of 3
 * runs of CPU time (CLOCK_PROCESS_CPUTIME_ID) over the whole amount; the
 * per-GiB figures are seconds of one core per GiB of block data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tiered.h"

static double cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 1024;
	static const char KEY[] =
		"5f0c9e2b7a41d38e6c1f0a9b2d4e6f8071a3c5e7092b4d6f8a1c3e5079b2d4f6";
	struct cfs_tiered_key *key = NULL;
	if (mib <= 0 || cfs_tiered_key_new(KEY, strlen(KEY), &key)) {
		fprintf(stderr, "usage: tier_mac [MiB > 0]\n");
		return 2;
	}
	static const unsigned sizes[] = { 1u << 20, 64u << 10 };
	unsigned char *data = malloc(1u << 20), *v = malloc((1u << 20) + CFS_TIERED_HEADER_MAC);
	for (unsigned i = 0; i < (1u << 20); i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	printf("tier values over %ld MiB of blocks, one core, best of 3 (s of CPU per GiB):\n", mib);
	printf("| format | block | encode s/GiB | check s/GiB | check GB/s |\n|---|---|---|---|---|\n");
	int bad = 0;
	for (int keyed = 1; keyed >= 0; keyed--) {
		for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
			unsigned bs = sizes[si];
			uint64_t blocks = ((uint64_t)mib << 20) / bs;
			const struct cfs_tiered_key *k = keyed ? key : NULL;
			size_t n = cfs_tiered_header(k) + bs;
			double best_e = 1e9, best_c = 1e9;
			for (int round = 0; round < 3; round++) {
				double t0 = cpu_s();
				for (uint64_t b = 0; b < blocks; b++) {
					struct cfs_tiered_block id = { "1AbCdEfGhIjKlMnOpQrStUvWxYz012345",
								       "0B1a2b3c4d5e6f7g8h9i", b, bs };
					bad |= cfs_tiered_value_encode(k, &id, v, data, bs);
				}
				double t1 = cpu_s();
				for (uint64_t b = 0; b < blocks; b++) {
					struct cfs_tiered_block id = { "1AbCdEfGhIjKlMnOpQrStUvWxYz012345",
								       "0B1a2b3c4d5e6f7g8h9i", 0, bs };
					/* the value of block 0 (the last encoded was not) */
					if (b == 0)
						cfs_tiered_value_encode(k, &id, v, data, bs);
					bad |= cfs_tiered_value_check(k, &id, v, n, bs) != CFS_TIERED_OK;
				}
				double t2 = cpu_s();
				if (t1 - t0 < best_e)
					best_e = t1 - t0;
				if (t2 - t1 < best_c)
					best_c = t2 - t1;
			}
			double gib = (double)mib / 1024.0;
			printf("| %s | %u KiB | %.3f | %.3f | %.2f |\n",
			       keyed ? "2 (HMAC-SHA256)" : "1 (crc32c)", bs >> 10, best_e / gib,
			       best_c / gib, (double)mib * 1048576.0 / best_c / 1e9);
		}
	}
	free(data);
	free(v);
	cfs_tiered_key_free(key);
	if (bad)
		fprintf(stderr, "tier_mac: a value did not round-trip\n");
	return bad ? 1 : 0;
}
