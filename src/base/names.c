/* names: Drive name -> POSIX name rule, and the names Drive cannot take (see names.h). */
#include "names.h"

#include "hash.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int cfs_names_sanitize(const char *name, char *out, size_t cap)
{
	static const char slash[] = "\xef\xbc\x8f"; /* U+FF0F */
	static const char dot[] = "\xef\xbc\x8e";   /* U+FF0E */
	if (cap < CFS_NAME_MAX + 1)
		return -EINVAL;
	if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
		out[0] = '\0';
		for (size_t i = 0; name[i]; i++)
			strcat(out, dot);
		return 0;
	}
	size_t o = 0;
	for (const char *p = name; *p; p++) {
		const char *piece = p;
		size_t plen = 1;
		char ctl[4];
		if (*p == '/') {
			piece = slash;
			plen = 3;
		} else if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			/* a control character: its Control Pictures sign, U+2400 + c
			 * (U+2421 for DEL), so a newline cannot split a listing */
			unsigned c = *p == 0x7f ? 0x21 : (unsigned char)*p;
			ctl[0] = '\xe2';
			ctl[1] = (char)(0x90 + (c >> 6));
			ctl[2] = (char)(0x80 | (c & 0x3f));
			piece = ctl;
			plen = 3;
		} else {
			/* take a whole UTF-8 sequence so we never cut one in half */
			unsigned char c = (unsigned char)*p;
			size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
			while (plen < want && p[plen] && ((unsigned char)p[plen] & 0xc0) == 0x80)
				plen++;
			p += plen - 1;
		}
		if (o + plen > CFS_NAME_MAX)
			break;
		memcpy(out + o, piece, plen);
		o += plen;
	}
	if (o == 0)
		out[o++] = '_';
	out[o] = '\0';
	return 0;
}

/* The length of the well-formed UTF-8 sequence at p (1 to 4), or 0 (see
 * cfs_names_check; the table is Unicode's "Well-Formed UTF-8 Byte
 * Sequences", Table 3-7). */
