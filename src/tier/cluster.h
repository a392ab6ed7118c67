/* cluster: Redis Cluster routing for the shared cache tier (issue 15), pure.
 *
 * Owns the cluster's key space as the Redis Cluster specification defines
 * it: a key's hash slot (CRC16-XMODEM of the key, or of its hash tag -- the
 * part between the first '{' and the next '}', when that part is not empty --
 * modulo 16384), the slot map a CLUSTER SLOTS reply describes (which master,
 * and which replicas, serve each slot), and the MOVED / ASK redirections a
 * node answers with.  No I/O and no hiredis here: replies come in as a small
 * tree (struct cfs_cluster_reply, the shape of a RESP reply), which the
 * hiredis owner module fills from its own and the unit tests build from
 * recorded replies.  Returns are 0, -errno or CFS_E_PROTO (a reply that is
 * not what the specification says), never a crash on bad input. */
#ifndef CFS_CLUSTER_H
#define CFS_CLUSTER_H

#include <stddef.h>
#include <stdint.h>

#define CFS_CLUSTER_SLOTS 16384
#define CFS_CLUSTER_HOST_MAX 256
#define CFS_CLUSTER_MAX_NODES 512
#define CFS_CLUSTER_NO_NODE 0xffff

/* RESP reply kinds (RESP2 and the RESP3 kinds CLUSTER SLOTS may use). */
enum cfs_cluster_rtype {
	CFS_RESP_STRING = 1,
	CFS_RESP_ARRAY,
	CFS_RESP_INTEGER,
	CFS_RESP_NIL,
	CFS_RESP_STATUS,
	CFS_RESP_ERROR,
};

struct cfs_cluster_reply {
	enum cfs_cluster_rtype type;
	long long integer;
	const char *str; /* STRING, STATUS, ERROR: len bytes (not NUL-terminated) */
	size_t len;
	size_t n;        /* ARRAY: elements */
	const struct cfs_cluster_reply *const *el;
};

/* CRC16-XMODEM (poly 0x1021, init 0), the cluster's key hash. */
uint16_t cfs_cluster_crc16(const void *p, size_t n);

/* The hash slot of a key of len bytes (the hash-tag rule above). */
unsigned cfs_cluster_slot(const char *key, size_t len);

struct cfs_cluster_node {
	char host[CFS_CLUSTER_HOST_MAX];
	int port;
};

/* Which node serves each slot: master[slot] and up to CFS_CLUSTER_REPLICAS
 * replicas, as indexes into node[] (CFS_CLUSTER_NO_NODE: none). */
#define CFS_CLUSTER_REPLICAS 3
struct cfs_cluster_map {
	struct cfs_cluster_node node[CFS_CLUSTER_MAX_NODES];
	unsigned nnodes;
	uint16_t master[CFS_CLUSTER_SLOTS];
	uint16_t replica[CFS_CLUSTER_SLOTS][CFS_CLUSTER_REPLICAS];
	unsigned covered; /* slots with a master */
};

/* Fills m (cleared first) from a CLUSTER SLOTS reply: an array of
 * [start, end, master, replica...], each node [host, port, id?, ...].  An
 * empty host (a node that does not know its own address) is seed_host.
 * Returns 0, or CFS_E_PROTO (m then covers nothing). */
int cfs_cluster_map_from_slots(struct cfs_cluster_map *m, const struct cfs_cluster_reply *r,
			       const char *seed_host);

/* The node index for slot: its master, or with replica > 0 the replica'th
 * replica when it has one (else its master).  CFS_CLUSTER_NO_NODE when the
 * slot is not covered. */
unsigned cfs_cluster_route(const struct cfs_cluster_map *m, unsigned slot, int replica);

/* A redirection in an error reply's text ("MOVED 3999 127.0.0.1:6381" or
 * "ASK 3999 127.0.0.1:6381"; an IPv6 host is what comes before the last
 * ':'; an empty host, as in "MOVED 3999 :6381", is the host of the node
 * that answered, which the caller fills in).  Returns 1 (MOVED: the slot moved for good, refresh the map) or
 * 2 (ASK: this one request goes there, after ASKING), with *slot and *to
 * set; 0 when the text is no redirection; CFS_E_PROTO when it says MOVED
 * or ASK but is malformed. */
int cfs_cluster_redirect(const char *err, size_t len, unsigned *slot, struct cfs_cluster_node *to);

#endif
