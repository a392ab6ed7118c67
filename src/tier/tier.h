/* tier: a client of the shared cache tier's Redis Cluster (issue 15).
 *
 * Owns the cluster as a whole: the seed list of --shared-cache, the slot
 * map (CLUSTER SLOTS, through cluster.h), a small pool of connections per
 * node (redis.h), and the rules that make a cluster a cache and never a
 * source of errors: a command goes to the master of its key's slot; MOVED
 * refreshes the map and goes where it says, ASK goes there once after
 * ASKING (at most CFS_TIER_REDIRECTS hops); a node that refuses or times
 * out is left alone for a while (its own backoff) and the map is read
 * again, so a failover is followed within a refresh (the map is also read
 * every minute, for nodes added and slots moved while nothing failed); a cluster none of whose
 * nodes answers is "down": calls fail at once (-EAGAIN) until the next probe,
 * which comes after a backoff doubling from 250 ms to 10 s.  Callers treat
 * every failure as a miss.
 *
 * Deadlines.  A connect (TLS and AUTH included) has connect_ms, each reply
 * io_ms, and a whole call -- a map read, the master, its replica,
 * redirects -- 2 x io_ms: a call that does not get its answer in time
 * fails (CFS_E_NET, -ETIMEDOUT) whatever the nodes do (a node that accepts
 * connections and never answers, a SIGSTOPped one, costs a caller at most
 * that).  An idle connection that fails is tried again once on a new one
 * only when the node closed it, not when it did not answer.
 * cfs_tier_cancel ends every call at once, those waiting for a node too
 * (their sockets are shut down), for a server that is stopping.
 *
 * Connections are made when first needed: a mount starts (and keeps
 * serving from Drive) whether or not the cluster is up.  The password is
 * kept in memory only, given to AUTH and never logged.
 *
 * Only the cluster named (issue 24): a node is reached -- connected to,
 * sent AUTH or anything else -- only when it belongs to the seeds' cluster
 * (cluster.h says which hosts do: the seeds', those a map read from a seed
 * announces, the --shared-cache-nodes networks).  A MOVED or ASK to any
 * other is refused and the call fails (-EPERM); a map read from a non-seed
 * node that names one leaves that node's slots unserved; both count in
 * redirects_refused, the first is logged.
 *
 * Bounds: each reply comes within io_ms and a call -- the map read it may
 * need, every connect, hop and reply included -- ends within
 * 2 x (connect_ms + io_ms) (3 s by default); every
 * reply is capped while it arrives (redis.h), by its command: a GET at one
 * value of value_max bytes, an MGET of k keys at k values, CLUSTER SLOTS
 * at 32 MiB, anything else at 64 KiB (cfs_tier_cmd.reply_max overrides);
 * names are resolved within the connect deadline.  The node table holds at
 * most 256 nodes: one that is not a seed and not in the latest map leaves
 * it once unused or failing for forget_ms (60 s), and the least recently
 * used such node makes room when the table is full.
 *
 * Thread-safe: any number of threads may call cfs_tier_exec at once; each
 * takes a connection of its own for the call. */
#ifndef CFS_TIER_H
#define CFS_TIER_H

#include <stddef.h>
#include <stdint.h>

struct cfs_redis_reply;
struct cfs_tier;

#define CFS_TIER_SEEDS_MAX 16
#define CFS_TIER_REDIRECTS 4

struct cfs_tier_seeds {
	int tls;                  /* rediss:// */
	char user[128];           /* "" unless the URL names one (redis://USER@host:port) */
	unsigned n;
	struct {
		char host[256];
		int port;
	} seed[CFS_TIER_SEEDS_MAX];
};

/* Parses a --shared-cache value: redis://[USER@]HOST:PORT[,HOST:PORT...] or
 * rediss://... (TLS); a host may be [IPv6].  A password in the URL is
 * refused (argv is visible to every user of the machine).  Returns 0 or
 * CFS_E_CONFIG with why set. */
int cfs_tier_parse(const char *url, struct cfs_tier_seeds *out, char *why, size_t wcap);

