/* ctlname_oracle: a second, independent reading of the control-name grammar
 * in src/core/ctlname.h, for the property test (tests/unit/test_ctlname.c) and
 * the fuzzer (tests/fuzz/fuzz_ctlname.c) to compare cfs_ctlname_parse with.
 * Written from the header's prose, with strtoull where the module counts
 * digits itself: a number is 1 to 19 decimal digits and at most INT64_MAX. */
#ifndef CFS_CTLNAME_ORACLE_H
#define CFS_CTLNAME_ORACLE_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctlname.h"

static int oracle_num(const char *s, size_t n, uint64_t *v)
{
	char buf[24];
	if (n == 0 || n > 19)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (s[i] < '0' || s[i] > '9')
			return -1;
	memcpy(buf, s, n);
	buf[n] = '\0';
	errno = 0;
	unsigned long long x = strtoull(buf, NULL, 10);
	if (errno || x > (unsigned long long)INT64_MAX)
		return -1;
	*v = x;
	return 0;
}

/* Same contract as cfs_ctlname_parse. */
static int oracle_parse(const char *name, struct cfs_ctlname *r)
{
	static const char evict_to[] = "user.colabfs.evict.to.", warm[] = "user.colabfs.warm.",
			  history[] = "user.colabfs.history.", order[] = "user.colabfs.order.";
	memset(r, 0, sizeof(*r));
	if (!strcmp(name, "user.colabfs.pid"))
		r->kind = CFS_CTL_PID;
	else if (!strcmp(name, "user.colabfs.stats"))
		r->kind = CFS_CTL_STATS;
	else if (!strcmp(name, "user.colabfs.cache_dir"))
		r->kind = CFS_CTL_CACHE_DIR;
	else if (!strcmp(name, "user.colabfs.evict"))
		r->kind = CFS_CTL_EVICT;
	else if (!strcmp(name, "user.colabfs.sync"))
		r->kind = CFS_CTL_SYNC;
	else if (!strcmp(name, "user.colabfs.history"))
		r->kind = CFS_CTL_HISTORY;
	else if (!strncmp(name, history, sizeof(history) - 1)) {
		const char *t = name + sizeof(history) - 1;
		r->kind = CFS_CTL_HISTORY;
		if (oracle_num(t, strlen(t), &r->off))
			return -EINVAL;
	}
	else if (!strncmp(name, order, sizeof(order) - 1)) {
		const char *t = name + sizeof(order) - 1;
		r->kind = CFS_CTL_ORDER;
		if (oracle_num(t, strlen(t), &r->off))
			return -EINVAL;
	}
	else if (!strncmp(name, evict_to, sizeof(evict_to) - 1)) {
		const char *t = name + sizeof(evict_to) - 1;
		r->kind = CFS_CTL_EVICT_TO;
		if (oracle_num(t, strlen(t), &r->target))
			return -EINVAL;
	} else if (!strncmp(name, warm, sizeof(warm) - 1)) {
		const char *t = name + sizeof(warm) - 1, *dot = strchr(t, '.');
		r->kind = CFS_CTL_WARM;
		if (!dot || oracle_num(t, (size_t)(dot - t), &r->off) ||
		    oracle_num(dot + 1, strlen(dot + 1), &r->len))
			return -EINVAL;
	} else {
		return -ENODATA;
	}
	return 0;
}

#endif
