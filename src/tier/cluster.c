/* cluster: Redis Cluster routing, pure (see cluster.h). */
#include "cluster.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "err.h"

uint16_t cfs_cluster_crc16(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint16_t crc = 0;
	for (size_t i = 0; i < n; i++) {
		crc ^= (uint16_t)(b[i] << 8);
		for (int k = 0; k < 8; k++)
			crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
	}
	return crc;
}

unsigned cfs_cluster_slot(const char *key, size_t len)
{
	const char *open = memchr(key, '{', len);
	if (open) {
		size_t rest = len - (size_t)(open - key) - 1;
		const char *close = memchr(open + 1, '}', rest);
		if (close && close > open + 1) /* "{}" is no tag: the whole key */
			return cfs_cluster_crc16(open + 1, (size_t)(close - open - 1)) &
			       (CFS_CLUSTER_SLOTS - 1);
	}
	return cfs_cluster_crc16(key, len) & (CFS_CLUSTER_SLOTS - 1);
}

static int is_text(const struct cfs_cluster_reply *r)
{
	return r && (r->type == CFS_RESP_STRING || r->type == CFS_RESP_STATUS) && (r->str || !r->len);
}

static int get_int(const struct cfs_cluster_reply *r, long long lo, long long hi, long long *v)
{
	if (!r || r->type != CFS_RESP_INTEGER || r->integer < lo || r->integer > hi)
		return CFS_E_PROTO;
	*v = r->integer;
	return 0;
}

/* The index of node [host, port, ...] in m, added when new. */
static int node_index(struct cfs_cluster_map *m, const struct cfs_cluster_reply *r,
		      const char *seed_host, unsigned *idx)
{
	long long port;
	if (!r || r->type != CFS_RESP_ARRAY || r->n < 2 || !is_text(r->el[0]) ||
	    get_int(r->el[1], 1, 65535, &port))
		return CFS_E_PROTO;
	const struct cfs_cluster_reply *h = r->el[0];
	if (h->len >= CFS_CLUSTER_HOST_MAX || (h->len && memchr(h->str, 0, h->len)))
		return CFS_E_PROTO;
	char host[CFS_CLUSTER_HOST_MAX];
	if (h->len)
		memcpy(host, h->str, h->len);
	host[h->len] = '\0';
	if (!host[0] || strcmp(host, "?") == 0) /* the node does not know its address */
		snprintf(host, sizeof(host), "%s", seed_host ? seed_host : "");
	if (!host[0])
		return CFS_E_PROTO;
	for (unsigned i = 0; i < m->nnodes; i++)
		if (m->node[i].port == (int)port && strcmp(m->node[i].host, host) == 0) {
			*idx = i;
			return 0;
		}
	if (m->nnodes >= CFS_CLUSTER_MAX_NODES)
		return -ENOSPC;
	snprintf(m->node[m->nnodes].host, sizeof(m->node[0].host), "%s", host);
	m->node[m->nnodes].port = (int)port;
	*idx = m->nnodes++;
	return 0;
}

static void clear(struct cfs_cluster_map *m)
{
	m->nnodes = 0;
	m->covered = 0;
	for (unsigned s = 0; s < CFS_CLUSTER_SLOTS; s++) {
		m->master[s] = CFS_CLUSTER_NO_NODE;
		for (int k = 0; k < CFS_CLUSTER_REPLICAS; k++)
			m->replica[s][k] = CFS_CLUSTER_NO_NODE;
	}
}

