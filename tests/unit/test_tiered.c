/* Unit tests: tier (src/tier/tier.c) and tiered (src/core/tiered.c), the
 * shared cache tier against a real two-node Redis Cluster (Debian's
 * redis-server, started here on loopback ports and always killed): routing
 * by slot, ASK while a slot migrates and MOVED after it moved (the map read
 * again), then blocks through the tier with a scripted Drive underneath --
 * one machine downloads and publishes, a second is served from the tier
 * without a download, a corrupt value is refused by its crc and fetched
 * again, another machine's lease is waited for (and taken once it expires),
 * a reader that stops early leaves no lease behind, and a cluster that is
 * gone costs a download, never an error.  The value format and the URL
 * parser are checked without a server.  Skips the cluster part (says so)
 * when redis-server is not installed. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "log.h"
#include "redis.h"
#include "tier.h"
#include "tiered.h"

#define BS 65536u

/* ---- a two-node cluster ---- */

/* 0, 1: a two-node cluster, and 3 a replica of 1 in it (that never takes
 * over); 2: a one-node cluster with a password */
#define NSRV 4
#define PASSWORD "pw-7c1e-never-logged"
static pid_t srv[NSRV];
static int port[NSRV];
static char dir[NSRV][128];
static char id[NSRV][64];

static void stop_servers(void)
{
	for (int i = 0; i < NSRV; i++)
		if (srv[i] > 0) {
			kill(srv[i], SIGKILL);
			waitpid(srv[i], NULL, 0);
			srv[i] = 0;
		}
	for (int i = 0; i < NSRV; i++)
		if (dir[i][0]) {
			char cmd[640];
			snprintf(cmd, sizeof(cmd), "rm -rf %s", dir[i]);
			if (system(cmd) != 0)
				fprintf(stderr, "could not remove %s\n", dir[i]);
			dir[i][0] = '\0';
		}
}

static void on_signal(int sig)
{
	stop_servers();
	_exit(128 + sig);
}

/* One command to a node (words split at spaces), the reply's tree kept in *r. */
static int cmd(int i, const char *words, struct cfs_redis_reply **r)
{
	char buf[512];
	const char *argv[16];
	size_t len[16];
	int argc = 0;
	snprintf(buf, sizeof(buf), "%s", words);
	for (char *save = NULL, *w = strtok_r(buf, " ", &save); w && argc < 16;
	     w = strtok_r(NULL, " ", &save)) {
		argv[argc] = w;
		len[argc++] = strlen(w);
	}
	struct cfs_redis *c = NULL;
	struct cfs_redis_opts o = { .connect_ms = 300, .io_ms = 2000,
				    .password = i == 2 ? PASSWORD : NULL };
	int rc = cfs_redis_connect("127.0.0.1", port[i], &o, &c);
	if (!rc)
		rc = cfs_redis_command(c, argc, argv, len, r);
	cfs_redis_close(c);
	return rc;
}

/* The reply of a command as text ("" for anything but a string or status). */
static int cmd_text(int i, const char *words, char *out, size_t cap)
{
	struct cfs_redis_reply *r = NULL;
	int rc = cmd(i, words, &r);
	out[0] = '\0';
	const struct cfs_cluster_reply *t = rc ? NULL : cfs_redis_tree(r);
	if (t && (t->type == CFS_RESP_STRING || t->type == CFS_RESP_STATUS ||
		  t->type == CFS_RESP_ERROR))
		snprintf(out, cap, "%.*s", (int)t->len, t->str);
	cfs_redis_reply_free(r);
	return rc;
}

/* Whether node i's replica has taken every write node i has made (its
 * offset in INFO replication reached master_repl_offset), within ms. */
static int replicated(int i, int ms)
{
	char info[4096];
	int64_t end = cfs_clock_mono_ms() + ms;
	do {
		struct cfs_redis_reply *r = NULL;
		info[0] = '\0';
		if (cmd(i, "INFO replication", &r) == 0) {
			const struct cfs_cluster_reply *t = cfs_redis_tree(r);
			if (t && t->type == CFS_RESP_STRING)
				snprintf(info, sizeof(info), "%.*s", (int)t->len, t->str);
		}
		cfs_redis_reply_free(r);
		const char *m = strstr(info, "master_repl_offset:");
		const char *s = strstr(info, "slave0:");
		const char *o = s ? strstr(s, ",offset=") : NULL;
		if (m && o && strtoll(o + 8, NULL, 10) >= strtoll(m + 19, NULL, 10))
			return 1;
		struct timespec d = { 0, 20 * 1000000 };
		nanosleep(&d, NULL);
	} while (cfs_clock_mono_ms() < end);
	return 0;
}

static int wait_for(int i, const char *words, const char *want, int ms)
{
	char got[4096];
	int64_t end = cfs_clock_mono_ms() + ms;
	while (cfs_clock_mono_ms() < end) {
		if (cmd_text(i, words, got, sizeof(got)) == 0 && strstr(got, want))
			return 0;
		struct timespec ts = { 0, 20 * 1000000L };
		nanosleep(&ts, NULL);
	}
	fprintf(stderr, "node %d: '%s' never said '%s' (last: %.1500s)\n", i, words, want, got);
	return -ETIMEDOUT;
}

/* 1 when nothing listens on 127.0.0.1:p. */
static int port_free(int p)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)p),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	if (fd >= 0)
		close(fd);
	return ok;
}

