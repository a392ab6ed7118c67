/* cluster: Redis Cluster routing, pure (see cluster.h). */
#include "cluster.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
