/* size: byte counts (see size.h). */
#include "size.h"

#include <errno.h>

int cfs_size_parse(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;
	if (!s)
		return -EINVAL;
	while (*p == ' ')
		p++;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	unsigned shift = 0;
	switch (*p) {
	case 'k': case 'K': shift = 10; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 't': case 'T': shift = 40; p++; break;
	default: break;
	}
	if (shift && *p == 'i')
		p++;
	if (*p == 'B' || *p == 'b')
		p++;
	while (*p == ' ')
		p++;
	if (*p || (shift && v > (UINT64_MAX >> shift)))
		return -EINVAL;
	*out = v << shift;
	return 0;
}