int cfs_cluster_map_from_slots(struct cfs_cluster_map *m, const struct cfs_cluster_reply *r,
			       const char *seed_host)
{
	clear(m);
	if (!r || r->type != CFS_RESP_ARRAY)
		return CFS_E_PROTO;
	int rc = 0;
	for (size_t i = 0; !rc && i < r->n; i++) {
		const struct cfs_cluster_reply *e = r->el[i];
		long long lo, hi;
		unsigned master;
		if (!e || e->type != CFS_RESP_ARRAY || e->n < 3 ||
		    get_int(e->el[0], 0, CFS_CLUSTER_SLOTS - 1, &lo) ||
		    get_int(e->el[1], lo, CFS_CLUSTER_SLOTS - 1, &hi) ||
		    node_index(m, e->el[2], seed_host, &master)) {
			rc = CFS_E_PROTO;
			break;
		}
		uint16_t rep[CFS_CLUSTER_REPLICAS];
		size_t nrep = 0;
		for (size_t k = 3; !rc && k < e->n; k++) {
			unsigned ri;
			rc = node_index(m, e->el[k], seed_host, &ri);
			if (!rc && nrep < CFS_CLUSTER_REPLICAS)
				rep[nrep++] = (uint16_t)ri;
		}
		for (long long s = lo; !rc && s <= hi; s++) {
			if (m->master[s] != CFS_CLUSTER_NO_NODE) { /* two owners: not a slot map */
				rc = CFS_E_PROTO;
				break;
			}
			m->master[s] = (uint16_t)master;
			for (size_t k = 0; k < nrep; k++)
				m->replica[s][k] = rep[k];
			m->covered++;
		}
	}
	if (rc)
		clear(m);
	return rc == -ENOSPC ? CFS_E_PROTO : rc;
}

unsigned cfs_cluster_route(const struct cfs_cluster_map *m, unsigned slot, int replica)
{
	if (slot >= CFS_CLUSTER_SLOTS)
		return CFS_CLUSTER_NO_NODE;
	if (replica > 0 && replica <= CFS_CLUSTER_REPLICAS &&
	    m->replica[slot][replica - 1] != CFS_CLUSTER_NO_NODE)
		return m->replica[slot][replica - 1];
	return m->master[slot];
}

int cfs_cluster_redirect(const char *err, size_t len, unsigned *slot, struct cfs_cluster_node *to)
{
	int kind;
	size_t at;
	if (len > 6 && memcmp(err, "MOVED ", 6) == 0) {
		kind = 1;
		at = 6;
	} else if (len > 4 && memcmp(err, "ASK ", 4) == 0) {
		kind = 2;
		at = 4;
	} else {
		return 0;
	}
	unsigned long s = 0;
	size_t digits = 0;
	while (at < len && err[at] >= '0' && err[at] <= '9' && digits < 6) {
		s = s * 10 + (unsigned long)(err[at++] - '0');
		digits++;
	}
	if (!digits || s >= CFS_CLUSTER_SLOTS || at >= len || err[at++] != ' ')
		return CFS_E_PROTO;
	const char *addr = err + at, *end = err + len;
	const char *colon = NULL;
	for (const char *p = addr; p < end; p++)
		if (*p == ':')
			colon = p;
	if (!colon || (size_t)(colon - addr) >= sizeof(to->host))
		return CFS_E_PROTO;
	unsigned long port = 0;
	const char *p = colon + 1;
	if (p >= end)
		return CFS_E_PROTO;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || port > 65535)
			return CFS_E_PROTO;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	if (!port || port > 65535)
		return CFS_E_PROTO;
	size_t hl = (size_t)(colon - addr);
	if (memchr(addr, 0, hl) || memchr(addr, ' ', hl))
		return CFS_E_PROTO;
	memcpy(to->host, addr, hl);
	to->host[hl] = '\0';
	to->port = (int)port;
	*slot = (unsigned)s;
	return kind;
}

/* ---- only the cluster named ---- */

static void unmap(struct cfs_cluster_addr *x)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (x->family == AF_INET6 && memcmp(x->a, mapped, 12) == 0) {
		memmove(x->a, x->a + 12, 4);
		memset(x->a + 4, 0, 12);
		x->family = AF_INET;
	}
}

int cfs_cluster_addr_from(int family, const void *addr, struct cfs_cluster_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (family == AF_INET)
		memcpy(out->a, addr, 4);
	else if (family == AF_INET6)
		memcpy(out->a, addr, 16);
	else
		return -EAFNOSUPPORT;
	out->family = family;
	unmap(out);
	return 0;
}

