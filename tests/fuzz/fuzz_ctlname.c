/* Fuzz harness: the control attribute names of src/core/ctlname.h (libFuzzer).
 *
 * The input up to its first NUL is one attribute name.  Asserted: the parser
 * agrees with the independent reading of the grammar in
 * tests/unit/ctlname_oracle.h (outcome and every field); an accepted name's
 * numbers are at most CFS_CTLNAME_NUM_MAX, so a warm's OFFSET + LENGTH
 * cannot wrap; formatting what was parsed gives a name of at most
 * CFS_CTLNAME_MAX bytes that parses to the same request and is never longer
 * than the input (it only drops leading zeros, and a history's ".0"); and
 * who may use it follows the rule (reads, the history among them, for
 * anyone; evict, warm, order and sync for the owner and root), for caller and
 * owner uids taken from the input's first bytes. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctlname.h"
#include "../unit/ctlname_oracle.h"

static uint32_t take_u32(const uint8_t *d, size_t n, size_t at)
{
	uint32_t v = 0;
	for (size_t i = 0; i < 4 && at + i < n; i++)
		v = v << 8 | d[at + i];
	return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = size;
	const void *nul = memchr(data, 0, size);
	if (nul)
		len = (size_t)((const uint8_t *)nul - data);
	char *name = malloc(len + 1);
	if (!name)
		return 0;
	memcpy(name, data, len);
	name[len] = '\0';

	struct cfs_ctlname got, want;
	int rc = cfs_ctlname_parse(name, &got);
	int orc = oracle_parse(name, &want);
	assert(rc == 0 || rc == -EINVAL || rc == -ENODATA);
	assert(rc == orc);
	if (rc == 0) {
		assert(got.kind == want.kind && got.target == want.target && got.off == want.off &&
		       got.len == want.len);
		assert(got.target <= CFS_CTLNAME_NUM_MAX && got.off <= CFS_CTLNAME_NUM_MAX &&
		       got.len <= CFS_CTLNAME_NUM_MAX);
		assert(got.off + got.len >= got.off); /* no wrap */
		char again[CFS_CTLNAME_MAX];
		struct cfs_ctlname back;
		assert(cfs_ctlname_format(&got, again, sizeof(again)) == 0);
		assert(strlen(again) <= len);
		assert(cfs_ctlname_parse(again, &back) == 0);
		assert(back.kind == got.kind && back.target == got.target && back.off == got.off &&
		       back.len == got.len);

		/* the caller and owner uids: the bytes after the NUL, else 0 */
		size_t at = nul ? len + 1 : size;
		uint32_t caller = take_u32(data, size, at), owner = take_u32(data, size, at + 4);
		int reads = got.kind == CFS_CTL_PID || got.kind == CFS_CTL_STATS ||
			    got.kind == CFS_CTL_CACHE_DIR || got.kind == CFS_CTL_HISTORY;
		int may = cfs_ctlname_allowed(got.kind, caller, owner);
		assert(may == 0 || may == -EPERM);
		assert((may == 0) == (reads || caller == 0 || caller == owner));
	}
	free(name);
	return 0;
}
