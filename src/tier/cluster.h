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
 * not what the specification says), never a crash on bad input.
 *
 * And which addresses belong to the cluster (issue 24): the policy that
 * keeps a redirect or a slot map from sending the client -- and its
 * password -- anywhere else.  A node may be reached when its host is
 *   - a seed's host (any port): the user named it, or an address a seed
 *     resolved to and was reached at;
 *   - a host:port a seed announced (CLUSTER SLOTS read from a seed);
 *   - an address inside a --shared-cache-nodes CIDR (any port).
 * Host names are compared as text (case-insensitively), addresses as
 * addresses (so ::ffff:10.0.0.1 is 10.0.0.1); a name that is none of the
 * above is not allowed by its text, and may still be reached where every
 * address it resolves to is (the caller checks those at connect time). */
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

/* ---- only the cluster named (issue 24) ---- */

/* An address: family AF_INET (4 bytes of a used) or AF_INET6 (16). */
struct cfs_cluster_addr {
	int family;
	unsigned char a[16];
};

/* Parses host as a numeric IPv4 or IPv6 address (no zone, no brackets).
 * 1 (*out set, an IPv4-mapped IPv6 address made IPv4) or 0 (not one). */
int cfs_cluster_addr_parse(const char *host, struct cfs_cluster_addr *out);

/* addr (family AF_INET: struct in_addr, AF_INET6: struct in6_addr) as a
 * cfs_cluster_addr, IPv4-mapped made IPv4.  0, or -EAFNOSUPPORT. */
int cfs_cluster_addr_from(int family, const void *addr, struct cfs_cluster_addr *out);

struct cfs_cluster_cidr {
	struct cfs_cluster_addr net; /* host bits zero */
	unsigned bits;               /* prefix length: 0-32 (IPv4), 0-128 (IPv6) */
};

/* Parses --shared-cache-nodes: CIDR[,CIDR...], each ADDRESS/BITS (IPv4
 * dotted quad or IPv6 text, BITS in range for the family, no leading
 * zeros) or a bare ADDRESS (/32, /128).  Strict: no spaces, no empty
 * item, host bits must be zero (10.0.0.1/8 is refused: it is almost
 * certainly a typo for an address or for 10.0.0.0/8), at most cap items.
 * Returns the count, or CFS_E_CONFIG with why saying which item and what
 * is wrong. */
int cfs_cluster_cidrs_parse(const char *s, struct cfs_cluster_cidr *out, unsigned cap,
			    char *why, size_t wcap);

/* 1 when a is inside c. */
int cfs_cluster_cidr_match(const struct cfs_cluster_cidr *c, const struct cfs_cluster_addr *a);

#define CFS_CLUSTER_CIDRS_MAX 32
#define CFS_CLUSTER_ALLOW_ADDRS 1024
#define CFS_CLUSTER_ALLOW_NAMES 64

/* The set of nodes that belong to the cluster (the rules at the top).
 * port 0 in an entry: any port (a seed's host, a CIDR). */
struct cfs_cluster_allow {
	struct cfs_cluster_cidr cidr[CFS_CLUSTER_CIDRS_MAX];
	unsigned ncidr;
	struct {
		struct cfs_cluster_addr addr;
		int port;
	} addr[CFS_CLUSTER_ALLOW_ADDRS];
	unsigned naddr;
	struct {
		char host[CFS_CLUSTER_HOST_MAX];
		int port;
	} name[CFS_CLUSTER_ALLOW_NAMES];
	unsigned nname;
};

/* Empties a and sets its CIDRs (ncidr of them, at most
 * CFS_CLUSTER_CIDRS_MAX: more are ignored). */
void cfs_cluster_allow_init(struct cfs_cluster_allow *a, const struct cfs_cluster_cidr *cidr,
			    unsigned ncidr);

/* Adds host (a name or a numeric address) with port (0: any port).  0
 * (also when it was there), or -ENOSPC when the set is full. */
int cfs_cluster_allow_add(struct cfs_cluster_allow *a, const char *host, int port);
int cfs_cluster_allow_add_addr(struct cfs_cluster_allow *a, const struct cfs_cluster_addr *x,
			       int port);

/* 1 when host:port belongs to the cluster by the rules above (a name: by
 * its text only), else 0. */
int cfs_cluster_allowed(const struct cfs_cluster_allow *a, const char *host, int port);

/* 1 when the address x, port port, belongs to the cluster. */
int cfs_cluster_allowed_addr(const struct cfs_cluster_allow *a, const struct cfs_cluster_addr *x,
			     int port);

#endif