/* A port from `from` up whose cluster bus port (+10000) is free too; both
 * below the kernel's ephemeral range (32768 up), so no outgoing connection
 * takes one. */
static int free_port(int from)
{
	for (int p = from; p < 22000; p++)
		if (port_free(p) && port_free(p + 10000))
			return p;
	return 0;
}

static int start_cluster(void)
{
	if (access("/usr/bin/redis-server", X_OK) != 0 && system("command -v redis-server >/dev/null") != 0)
		return 1;
	atexit(stop_servers);
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < NSRV; i++) {
		port[i] = free_port(i ? port[i - 1] + 1 : 20000 + (int)(getpid() % 1000) * 2);
		if (!port[i])
			return -EADDRINUSE;
		snprintf(dir[i], sizeof(dir[i]), "/tmp/cfs-test-tiered-%d-%d", (int)getpid(), i);
		char mk[300];
		snprintf(mk, sizeof(mk), "mkdir -p %s", dir[i]);
		if (system(mk) != 0)
			return -EIO;
		char ps[16];
		snprintf(ps, sizeof(ps), "%d", port[i]);
		srv[i] = fork();
		if (srv[i] == 0) {
			if (chdir(dir[i]) != 0)
				_exit(126);
			execlp("redis-server", "redis-server", "--port", ps, "--bind", "127.0.0.1",
			       "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			       "--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no",
			       "--daemonize", "no", "--logfile", "redis.log",
			       i == 2 ? "--requirepass" : i == 3 ? "--cluster-replica-no-failover"
								: (char *)NULL,
			       i == 2 ? PASSWORD : "yes", (char *)NULL);
			_exit(127);
		}
		if (srv[i] < 0)
			return -errno;
	}
	char w[128], out[256];
	for (int i = 0; i < NSRV; i++)
		if (wait_for(i, "PING", "PONG", 10000))
			return -ETIMEDOUT;
	CHECK(cmd_text(2, "CLUSTER ADDSLOTSRANGE 0 16383", out, sizeof(out)) == 0);
	CHECK(cmd_text(0, "CLUSTER ADDSLOTSRANGE 0 8191", out, sizeof(out)) == 0);
	CHECK(cmd_text(1, "CLUSTER ADDSLOTSRANGE 8192 16383", out, sizeof(out)) == 0);
	snprintf(w, sizeof(w), "CLUSTER MEET 127.0.0.1 %d", port[1]);
	CHECK(cmd_text(0, w, out, sizeof(out)) == 0);
	for (int i = 0; i < 3; i++) {
		if (wait_for(i, "CLUSTER INFO", "cluster_state:ok", 15000))
			return -ETIMEDOUT;
		cmd_text(i, "CLUSTER MYID", id[i], sizeof(id[i]));
	}
	/* node 3 joins as a replica of node 1 */
	cmd_text(3, "CLUSTER MYID", id[3], sizeof(id[3]));
	snprintf(w, sizeof(w), "CLUSTER MEET 127.0.0.1 %d", port[0]);
	CHECK(cmd_text(3, w, out, sizeof(out)) == 0);
	if (wait_for(3, "CLUSTER NODES", id[1], 15000))
		return -ETIMEDOUT;
	snprintf(w, sizeof(w), "CLUSTER REPLICATE %s", id[1]);
	CHECK(cmd_text(3, w, out, sizeof(out)) == 0 && strcmp(out, "OK") == 0);
	char want[96];
	snprintf(want, sizeof(want), "slave,nofailover %s", id[1]);
	if (wait_for(3, "INFO replication", "master_link_status:up", 15000) ||
	    wait_for(0, "CLUSTER NODES", want, 15000) || wait_for(3, "CLUSTER INFO", "cluster_state:ok", 15000))
		return -ETIMEDOUT;
	return 0;
}

/* ---- a scripted Drive ---- */

static int fetches;          /* calls of the fake */
static int64_t fetched;      /* bytes it handed over */

static unsigned char byte_at(const char *fid, int64_t o)
{
	return (unsigned char)((o * 131 + (o >> 9) + (unsigned char)fid[0]) & 0xff);
}

static int fake_fetch(void *io, const char *fid, const char *rev, int64_t size, int64_t off,
		      size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got, int prio)
{
	__atomic_add_fetch(&fetches, 1, __ATOMIC_RELAXED);
	*got = 0;
	char piece[5000];
	int64_t end = off + (int64_t)len < size ? off + (int64_t)len : size;
	for (int64_t at = off; at < end;) {
		size_t n = end - at < (int64_t)sizeof(piece) ? (size_t)(end - at) : sizeof(piece);
		for (size_t k = 0; k < n; k++)
			piece[k] = (char)byte_at(fid, at + (int64_t)k);
		int r = sink(arg, at, piece, n);
		*got += n;
		__atomic_add_fetch(&fetched, (int64_t)n, __ATOMIC_RELAXED);
		if (r < 0)
			return -EIO;
		if (r > 0)
			return 0;
		at += (int64_t)n;
	}
	return 0;
}

struct dst {
	unsigned char *buf;
	int64_t off, cap, got;
	int64_t stop_at; /* > 0: say "enough" once this many bytes arrived */
	int bad;         /* a byte out of order */
};