static size_t utf8_seq(const unsigned char *p)
{
	unsigned char c = p[0];
	if (c < 0x80)
		return 1;
	size_t n;
	unsigned char lo = 0x80, hi = 0xbf; /* the range of the second byte */
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		if (c == 0xe0)
			lo = 0xa0; /* overlong below */
		else if (c == 0xed)
			hi = 0x9f; /* surrogates above */
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		if (c == 0xf0)
			lo = 0x90; /* overlong below */
		else if (c == 0xf4)
			hi = 0x8f; /* past U+10FFFF above */
	} else {
		return 0; /* a continuation byte, 0xC0, 0xC1, 0xF5 to 0xFF */
	}
	if (p[1] < lo || p[1] > hi)
		return 0; /* a NUL ends the check here: the sequence is cut short */
	for (size_t i = 2; i < n; i++)
		if ((p[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

int cfs_names_check(const char *name)
{
	size_t len = strlen(name);
	if (len == 0)
		return -EINVAL;
	if (len > CFS_NAME_MAX)
		return -ENAMETOOLONG;
	for (const unsigned char *p = (const unsigned char *)name; *p;) {
		size_t n = utf8_seq(p);
		if (!n)
			return -EILSEQ;
		p += n;
	}
	return 0;
}

int cfs_names_id_ok(const char *id, size_t max)
{
	size_t n = 0;
	for (; id[n]; n++) {
		char c = id[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '-' || c == '_') || n + 1 >= max)
			return 0;
	}
	return n > 0;
}

static int cmp_entry(const void *a, const void *b)
{
	const struct cfs_names_entry *x = *(const struct cfs_names_entry *const *)a;
	const struct cfs_names_entry *y = *(const struct cfs_names_entry *const *)b;
	int c = strcmp(x->name, y->name);
	if (c)
		return c;
	if (x->ctime_ns != y->ctime_ns)
		return x->ctime_ns < y->ctime_ns ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* "stem (tag).ext", cut to fit CFS_NAME_MAX at a UTF-8 boundary of the stem.
 * level 0: 8 hex digits of the id's hash; 1: all 16; 2: the id itself. */
static char *suffixed(const char *name, const char *id, int level)
{
	char tag[CFS_NAME_MAX / 2];
	uint64_t h = cfs_hash_fnv1a(id);
	if (level == 0)
		snprintf(tag, sizeof(tag), " (%.8llx)", (unsigned long long)(h >> 32));
	else if (level == 1)
		snprintf(tag, sizeof(tag), " (%.16llx)", (unsigned long long)h);
	else
		snprintf(tag, sizeof(tag), " (%.100s)", id);
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		dot = name + strlen(name);
	size_t stem = (size_t)(dot - name), ext = strlen(dot), tl = strlen(tag);
	if (ext + tl > CFS_NAME_MAX)
		ext = 0; /* absurd extension: drop it rather than the tag */
	while (stem + tl + ext > CFS_NAME_MAX ||
	       (stem > 0 && ((unsigned char)name[stem] & 0xc0) == 0x80))
		stem--;
	char *out = malloc(stem + tl + ext + 1);
	if (!out)
		return NULL;
	memcpy(out, name, stem);
	memcpy(out + stem, tag, tl);
	memcpy(out + stem + tl, dot, ext);
	out[stem + tl + ext] = '\0';
	return out;
}

static int cmp_final(const void *a, const void *b)
{
	const struct cfs_names_entry *x = *(const struct cfs_names_entry *const *)a;
	const struct cfs_names_entry *y = *(const struct cfs_names_entry *const *)b;
	return strcmp(x->final, y->final);
}

int cfs_names_assign(struct cfs_names_entry *e, size_t n)
{
	struct cfs_names_entry **v = calloc(n ? n : 1, sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		v[i] = &e[i];
	qsort(v, n, sizeof(*v), cmp_entry);
	size_t i;
	for (i = 0; i < n; i++) {
		int first = i == 0 || strcmp(v[i - 1]->name, v[i]->name) != 0;
		v[i]->final = first ? strdup(v[i]->name) : suffixed(v[i]->name, v[i]->id, 0);
		if (!v[i]->final)
			break;
	}
	/* A suffixed name can meet a real one ("a (1f2e3d4c).txt" uploaded back
	 * to Drive) or another suffixed one: such suffixed names take a longer
	 * tag, then the whole id. */
	for (int level = 1; i == n && level <= 2; level++) {
		qsort(v, n, sizeof(*v), cmp_final);
		int clash = 0;
		for (size_t k = 0; i == n && k + 1 < n; k++) {
			if (strcmp(v[k]->final, v[k + 1]->final) != 0)
				continue;
			clash = 1;
			/* the suffixed one of the two gives way (both, if both are) */
			for (size_t m = k; m <= k + 1; m++) {
				if (strcmp(v[m]->final, v[m]->name) == 0)
					continue;
				char *x = suffixed(v[m]->name, v[m]->id, level);
				if (!x) {
					i = 0;
					break;
				}
				free(v[m]->final);
				v[m]->final = x;
			}
		}
		if (!clash)
			break;
	}
	free(v);
	if (i < n) {
		for (size_t j = 0; j < n; j++) {
			free(e[j].final);
			e[j].final = NULL;
		}
		return -ENOMEM;
	}
	return 0;
}

int cfs_names_conflict(const char *name, int64_t wall_s, char *out, size_t cap)
{
	time_t t = (time_t)wall_s;
	struct tm tm;
	char stamp[32], tag[64];
	if (!gmtime_r(&t, &tm) || !strftime(stamp, sizeof(stamp), "%Y-%m-%d %H%M%S", &tm))
		return -EINVAL;
	snprintf(tag, sizeof(tag), " (conflict %s)", stamp);
	size_t max = cap ? cap - 1 : 0;
	if (max > CFS_NAME_MAX)
		max = CFS_NAME_MAX;
	const char *dot = strrchr(name, '.');
	if (!dot || dot == name)
		dot = name + strlen(name);
	size_t stem = (size_t)(dot - name), ext = strlen(dot), tl = strlen(tag);
	if (tl > max)
		return -ENAMETOOLONG;
	if (ext + tl > max) { /* no room for it beside the tag: part of the stem */
		stem += ext;
		ext = 0;
	}
	/* cut the stem to fit, never in the middle of a UTF-8 sequence */
	while (stem + tl + ext > max || (stem > 0 && ((unsigned char)name[stem] & 0xc0) == 0x80))
		stem--;
	memcpy(out, name, stem);
	memcpy(out + stem, tag, tl);
	memcpy(out + stem + tl, name + strlen(name) - ext, ext);
	out[stem + tl + ext] = '\0';
	return 0;
}