struct cfs_tier_opts {
	const struct cfs_tier_seeds *seeds;
	const char *password;  /* NULL: no AUTH; copied */
	const char *ca_file;   /* TLS: CA bundle, NULL: the system's; copied */
	int connect_ms;        /* default 500 */
	int io_ms;             /* default 1000 */
	const char *nodes;     /* --shared-cache-nodes: CIDR[,CIDR...] also in the cluster; NULL: none */
	size_t value_max;      /* the largest value a GET returns; 0: 1 MiB + 4 KiB */
	int forget_ms;         /* a node out of the map leaves after this; 0: 60 s (tests) */
};

/* 0, CFS_E_CONFIG (nodes does not parse: cfs_cluster_cidrs_parse says
 * why), -ENOMEM. */
int cfs_tier_new(const struct cfs_tier_opts *o, struct cfs_tier **out);
void cfs_tier_free(struct cfs_tier *t);

/* One command: argv[0..argc) with lengths. */
struct cfs_tier_cmd {
	int argc;
	const char *const *argv;
	const size_t *len;
	size_t reply_max; /* the reply's cap (redis.h's cost); 0: by the command (above) */
};

/* Sends the n commands, pipelined, to the node serving the slot of key
 * (every command must touch keys of that slot only; use a hash tag), and
 * fills out[0..n) with their replies (cfs_redis_tree; free each with
 * cfs_redis_reply_free).  Redirections are followed.  Returns 0, or
 * -EAGAIN (the cluster is down: not tried), CFS_E_NET, -ETIMEDOUT (the
 * call's deadline), CFS_E_PROTO (a reply past its cap among others),
 * CFS_E_AUTH, CFS_E_SERVER (an error reply such as CLUSTERDOWN or TRYAGAIN
 * to the first command), -EPERM (a redirect outside the cluster, refused),
 * with no reply left in out. */
int cfs_tier_exec(struct cfs_tier *t, const char *key, size_t klen, int n,
		  const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out);

/* Every call from now on fails at once with -ECANCELED, and the calls in
 * flight end now (their connections are shut down): for shutdown, so that
 * nothing waits on the cluster.  Thread-safe; cannot be undone. */
void cfs_tier_cancel(struct cfs_tier *t);

/* Reads the slot map now (a mount does at start, so the log and
 * `colabfs stats` say at once whether the cluster is there).  0 or the
 * error; either way the tier goes on as tier.h says. */
int cfs_tier_probe(struct cfs_tier *t);

/* cfs_tier_exec for commands that only read (GET, MGET): when the slot's
 * master fails or rests, they go to a replica of it (after READONLY), so
 * what the cluster holds is still served until a failover promotes one. */
int cfs_tier_exec_read(struct cfs_tier *t, const char *key, size_t klen, int n,
		       const struct cfs_tier_cmd *cmds, struct cfs_redis_reply **out);

/* 1 when the cluster is believed up (a map is loaded and the last call did
 * not find it down). */
int cfs_tier_up(struct cfs_tier *t);

struct cfs_tier_stats {
	uint64_t up;          /* gauge: cfs_tier_up */
	uint64_t nodes;       /* gauge: masters in the map */
	uint64_t commands;    /* commands sent */
	uint64_t errors;      /* calls that failed (network, protocol, error replies) */
	uint64_t redirects;   /* MOVED and ASK followed */
	uint64_t refreshes;   /* slot maps read */
	uint64_t connects;    /* connections made */
	uint64_t replica_reads; /* reads sent to a replica, its master failing */
	uint64_t redirects_refused; /* redirects, map entries, addresses outside the cluster */
	uint64_t known_nodes; /* gauge: nodes in the node table */
};
void cfs_tier_stats(struct cfs_tier *t, struct cfs_tier_stats *out);

/* A status in the tier's words ("no connection, or no answer in time"...). */
const char *cfs_tier_strerror(int rc);

/* For `colabfs doctor`: reads the map now and PINGs every master.  Writes a
 * one-line summary (or what failed) into msg.  Returns 0 when every master
 * answered, else the first error. */
int cfs_tier_check(struct cfs_tier *t, char *msg, size_t cap);

#endif