static int dst_sink(void *arg, int64_t at, const char *p, size_t n)
{
	struct dst *d = arg;
	if (at != d->off + d->got) {
		d->bad = 1;
		return -1;
	}
	if (d->got + (int64_t)n > d->cap)
		return -1;
	memcpy(d->buf + d->got, p, n);
	d->got += (int64_t)n;
	return d->stop_at > 0 && d->got >= d->stop_at ? 1 : 0;
}

static int same(const char *fid, const unsigned char *b, int64_t off, int64_t n)
{
	for (int64_t k = 0; k < n; k++)
		if (b[k] != byte_at(fid, off + k))
			return 0;
	return 1;
}

/* The deployment key the next machine gets (taken by it; NULL: unkeyed). */
static struct cfs_tiered_key *machine_key;

/* A machine: a tier on port p and the seam over the fake; owner NULL: random. */
static struct cfs_tiered *machine_as(int p, const char *password, int lease_ms, const char *owner)
{
	struct cfs_tier_seeds seeds;
	char why[256];
	char url[64];
	snprintf(url, sizeof(url), "redis://127.0.0.1:%d", p);
	CHECK(cfs_tier_parse(url, &seeds, why, sizeof(why)) == 0);
	struct cfs_tier_opts to = { .seeds = &seeds, .io_ms = 2000, .password = password };
	struct cfs_tier *t = NULL;
	CHECK(cfs_tier_new(&to, &t) == 0);
	struct cfs_tiered_opts o = { .tier = t, .fetch = fake_fetch, .block_size = BS,
				     .lease_ms = lease_ms, .owner = owner, .key = machine_key };
	machine_key = NULL;
	struct cfs_tiered *x = NULL;
	CHECK(cfs_tiered_new(&o, &x) == 0);
	return x;
}

static struct cfs_tiered *machine_at(int p, const char *password, int lease_ms)
{
	return machine_as(p, password, lease_ms, NULL);
}

static struct cfs_tiered *machine(int lease_ms)
{
	return machine_at(port[0], NULL, lease_ms);
}

/* Reads [off, off+len) of fid@rev (size bytes) through x into a buffer; checks the bytes. */
static int read_via(struct cfs_tiered *x, const char *fid, int64_t size, int64_t off, size_t len,
		    int64_t stop_at)
{
	struct dst d = { .off = off, .cap = (int64_t)len, .stop_at = stop_at };
	d.buf = malloc(len);
	size_t got = 0;
	int rc = cfs_tiered_fetch(x, fid, "rev1", size, off, len, dst_sink, &d, &got, 0);
	if (!rc) {
		int64_t want = stop_at > 0 ? stop_at : (off + (int64_t)len < size ? (int64_t)len : size - off);
		CHECK(!d.bad);
		CHECK(d.got >= want);
		CHECK(same(fid, d.buf, off, d.got));
	}
	free(d.buf);
	return rc;
}

/* A key's tree, through the tier (any slot). */
static int tier_get(struct cfs_tiered *x, const char *key, char *out, size_t cap, size_t *n)
{
	const char *argv[] = { "GET", key };
	size_t len[] = { 3, strlen(key) };
	struct cfs_tier_cmd c = { 2, argv, len };
	struct cfs_redis_reply *r = NULL;
	int rc = cfs_tier_exec(cfs_tiered_tier(x), key, strlen(key), 1, &c, &r);
	*n = 0;
	const struct cfs_cluster_reply *t = rc ? NULL : cfs_redis_tree(r);
	if (t && t->type == CFS_RESP_STRING) {
		*n = t->len < cap ? t->len : cap;
		memcpy(out, t->str, *n);
	} else if (t && t->type == CFS_RESP_NIL) {
		rc = -ENOENT;
	}
	cfs_redis_reply_free(r);
	return rc;
}

static int tier_set(struct cfs_tiered *x, const char *key, const void *v, size_t n,
		    const char *px)
{
	const char *argv[] = { "SET", key, v, "PX", px };
	size_t len[] = { 3, strlen(key), n, 2, px ? strlen(px) : 0 };
	struct cfs_tier_cmd c = { px ? 5 : 3, argv, len };
	struct cfs_redis_reply *r = NULL;
	int rc = cfs_tier_exec(cfs_tiered_tier(x), key, strlen(key), 1, &c, &r);
	cfs_redis_reply_free(r);
	return rc;
}

struct later {
	struct cfs_tiered *x;
	const char *fid;
	int64_t size;
	int ms;
};