int cfs_cluster_addr_parse(const char *host, struct cfs_cluster_addr *out)
{
	unsigned char b[16];
	if (inet_pton(AF_INET, host, b) == 1)
		return cfs_cluster_addr_from(AF_INET, b, out) == 0;
	if (inet_pton(AF_INET6, host, b) == 1)
		return cfs_cluster_addr_from(AF_INET6, b, out) == 0;
	return 0;
}

static unsigned addr_bits(const struct cfs_cluster_addr *x)
{
	return x->family == AF_INET ? 32 : 128;
}

/* 1 when the first bits bits of a and b are equal. */
static int prefix_eq(const unsigned char *a, const unsigned char *b, unsigned bits)
{
	unsigned whole = bits / 8, rest = bits % 8;
	if (memcmp(a, b, whole) != 0)
		return 0;
	if (!rest)
		return 1;
	unsigned char mask = (unsigned char)(0xff << (8 - rest));
	return (a[whole] & mask) == (b[whole] & mask);
}

int cfs_cluster_cidr_match(const struct cfs_cluster_cidr *c, const struct cfs_cluster_addr *a)
{
	return a->family == c->net.family && prefix_eq(a->a, c->net.a, c->bits);
}

static int cidr_bad(char *why, size_t wcap, const char *item, size_t len, const char *what)
{
	snprintf(why, wcap, "--shared-cache-nodes: \"%.*s\": %s (want CIDR[,CIDR...], e.g. "
			    "10.0.0.0/8,fd00::/8)", (int)(len > 64 ? 64 : len), item, what);
	return CFS_E_CONFIG;
}

/* One item, len bytes at p, into *c. */
static int cidr_one(const char *p, size_t len, struct cfs_cluster_cidr *c, char *why, size_t wcap)
{
	char text[64];
	if (!len)
		return cidr_bad(why, wcap, p, len, "an empty item");
	for (size_t i = 0; i < len; i++)
		if (!strchr("0123456789abcdefABCDEF.:/", p[i]))
			return cidr_bad(why, wcap, p, len, "a character no address has");
	const char *slash = memchr(p, '/', len);
	size_t alen = slash ? (size_t)(slash - p) : len;
	if (!alen || alen >= sizeof(text))
		return cidr_bad(why, wcap, p, len, "no address, or one too long");
	memcpy(text, p, alen);
	text[alen] = '\0';
	unsigned char b[16];
	memset(c, 0, sizeof(*c));
	if (inet_pton(AF_INET, text, b) == 1) {
		c->net.family = AF_INET;
		memcpy(c->net.a, b, 4);
	} else if (inet_pton(AF_INET6, text, b) == 1) {
		c->net.family = AF_INET6;
		memcpy(c->net.a, b, 16);
	} else {
		return cidr_bad(why, wcap, p, len, "not an IPv4 or IPv6 address");
	}
	unsigned max = addr_bits(&c->net), bits = max;
	if (slash) {
		const char *d = slash + 1, *end = p + len;
		if (d == end || end - d > 3 || (d[0] == '0' && end - d > 1))
			return cidr_bad(why, wcap, p, len, "a prefix length must be a number");
		bits = 0;
		for (; d < end; d++) {
			if (*d < '0' || *d > '9')
				return cidr_bad(why, wcap, p, len, "a prefix length must be a number");
			bits = bits * 10 + (unsigned)(*d - '0');
		}
		if (bits > max)
			return cidr_bad(why, wcap, p, len, max == 32 ? "an IPv4 prefix is at most /32"
								   : "an IPv6 prefix is at most /128");
	}
	c->bits = bits;
	struct cfs_cluster_cidr zero = *c;
	unsigned whole = bits / 8;
	if (whole < 16) {
		if (bits % 8)
			zero.net.a[whole++] &= (unsigned char)(0xff << (8 - bits % 8));
		memset(zero.net.a + whole, 0, 16 - whole);
	}
	if (memcmp(zero.net.a, c->net.a, 16) != 0)
		return cidr_bad(why, wcap, p, len, "bits set past the prefix (the network's "
						   "first address, please)");
	/* ::ffff:a.b.c.d/96+n is a.b.c.d/n: addresses are compared unmapped */
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (c->net.family == AF_INET6 && c->bits >= 96 && memcmp(c->net.a, mapped, 12) == 0) {
		unmap(&c->net);
		c->bits -= 96;
	}
	return 0;
}

