/* ctlname: control attribute names (see ctlname.h). */
#include "ctlname.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define NUM_DIGITS_MAX 19 /* INT64_MAX has 19 digits */

/* Reads one number at s: 1 to 19 decimal digits, at most
 * CFS_CTLNAME_NUM_MAX.  Returns a pointer just past it, or NULL. */
static const char *parse_num(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t n = 0;
	for (; s[n] >= '0' && s[n] <= '9'; n++) {
		if (n == NUM_DIGITS_MAX)
			return NULL;
		unsigned d = (unsigned)(s[n] - '0');
		if (v > (CFS_CTLNAME_NUM_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	if (n == 0)
		return NULL;
	*out = v;
	return s + n;
}

static int starts(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int cfs_ctlname_parse(const char *name, struct cfs_ctlname *out)
{
	memset(out, 0, sizeof(*out));
	const char *p;
	if (strcmp(name, CFS_XATTR_PID) == 0) {
		out->kind = CFS_CTL_PID;
	} else if (strcmp(name, CFS_XATTR_STATS) == 0) {
		out->kind = CFS_CTL_STATS;
	} else if (strcmp(name, CFS_XATTR_CACHE_DIR) == 0) {
		out->kind = CFS_CTL_CACHE_DIR;
	} else if (strcmp(name, CFS_XATTR_EVICT) == 0) {
		out->kind = CFS_CTL_EVICT;
	} else if (strcmp(name, CFS_XATTR_SYNC) == 0) {
		out->kind = CFS_CTL_SYNC;
	} else if (strcmp(name, CFS_XATTR_HISTORY) == 0) {
		out->kind = CFS_CTL_HISTORY;
	} else if (starts(name, CFS_XATTR_HISTORY_FROM)) {
		out->kind = CFS_CTL_HISTORY;
		p = parse_num(name + strlen(CFS_XATTR_HISTORY_FROM), &out->off);
		if (!p || *p)
			return -EINVAL;
	} else if (starts(name, CFS_XATTR_EVICT_TO)) {
		out->kind = CFS_CTL_EVICT_TO;
		p = parse_num(name + strlen(CFS_XATTR_EVICT_TO), &out->target);
		if (!p || *p)
			return -EINVAL;
	} else if (starts(name, CFS_XATTR_ORDER)) {
		out->kind = CFS_CTL_ORDER;
		p = parse_num(name + strlen(CFS_XATTR_ORDER), &out->off);
		if (!p || *p)
			return -EINVAL;
	} else if (starts(name, CFS_XATTR_WARM)) {
		out->kind = CFS_CTL_WARM;
		p = parse_num(name + strlen(CFS_XATTR_WARM), &out->off);
		if (!p || *p != '.')
			return -EINVAL;
		p = parse_num(p + 1, &out->len);
		if (!p || *p)
			return -EINVAL;
	} else {
		return -ENODATA;
	}
	return 0;
}

int cfs_ctlname_format(const struct cfs_ctlname *r, char *buf, size_t cap)
{
	int n;
	switch (r->kind) {
	case CFS_CTL_PID:
		n = snprintf(buf, cap, "%s", CFS_XATTR_PID);
		break;
	case CFS_CTL_STATS:
		n = snprintf(buf, cap, "%s", CFS_XATTR_STATS);
		break;
	case CFS_CTL_EVICT:
		n = snprintf(buf, cap, "%s", CFS_XATTR_EVICT);
		break;
	case CFS_CTL_CACHE_DIR:
		n = snprintf(buf, cap, "%s", CFS_XATTR_CACHE_DIR);
		break;
	case CFS_CTL_SYNC:
		n = snprintf(buf, cap, "%s", CFS_XATTR_SYNC);
		break;
	case CFS_CTL_HISTORY:
		if (r->off > CFS_CTLNAME_NUM_MAX)
			return -EINVAL;
		n = r->off ? snprintf(buf, cap, "%s%" PRIu64, CFS_XATTR_HISTORY_FROM, r->off)
			   : snprintf(buf, cap, "%s", CFS_XATTR_HISTORY);
		break;
	case CFS_CTL_ORDER:
		if (r->off > CFS_CTLNAME_NUM_MAX)
			return -EINVAL;
		n = snprintf(buf, cap, "%s%" PRIu64, CFS_XATTR_ORDER, r->off);
		break;
	case CFS_CTL_EVICT_TO:
		if (r->target > CFS_CTLNAME_NUM_MAX)
			return -EINVAL;
		n = snprintf(buf, cap, "%s%" PRIu64, CFS_XATTR_EVICT_TO, r->target);
		break;
	case CFS_CTL_WARM:
		if (r->off > CFS_CTLNAME_NUM_MAX || r->len > CFS_CTLNAME_NUM_MAX)
			return -EINVAL;
		n = snprintf(buf, cap, "%s%" PRIu64 ".%" PRIu64, CFS_XATTR_WARM, r->off, r->len);
		break;
	default:
		return -EINVAL;
	}
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int cfs_ctlname_allowed(enum cfs_ctlname_kind kind, uint32_t caller, uint32_t owner)
{
	if (kind == CFS_CTL_PID || kind == CFS_CTL_STATS || kind == CFS_CTL_CACHE_DIR ||
	    kind == CFS_CTL_HISTORY)
		return 0;
	return caller == 0 || caller == owner ? 0 : -EPERM;
}

const char *cfs_ctlname_verb(enum cfs_ctlname_kind kind)
{
	switch (kind) {
	case CFS_CTL_PID: return "pid";
	case CFS_CTL_STATS: return "stats";
	case CFS_CTL_EVICT: return "evict";
	case CFS_CTL_EVICT_TO: return "evict to";
	case CFS_CTL_WARM: return "warm";
	case CFS_CTL_CACHE_DIR: return "cache dir";
	case CFS_CTL_SYNC: return "sync";
	case CFS_CTL_HISTORY: return "history";
	case CFS_CTL_ORDER: return "order";
	}
	return "?";
}