/* Another machine: publishes block 0 of fid ms from now. */
static void *publish_later(void *arg)
{
	struct later *l = arg;
	struct timespec ts = { l->ms / 1000, (long)(l->ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
	size_t n = l->size < BS ? (size_t)l->size : BS;
	unsigned char *data = malloc(n), *v = malloc(CFS_TIERED_HEADER + n);
	for (size_t k = 0; k < n; k++)
		data[k] = byte_at(l->fid, (int64_t)k);
	cfs_tiered_encode(v, data, (uint32_t)n, BS);
	char key[128];
	snprintf(key, sizeof(key), "cfs1:64K:{%s@rev1:0}:0", l->fid);
	CHECK(tier_set(l->x, key, v, CFS_TIERED_HEADER + n, NULL) == 0);
	free(data);
	free(v);
	return NULL;
}

/* AUTH through the tier; a wrong or missing password costs a download, and
 * the password is in no log line (at debug level). */
static void test_auth(void)
{
	char logp[160];
	snprintf(logp, sizeof(logp), "%s/tier.log", dir[2]);
	CHECK_EQ(cfs_log_open(logp, CFS_LOG_DEBUG), 0);
	struct cfs_tiered *good = machine_at(port[2], PASSWORD, 3000);
	struct cfs_tiered *wrong = machine_at(port[2], "not-" PASSWORD, 3000);
	struct cfs_tiered *none = machine_at(port[2], NULL, 3000);
	char v[BS + 64];
	size_t n;
	CHECK_EQ(tier_set(good, "k", "v", 1, NULL), 0);
	CHECK(tier_get(good, "k", v, sizeof(v), &n) == 0 && n == 1 && v[0] == 'v');
	CHECK(tier_get(wrong, "k", v, sizeof(v), &n) != 0);
	CHECK(tier_get(none, "k", v, sizeof(v), &n) != 0);
	fetches = 0;
	CHECK_EQ(read_via(good, "A1", 3 * BS, 0, 3 * BS, 0), 0);
	CHECK_EQ(read_via(wrong, "A1", 3 * BS, 0, 3 * BS, 0), 0); /* from Drive */
	CHECK_EQ(read_via(none, "A1", 3 * BS, 0, 3 * BS, 0), 0);
	CHECK_EQ(fetches, 3);
	struct cfs_tiered_stats s;
	cfs_tiered_stats(good, &s);
	CHECK_EQ(s.published, 3);
	cfs_tiered_stats(wrong, &s);
	CHECK(s.bypassed >= 1 && s.hits == 0 && s.errors >= 1);
	cfs_tiered_free(good);
	cfs_tiered_free(wrong);
	cfs_tiered_free(none);
	cfs_log_open(NULL, CFS_LOG_INFO);
	FILE *f = fopen(logp, "r");
	CHECK(f != NULL);
	size_t total = 0;
	int leaked = 0;
	char line[1024];
	while (f && fgets(line, sizeof(line), f)) {
		total += strlen(line);
		leaked |= strstr(line, PASSWORD) != NULL;
	}
	if (f)
		fclose(f);
	CHECK(total > 0);
	CHECK(!leaked);
}

/* A full cluster that does not evict (maxmemory, noeviction): every SET is
 * refused; reads go to Drive at once, no waiting for leases nobody holds. */
static void test_full(void)
{
	char out[128];
	struct cfs_tiered *x = machine_at(port[2], PASSWORD, 3000);
	CHECK(cmd_text(2, "CONFIG SET maxmemory-policy noeviction", out, sizeof(out)) == 0);
	CHECK(cmd_text(2, "CONFIG SET maxmemory 1", out, sizeof(out)) == 0);
	fetches = 0;
	int64_t t0 = cfs_clock_mono_ms();
	CHECK_EQ(read_via(x, "FULL", 3 * BS, 0, 3 * BS, 0), 0);
	CHECK_EQ(read_via(x, "FULL2", 100, 0, 100, 0), 0);
	CHECK(cfs_clock_mono_ms() - t0 < 1500);
	CHECK_EQ(fetches, 2);
	struct cfs_tiered_stats s;
	cfs_tiered_stats(x, &s);
	CHECK_EQ(s.published, 0);
	CHECK_EQ(s.lease_waits, 0);
	CHECK(s.errors >= 2); /* the refused SETs */
	CHECK(cmd_text(2, "CONFIG SET maxmemory 0", out, sizeof(out)) == 0);
	cfs_tiered_free(x);
}

static void test_format(void)
{
	unsigned char data[100], v[CFS_TIERED_HEADER + 100];
	for (int i = 0; i < 100; i++)
		data[i] = (unsigned char)(i * 3);
	cfs_tiered_encode(v, data, 100, BS);
	CHECK(memcmp(v, "CFB1", 4) == 0);
	CHECK_EQ(cfs_tiered_check(v, sizeof(v), 100, BS), 0);
	CHECK_EQ(cfs_tiered_check(v, sizeof(v), 99, BS), CFS_E_PROTO);     /* wrong length */
	CHECK_EQ(cfs_tiered_check(v, sizeof(v) - 1, 100, BS), CFS_E_PROTO); /* cut short */
	CHECK_EQ(cfs_tiered_check(v, sizeof(v), 100, BS * 2), CFS_E_PROTO); /* another block size */
	CHECK_EQ(cfs_tiered_check(v, 3, 100, BS), CFS_E_PROTO);
	v[CFS_TIERED_HEADER + 50] ^= 1;
	CHECK_EQ(cfs_tiered_check(v, sizeof(v), 100, BS), CFS_E_PROTO); /* a flipped bit */
	v[CFS_TIERED_HEADER + 50] ^= 1;
	v[0] = 'X';
	CHECK_EQ(cfs_tiered_check(v, sizeof(v), 100, BS), CFS_E_PROTO); /* not ours */
}

static void test_parse(void)
{
	struct cfs_tier_seeds s;
	char why[256];
	CHECK_EQ(cfs_tier_parse("redis://10.0.0.1:6379,10.0.0.2:7000", &s, why, sizeof(why)), 0);
	CHECK_EQ(s.n, 2);
	CHECK_STR(s.seed[1].host, "10.0.0.2");
	CHECK_EQ(s.seed[1].port, 7000);
	CHECK_EQ(s.tls, 0);
	CHECK_EQ(cfs_tier_parse("rediss://app@redis.example.com:6380/", &s, why, sizeof(why)), 0);
	CHECK_EQ(s.tls, 1);
	CHECK_STR(s.user, "app");
	CHECK_STR(s.seed[0].host, "redis.example.com");
	CHECK_EQ(cfs_tier_parse("redis://[::1]:7001", &s, why, sizeof(why)), 0);
	CHECK_STR(s.seed[0].host, "::1");
	CHECK_EQ(cfs_tier_parse("redis://u:secret@h:1", &s, why, sizeof(why)), CFS_E_CONFIG);
	CHECK(strstr(why, "password") && !strstr(why, "secret"));
	const char *bad[] = { "", "http://h:1", "redis://", "redis://h", "redis://h:0",
			      "redis://h:65536", "redis://h:x", "redis://h:1/2", "redis://h:1,",
			      "redis://h h:1", "redis://[::1:1", "redis://h:1,u@h:2" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = cfs_tier_parse(bad[i], &s, why, sizeof(why));
		CHECK_EQ(rc, CFS_E_CONFIG);
		if (rc != CFS_E_CONFIG)
			fprintf(stderr, "accepted: '%s'\n", bad[i]);
	}
}

/* Routing, ASK during a migration, MOVED after it. */
static void test_routing(struct cfs_tiered *x)
{
	struct cfs_tier *t = cfs_tiered_tier(x);
	char out[64];
	size_t n;
	/* keys in both halves of the slot space */
	CHECK(tier_set(x, "a", "1", 1, NULL) == 0); /* slot 15495: node 1 */
	CHECK(tier_set(x, "b", "2", 1, NULL) == 0); /* slot 3300: node 0 */
	CHECK(tier_get(x, "a", out, sizeof(out), &n) == 0 && n == 1 && out[0] == '1');
	CHECK(tier_get(x, "b", out, sizeof(out), &n) == 0 && n == 1 && out[0] == '2');
	char o2[64];
	CHECK(cmd_text(1, "GET a", o2, sizeof(o2)) == 0 && strcmp(o2, "1") == 0);
	struct cfs_tier_stats st;
	cfs_tier_stats(t, &st);
	CHECK_EQ(st.nodes, 2);
	CHECK_EQ(st.up, 1);
	CHECK_EQ(st.redirects, 0);
	/* slot of "c" (7365, node 0) migrating to node 1: an absent key is ASKed there */
	unsigned slot = cfs_cluster_slot("c", 1);
	CHECK_EQ(slot, 7365);
	char w[200];
	snprintf(w, sizeof(w), "CLUSTER SETSLOT %u IMPORTING %s", slot, id[0]);
	CHECK(cmd_text(1, w, out, sizeof(out)) == 0 && strcmp(out, "OK") == 0);
	snprintf(w, sizeof(w), "CLUSTER SETSLOT %u MIGRATING %s", slot, id[1]);
	CHECK(cmd_text(0, w, out, sizeof(out)) == 0 && strcmp(out, "OK") == 0);
	CHECK_EQ(tier_get(x, "c", out, sizeof(out), &n), -ENOENT); /* nil, from node 1 */
	cfs_tier_stats(t, &st);
	CHECK_EQ(st.redirects, 1);
	/* a pipeline ASKed over: every command goes after an ASKING of its own */
	const char *g1[] = { "GET", "c" }, *g2[] = { "GET", "{c}x" };
	size_t l1[] = { 3, 1 }, l2[] = { 3, 4 };
	struct cfs_tier_cmd two[2] = { { 2, g1, l1 }, { 2, g2, l2 } };
	struct cfs_redis_reply *rr[2] = { 0 };
	CHECK_EQ(cfs_tier_exec(t, "c", 1, 2, two, rr), 0);
	for (int i = 0; i < 2; i++) {
		const struct cfs_cluster_reply *tr = cfs_redis_tree(rr[i]);
		CHECK(tr && tr->type == CFS_RESP_NIL); /* not a MOVED from node 1 */
		cfs_redis_reply_free(rr[i]);
	}
	cfs_tier_stats(t, &st);
	CHECK_EQ(st.redirects, 2);
	uint64_t refreshes = st.refreshes;
	/* the slot moved for good: MOVED, the map read again */
	for (int i = 0; i < 2; i++) {
		snprintf(w, sizeof(w), "CLUSTER SETSLOT %u NODE %s", slot, id[1]);
		CHECK(cmd_text(i, w, out, sizeof(out)) == 0);
	}
	CHECK(tier_set(x, "c", "3", 1, NULL) == 0);
	CHECK(cmd_text(1, "GET c", o2, sizeof(o2)) == 0 && strcmp(o2, "3") == 0);
	cfs_tier_stats(t, &st);
	CHECK_EQ(st.redirects, 3);
	/* the next call after a MOVED reads the map (at most every 200 ms) */
	struct timespec ts = { 0, 250 * 1000000L };
	nanosleep(&ts, NULL);
	CHECK(tier_get(x, "c", out, sizeof(out), &n) == 0 && n == 1 && out[0] == '3');
	cfs_tier_stats(t, &st);
	CHECK(st.refreshes > refreshes);
	CHECK_EQ(st.redirects, 3); /* routed right at once now */
	char msg[300];
	CHECK_EQ(cfs_tier_check(t, msg, sizeof(msg)), 0);
	CHECK(strstr(msg, "2 of 2 masters answer PING, 16384 of 16384 slots") != NULL);
}

/* A file id whose blocks 0..63 live in node 1's slots (8192 up). */
static void id_on_node1(char *fid, size_t cap)
{
	for (int i = 0; i < 1000; i++) {
		char tag[64];
		snprintf(fid, cap, "R%d", i);
		snprintf(tag, sizeof(tag), "cfs1:64K:{%s@rev1:0}", fid);
		if (cfs_cluster_slot(tag, strlen(tag)) >= 8192)
			return;
	}
}

/* Node 1 killed (its replica never takes over): what the cluster holds is
 * still served, by the replica; a miss is downloaded (no lease to take). */
static void test_replica(void)
{
	char fid[16], fid2[16] = "";
	id_on_node1(fid, sizeof(fid));
	for (int i = 0; i < 1000 && !fid2[0]; i++) { /* another, for a miss */
		char tag[64], c[16];
		snprintf(c, sizeof(c), "S%d", i);
		snprintf(tag, sizeof(tag), "cfs1:64K:{%s@rev1:0}", c);
		if (cfs_cluster_slot(tag, strlen(tag)) >= 8192)
			snprintf(fid2, sizeof(fid2), "%s", c);
	}
	struct cfs_tiered *w = machine(3000);
	fetches = 0;
	CHECK_EQ(read_via(w, fid, 3 * BS, 0, 3 * BS, 0), 0);
	CHECK_EQ(fetches, 1);
	/* on the replica too (replication is asynchronous; WAIT would count only
	 * the writes of its own connection, and the tier wrote on others) */
	CHECK(replicated(1, 15000));
	cfs_tiered_free(w);
	struct cfs_tiered *r = machine(3000);
	struct cfs_tier_stats st;
	CHECK_EQ(cfs_tier_probe(cfs_tiered_tier(r)), 0); /* the map, with the replica */
	kill(srv[1], SIGKILL);
	waitpid(srv[1], NULL, 0);
	srv[1] = 0;
	fetches = 0;
	CHECK_EQ(read_via(r, fid, 3 * BS, 0, 3 * BS, 0), 0); /* from the replica */
	CHECK_EQ(fetches, 0);
	CHECK_EQ(read_via(r, fid2, 2 * BS, 0, 2 * BS, 0), 0); /* a miss: from Drive */
	CHECK_EQ(fetches, 1);
	struct cfs_tiered_stats ts;
	cfs_tiered_stats(r, &ts);
	CHECK_EQ(ts.hits, 3);
	CHECK(ts.replica_reads >= 1);
	cfs_tier_stats(cfs_tiered_tier(r), &st);
	CHECK(st.replica_reads >= 1);
	cfs_tiered_free(r);
}

static void test_blocks(void)
{
	struct cfs_tiered *m1 = machine(3000), *m2 = machine(3000);
	struct cfs_tiered_stats s1, s2;
	const int64_t size = 3 * BS + 1000; /* 4 blocks, the last short */
	/* machine 1 downloads and publishes */
	fetches = 0;
	CHECK_EQ(read_via(m1, "F1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1); /* one request for the four blocks */
	cfs_tiered_stats(m1, &s1);
	CHECK_EQ(s1.misses, 4);
	CHECK_EQ(s1.published, 4);
	CHECK_EQ(s1.bytes_written, size);
	CHECK_EQ(s1.hits, 0);
	char v[BS + 64];
	size_t n;
	CHECK(tier_get(m1, "cfs1:64K:{F1@rev1:0}:3", v, sizeof(v), &n) == 0);
	CHECK_EQ(cfs_tiered_check(v, n, 1000, BS), 0);
	CHECK_EQ(tier_get(m1, "cfs1:64K:{F1@rev1:0}:0:lease", v, sizeof(v), &n), -ENOENT);
	/* machine 2 is served from the tier */
	fetches = 0;
	CHECK_EQ(read_via(m2, "F1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 0);
	cfs_tiered_stats(m2, &s2);
	CHECK_EQ(s2.hits, 4);
	CHECK_EQ(s2.bytes_read, size);
	/* a range inside the file: blocks 1..2 */
	CHECK_EQ(read_via(m2, "F1", size, BS, 2 * BS, 0), 0);
	CHECK_EQ(fetches, 0);

	/* a corrupt value: refused, that block (only) fetched again, republished */
	CHECK(tier_get(m1, "cfs1:64K:{F1@rev1:0}:1", v, sizeof(v), &n) == 0);
	v[CFS_TIERED_HEADER + 777] ^= 0x40;
	CHECK(tier_set(m1, "cfs1:64K:{F1@rev1:0}:1", v, n, NULL) == 0);
	fetches = 0;
	fetched = 0;
	CHECK_EQ(read_via(m2, "F1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1);
	CHECK_EQ(fetched, BS);
	cfs_tiered_stats(m2, &s2);
	CHECK_EQ(s2.corrupt, 1);
	CHECK(tier_get(m1, "cfs1:64K:{F1@rev1:0}:1", v, sizeof(v), &n) == 0);
	CHECK_EQ(cfs_tiered_check(v, n, BS, BS), 0);

	/* another machine holds the lease and publishes 300 ms later: waited for */
	CHECK(tier_set(m1, "cfs1:64K:{F2@rev1:0}:0:lease", "other", 5, "5000") == 0);
	struct later l = { m1, "F2", 5000, 300 };
	pthread_t th;
	pthread_create(&th, NULL, publish_later, &l);
	fetches = 0;
	int64_t t0 = cfs_clock_mono_ms();
	CHECK_EQ(read_via(m2, "F2", 5000, 0, 5000, 0), 0);
	int64_t waited = cfs_clock_mono_ms() - t0;
	pthread_join(th, NULL);
	CHECK_EQ(fetches, 0);
	CHECK(waited >= 250 && waited < 2500);
	cfs_tiered_stats(m2, &s2);
	CHECK_EQ(s2.lease_waits, 1);
	CHECK_EQ(s2.lease_wait_hits, 1);

	/* a lease whose holder vanished: taken once it expires, then downloaded */
	CHECK(tier_set(m1, "cfs1:64K:{F3@rev1:0}:0:lease", "gone", 4, "400") == 0);
	fetches = 0;
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(read_via(m2, "F3", 5000, 0, 5000, 0), 0);
	waited = cfs_clock_mono_ms() - t0;
	CHECK_EQ(fetches, 1);
	CHECK(waited >= 350 && waited < 2500);
	cfs_tiered_stats(m2, &s2);
	CHECK_EQ(s2.lease_timeouts, 0);
	CHECK(tier_get(m1, "cfs1:64K:{F3@rev1:0}:0", v, sizeof(v), &n) == 0); /* published */

	/* a lease this mount's dead server left: taken over at once, no wait */
	struct cfs_tiered *heir = machine_as(port[0], NULL, 3000, "m-this-mount");
	CHECK(tier_set(m1, "cfs1:64K:{F9@rev1:0}:0:lease", "m-this-mount", 12, "8000") == 0);
	fetches = 0;
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(read_via(heir, "F9", 5000, 0, 5000, 0), 0);
	CHECK(cfs_clock_mono_ms() - t0 < 1000);
	CHECK_EQ(fetches, 1);
	struct cfs_tiered_stats sh;
	cfs_tiered_stats(heir, &sh);
	CHECK_EQ(sh.lease_waits, 0);
	CHECK_EQ(sh.published, 1);
	CHECK_EQ(tier_get(m1, "cfs1:64K:{F9@rev1:0}:0:lease", v, sizeof(v), &n), -ENOENT);
	cfs_tiered_free(heir);

	/* a reader that has enough after one block: the leases of the rest go */
	fetches = 0;
	CHECK_EQ(read_via(m1, "F4", 4 * BS, 0, 4 * BS, BS), 0);
	for (int b = 1; b < 4; b++) {
		char key[64];
		snprintf(key, sizeof(key), "cfs1:64K:{F4@rev1:0}:%d:lease", b);
		CHECK_EQ(tier_get(m1, key, v, sizeof(v), &n), -ENOENT);
	}
	/* a file without a revision is not the tier's */
	cfs_tiered_stats(m1, &s1);
	uint64_t misses = s1.misses;
	struct dst d = { .cap = 100 };
	d.buf = malloc(100);
	size_t got = 0;
	fetches = 0;
	CHECK_EQ(cfs_tiered_fetch(m1, "F5", NULL, 100, 0, 100, dst_sink, &d, &got, 0), 0);
	CHECK_EQ(fetches, 1);
	CHECK_EQ(got, 100);
	free(d.buf);
	cfs_tiered_stats(m1, &s1);
	CHECK_EQ(s1.misses, misses);

	test_replica();

	/* the whole cluster gone: downloads, no error, no long wait */
	stop_servers();
	fetches = 0;
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(read_via(m2, "F6", 2 * BS, 0, 2 * BS, 0), 0);
	CHECK_EQ(read_via(m2, "F7", 2 * BS, 0, 2 * BS, 0), 0);
	CHECK_EQ(read_via(m2, "F1", size, 0, (size_t)size, 0), 0);
	CHECK(cfs_clock_mono_ms() - t0 < 3000);
	CHECK_EQ(fetches, 3);
	cfs_tiered_stats(m2, &s2);
	CHECK(s2.bypassed >= 3);
	CHECK(s2.errors >= 1);
	CHECK_EQ(s2.up, 0);
	cfs_tiered_free(m1);
	cfs_tiered_free(m2);
}

/* A machine whose values are MAC'd under key k. */
static struct cfs_tiered *keyed_machine(const char *k)
{
	CHECK_EQ(cfs_tiered_key_new(k, strlen(k), &machine_key), 0);
	return machine(3000);
}

/* Keyed values (issue 24): published as format 2 under cfs2 keys; served
 * to a mount with the same key; a forged one (data changed, header kept)
 * refused, counted, fetched and overwritten; another key's values refused
 * and overwritten; unkeyed mounts keep to cfs1; cfs_tiered_forget deletes
 * a revision's values and reads it from Drive from then on. */
static void test_keyed(void)
{
	static const char KA[] = "test-key-A-0123456789abcdef0123456789";
	static const char KB[] = "test-key-B-0123456789abcdef0123456789";
	struct cfs_tiered *m1 = keyed_machine(KA), *m2 = keyed_machine(KA);
	struct cfs_tiered_stats s;
	int64_t size = 3 * BS + 1000;
	char v[BS + 64];
	size_t n;
	fetches = 0;
	CHECK_EQ(read_via(m1, "G1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1);
	CHECK(tier_get(m1, "cfs2:64K:{G1@rev1:0}:3", v, sizeof(v), &n) == 0);
	CHECK_EQ(n, CFS_TIERED_HEADER_MAC + 1000);
	CHECK(memcmp(v, "CFB2", 4) == 0);
	CHECK_EQ(tier_get(m1, "cfs1:64K:{G1@rev1:0}:3", v, sizeof(v), &n), -ENOENT);
	CHECK_EQ(read_via(m2, "G1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1);
	cfs_tiered_stats(m2, &s);
	CHECK_EQ(s.hits, 4);
	CHECK_EQ(s.forged + s.corrupt, 0);

	/* forged: block 1's bytes changed, its header (and MAC) kept */
	CHECK(tier_get(m1, "cfs2:64K:{G1@rev1:0}:1", v, sizeof(v), &n) == 0);
	v[CFS_TIERED_HEADER_MAC + 100] ^= 0x5a;
	CHECK(tier_set(m1, "cfs2:64K:{G1@rev1:0}:1", v, n, NULL) == 0);
	fetches = 0;
	fetched = 0;
	CHECK_EQ(read_via(m2, "G1", size, 0, (size_t)size, 0), 0); /* right bytes (read_via) */
	CHECK_EQ(fetches, 1);
	CHECK_EQ(fetched, BS);
	cfs_tiered_stats(m2, &s);
	CHECK_EQ(s.forged, 1);
	CHECK_EQ(s.hits, 7);
	CHECK(tier_get(m1, "cfs2:64K:{G1@rev1:0}:1", v, sizeof(v), &n) == 0);
	struct cfs_tiered_key *ka = NULL;
	CHECK_EQ(cfs_tiered_key_new(KA, strlen(KA), &ka), 0);
	struct cfs_tiered_block blk = { "G1", "rev1", 1, BS };
	CHECK_EQ(cfs_tiered_value_check(ka, &blk, v, n, BS), CFS_TIERED_OK); /* overwritten */
	cfs_tiered_key_free(ka);

	/* another key: every value refused and written over under its own */
	struct cfs_tiered *mb = keyed_machine(KB);
	fetches = 0;
	CHECK_EQ(read_via(mb, "G1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1);
	cfs_tiered_stats(mb, &s);
	CHECK_EQ(s.forged, 4);
	CHECK_EQ(s.hits, 0);
	cfs_tiered_free(mb);
	/* ... which the first key's mounts refuse in turn */
	fetches = 0;
	CHECK_EQ(read_via(m1, "G1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1);
	cfs_tiered_stats(m1, &s);
	CHECK_EQ(s.forged, 4);

	/* an unkeyed mount keeps to cfs1: a miss, the keyed values untouched */
	struct cfs_tiered *plain = machine(3000);
	fetches = 0;
	CHECK_EQ(read_via(plain, "G1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 1);
	cfs_tiered_stats(plain, &s);
	CHECK_EQ(s.forged + s.corrupt, 0);
	CHECK(tier_get(m1, "cfs1:64K:{G1@rev1:0}:0", v, sizeof(v), &n) == 0);
	CHECK(tier_get(m1, "cfs2:64K:{G1@rev1:0}:0", v, sizeof(v), &n) == 0);
	CHECK(memcmp(v, "CFB2", 4) == 0);
	cfs_tiered_free(plain);

	/* forgotten: every value deleted; read from Drive from now on, and
	 * published again */
	cfs_tiered_forget(m2, "G1", "rev1", size);
	cfs_tiered_stats(m2, &s);
	CHECK_EQ(s.dropped, 4);
	for (int b = 0; b < 4; b++) {
		char key[64];
		snprintf(key, sizeof(key), "cfs2:64K:{G1@rev1:0}:%d", b);
		CHECK_EQ(tier_get(m1, key, v, sizeof(v), &n), -ENOENT);
	}
	uint64_t hits = s.hits;
	for (int round = 0; round < 2; round++) {
		fetches = 0;
		CHECK_EQ(read_via(m2, "G1", size, 0, (size_t)size, 0), 0);
		CHECK_EQ(fetches, 1);
	}
	cfs_tiered_stats(m2, &s);
	CHECK_EQ(s.hits, hits);
	CHECK(tier_get(m1, "cfs2:64K:{G1@rev1:0}:2", v, sizeof(v), &n) == 0);
	fetches = 0; /* the others still read it from the tier */
	CHECK_EQ(read_via(m1, "G1", size, 0, (size_t)size, 0), 0);
	CHECK_EQ(fetches, 0);
	cfs_tiered_forget(m2, "G2", NULL, size); /* no revision: nothing to do */
	cfs_tiered_free(m1);
	cfs_tiered_free(m2);
}

int main(void)
{
	test_format();
	test_parse();
	int rc = start_cluster();
	if (rc == 1) {
		printf("test_tiered: redis-server not installed: the cluster part is skipped\n");
	} else if (rc) {
		CHECK_EQ(rc, 0);
	} else {
		test_auth();
		test_full();
		struct cfs_tiered *x = machine(3000);
		test_routing(x);
		cfs_tiered_free(x);
		test_keyed();
		test_blocks();
	}
	stop_servers();
	return check_done("test_tiered");
}