int cfs_cluster_cidrs_parse(const char *s, struct cfs_cluster_cidr *out, unsigned cap,
			    char *why, size_t wcap)
{
	if (!s || !*s) {
		snprintf(why, wcap, "--shared-cache-nodes: empty");
		return CFS_E_CONFIG;
	}
	unsigned n = 0;
	for (const char *p = s;;) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		if (n == cap) {
			snprintf(why, wcap, "--shared-cache-nodes: more than %u networks", cap);
			return CFS_E_CONFIG;
		}
		int rc = cidr_one(p, len, &out[n], why, wcap);
		if (rc)
			return rc;
		n++;
		if (!e)
			break;
		p = e + 1;
	}
	return (int)n;
}

void cfs_cluster_allow_init(struct cfs_cluster_allow *a, const struct cfs_cluster_cidr *cidr,
			    unsigned ncidr)
{
	memset(a, 0, sizeof(*a));
	a->ncidr = ncidr < CFS_CLUSTER_CIDRS_MAX ? ncidr : CFS_CLUSTER_CIDRS_MAX;
	if (a->ncidr)
		memcpy(a->cidr, cidr, a->ncidr * sizeof(*cidr));
}

static int same_addr(const struct cfs_cluster_addr *x, const struct cfs_cluster_addr *y)
{
	return x->family == y->family && memcmp(x->a, y->a, addr_bits(x) / 8) == 0;
}

int cfs_cluster_allowed_addr(const struct cfs_cluster_allow *a, const struct cfs_cluster_addr *x,
			     int port)
{
	for (unsigned i = 0; i < a->naddr; i++)
		if (same_addr(&a->addr[i].addr, x) && (!a->addr[i].port || a->addr[i].port == port))
			return 1;
	for (unsigned i = 0; i < a->ncidr; i++)
		if (cfs_cluster_cidr_match(&a->cidr[i], x))
			return 1;
	return 0;
}

int cfs_cluster_allowed(const struct cfs_cluster_allow *a, const char *host, int port)
{
	struct cfs_cluster_addr x;
	if (cfs_cluster_addr_parse(host, &x))
		return cfs_cluster_allowed_addr(a, &x, port);
	for (unsigned i = 0; i < a->nname; i++)
		if (strcasecmp(a->name[i].host, host) == 0 &&
		    (!a->name[i].port || a->name[i].port == port))
			return 1;
	return 0;
}

int cfs_cluster_allow_add_addr(struct cfs_cluster_allow *a, const struct cfs_cluster_addr *x,
			       int port)
{
	for (unsigned i = 0; i < a->naddr; i++)
		if (same_addr(&a->addr[i].addr, x) && (!a->addr[i].port || a->addr[i].port == port))
			return 0;
	if (a->naddr == CFS_CLUSTER_ALLOW_ADDRS)
		return -ENOSPC;
	a->addr[a->naddr].addr = *x;
	a->addr[a->naddr].port = port;
	a->naddr++;
	return 0;
}

int cfs_cluster_allow_add(struct cfs_cluster_allow *a, const char *host, int port)
{
	struct cfs_cluster_addr x;
	if (cfs_cluster_addr_parse(host, &x))
		return cfs_cluster_allow_add_addr(a, &x, port);
	if (!host[0] || strlen(host) >= CFS_CLUSTER_HOST_MAX)
		return -EINVAL;
	for (unsigned i = 0; i < a->nname; i++)
		if (strcasecmp(a->name[i].host, host) == 0 &&
		    (!a->name[i].port || a->name[i].port == port))
			return 0;
	if (a->nname == CFS_CLUSTER_ALLOW_NAMES)
		return -ENOSPC;
	snprintf(a->name[a->nname].host, sizeof(a->name[0].host), "%s", host);
	a->name[a->nname].port = port;
	a->nname++;
	return 0;
}
