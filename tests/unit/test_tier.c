/* Unit tests: tier (src/tier/tier.c), the cluster client, against fake
 * Redis nodes (fake_redis.h: threads on loopback sockets, no redis-server).
 *
 * - Only the cluster named: a seed that answers -MOVED or -ASK to a node on
 *   127.0.0.2 (not a seed's address, not announced by a seed) gets the call
 *   refused (-EPERM) and counted -- the foreign node sees no connection at
 *   all, so no AUTH; with opts.nodes (--shared-cache-nodes) covering it, the
 *   same redirect is followed.  A slot map read from a non-seed node (the
 *   seed dead) that names the foreign node leaves its slots unserved and the
 *   foreign node untouched; a map read from a seed makes its nodes the
 *   cluster's.
 * - Reply caps: an MGET of one key answered with 2 x 300 MiB fails with
 *   CFS_E_PROTO at once and the process's peak RSS (VmHWM) barely moves; an
 *   MGET of one key answered with two 1 MiB values fails on the second.
 * - Deadlines: a node that answers each of 5 pipelined GETs 400 ms apart:
 *   the call ends at its deadline (2 x (connect + io)), not after 2 s; one
 *   GET answered later than io_ms fails at io_ms, once; a name
 *   whose lookup takes 3 s: a map read gives up at the connect deadline,
 *   and past CFS_REDIS_LOOKUPS_MAX lookups outstanding a name fails at once.
 * - The node table: a node dropped from the map and dead leaves the table
 *   after forget_ms; 300 ASKs to 300 different ports leave at most 256
 *   nodes; threads calling through redirects while maps change and nodes
 *   leave (a use-after-free would show under the sanitizer build). */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cluster.h"
#include "err.h"
#include "fake_redis.h"
#include "log.h"
#include "redis.h"
#include "tier.h"

static const char PASSWORD[] = "tier-unit-secret";

/* What a node answers, as the tests steer it (read by its threads). */
struct script {
	int nr;                     /* CLUSTER SLOTS: nr ranges (0: itself, all slots) */
	int lo[4], hi[4];
	struct fake_node *who[4];
	const char *redirect;       /* "MOVED" or "ASK": GET and MGET answer with it */
	struct fake_node *to;       /* ... to this node, or (NULL) to 127.0.0.1:port_base+k */
	int port_base;
	volatile int redirects;     /* k */
	int get_delay_ms;           /* GET: answered this late */
	int huge;                   /* MGET: *2 and two 300 MiB strings, streamed */
	int two_values;             /* MGET: two 1 MiB values, whatever was asked */
};

/* Sleeps ms unless the node stops. */
static void nap(struct fake_node *n, int ms)
{
	int64_t end = cfs_clock_mono_ms() + ms;
	while (!n->stop && cfs_clock_mono_ms() < end)
		usleep(5000);
}

static void send_slots(struct fake_node *n, int fd, const struct script *s)
{
	int lo[4], hi[4], port[4];
	const char *host[4];
	int nr = s && s->nr ? s->nr : 1;
	for (int i = 0; i < nr; i++) {
		const struct fake_node *w = s && s->nr ? s->who[i] : n;
		lo[i] = s && s->nr ? s->lo[i] : 0;
		hi[i] = s && s->nr ? s->hi[i] : 16383;
		host[i] = w->ip;
		port[i] = w->port;
	}
	fake_send_slots(fd, nr, lo, hi, host, port);
}

static void answer(struct fake_node *n, int fd, int argc, char **argv, size_t *len)
{
	struct script *s = n->arg;
	int get = strcasecmp(argv[0], "GET") == 0, mget = strcasecmp(argv[0], "MGET") == 0;
	(void)len;
	if (strcasecmp(argv[0], "AUTH") == 0 || strcasecmp(argv[0], "ASKING") == 0 ||
	    strcasecmp(argv[0], "READONLY") == 0) {
		fake_sends(fd, "+OK\r\n");
	} else if (strcasecmp(argv[0], "PING") == 0) {
		fake_sends(fd, "+PONG\r\n");
	} else if (argc == 2 && strcasecmp(argv[0], "CLUSTER") == 0) {
		send_slots(n, fd, s);
	} else if ((get || mget) && s && s->redirect) {
		char r[128];
		int k = __atomic_fetch_add(&s->redirects, 1, __ATOMIC_RELAXED);
		snprintf(r, sizeof(r), "-%s 1234 %s:%d\r\n", s->redirect, s->to ? s->to->ip : "127.0.0.1",
			 s->to ? s->to->port : s->port_base + k);
		fake_sends(fd, r);
	} else if (mget && s && s->huge) {
		static char zeros[1 << 16];
		if (fake_sends(fd, "*2\r\n$314572800\r\n"))
			return;
		for (size_t sent = 0; !n->stop && sent < (600u << 20); sent += sizeof(zeros))
			if (fake_send(fd, zeros, sizeof(zeros)))
				return;
	} else if (mget && s && s->two_values) {
		static char mib[1 << 20];
		fake_sends(fd, "*2\r\n");
		for (int i = 0; i < 2; i++)
			if (fake_send_bulk(fd, mib, sizeof(mib)))
				return;
	} else if (get) {
		if (s && s->get_delay_ms)
			nap(n, s->get_delay_ms);
		fake_send_bulk(fd, "value", 5);
	} else {
		fake_sends(fd, "-ERR unknown\r\n");
	}
}

struct topts {
	const char *seed_host; /* default: the seed node's ip */
	const char *nodes;
	int connect_ms, io_ms, forget_ms;
};

static struct cfs_tier *tier_on(const struct fake_node *seed, const struct topts *to)
{
	static const struct topts none;
	char url[300], why[256];
	struct cfs_tier_seeds seeds;
	if (!to)
		to = &none;
	snprintf(url, sizeof(url), "redis://%s:%d", to->seed_host ? to->seed_host : seed->ip,
		 seed->port);
	CHECK_EQ(cfs_tier_parse(url, &seeds, why, sizeof(why)), 0);
	struct cfs_tier_opts o = { .seeds = &seeds, .password = PASSWORD,
				   .connect_ms = to->connect_ms ? to->connect_ms : 500,
				   .io_ms = to->io_ms ? to->io_ms : 1000, .nodes = to->nodes,
				   .forget_ms = to->forget_ms };
	struct cfs_tier *t = NULL;
	CHECK_EQ(cfs_tier_new(&o, &t), 0);
	return t;
}

static int get_key(struct cfs_tier *t, const char *key, struct cfs_redis_reply **r)
{
	const char *argv[] = { "GET", key };
	const size_t len[] = { 3, strlen(key) };
	struct cfs_tier_cmd c = { 2, argv, len, 0 };
	*r = NULL;
	return cfs_tier_exec_read(t, key, strlen(key), 1, &c, r);
}

static int get(struct cfs_tier *t, struct cfs_redis_reply **r)
{
	return get_key(t, "k", r);
}

static struct cfs_tier_stats stats(struct cfs_tier *t)
{
	struct cfs_tier_stats s;
	cfs_tier_stats(t, &s);
	return s;
}

static int is_value(const struct cfs_redis_reply *r)
{
	const struct cfs_cluster_reply *x = r ? cfs_redis_tree(r) : NULL;
	return x && x->type == CFS_RESP_STRING && x->len == 5 && memcmp(x->str, "value", 5) == 0;
}

/* keys[0]: a key whose slot is below 8192, keys[1]: one at or above */
static char keys[2][16];

static void find_keys(void)
{
	for (int half = 0; half < 2; half++)
		for (int i = 0;; i++) {
			snprintf(keys[half], sizeof(keys[0]), "key%d", i);
			if ((cfs_cluster_slot(keys[half], strlen(keys[half])) >= 8192) == half)
				break;
		}
}

static const char *key_in_half(int lower)
{
	return keys[lower ? 0 : 1];
}

/* A seed redirects (MOVED or ASK) to a node on another address: refused,
 * nothing sent there; then the same with that address's network in
 * opts.nodes: followed. */
static void test_redirect_foreign(const char *kind)
{
	struct fake_node seed, foreign;
	struct script fs = { 0 };
	fake_node_start(&foreign, "127.0.0.2", answer, &fs);
	struct script ss = { .redirect = kind, .to = &foreign };
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	struct cfs_tier *t = tier_on(&seed, NULL);
	struct cfs_redis_reply *r = NULL;
	int64_t t0 = cfs_clock_mono_ms();
	CHECK_EQ(get(t, &r), -EPERM);
	CHECK(cfs_clock_mono_ms() - t0 < 1000);
	CHECK(r == NULL);
	CHECK_EQ(get(t, &r), -EPERM); /* and again: counted each time */
	CHECK_EQ(fake_count(&foreign, &foreign.connections), 0);
	CHECK_EQ(fake_count(&foreign, &foreign.auths), 0);
	CHECK(fake_count(&seed, &seed.auths) >= 1);
	if (fake_count(&foreign, &foreign.auths))
		fprintf(stderr, "test_tier: %s to 127.0.0.2: the foreign node got AUTH %s\n", kind,
			foreign.password);
	struct cfs_tier_stats st = stats(t);
	CHECK_EQ(st.redirects_refused, 2);
	CHECK_EQ(st.redirects, 0);
	CHECK_EQ(st.known_nodes, 1);
	cfs_tier_free(t);

	/* widened: 127.0.0.0/30 holds 127.0.0.2 */
	t = tier_on(&seed, &(struct topts){ .nodes = "10.0.0.0/8,127.0.0.0/30" });
	CHECK_EQ(get(t, &r), 0);
	CHECK(is_value(r));
	cfs_redis_reply_free(r);
	CHECK_EQ(fake_count(&foreign, &foreign.auths), 1);
	CHECK_STR(foreign.password, PASSWORD);
	st = stats(t);
	CHECK_EQ(st.redirects, 1);
	CHECK_EQ(st.redirects_refused, 0);
	cfs_tier_free(t);
	/* a network that does not hold it: refused as before */
	t = tier_on(&seed, &(struct topts){ .nodes = "127.0.0.4/30" });
	CHECK_EQ(get(t, &r), -EPERM);
	CHECK_EQ(fake_count(&foreign, &foreign.connections), 1);
	cfs_tier_free(t);
	fake_node_stop(&seed);
	fake_node_stop(&foreign);
}

/* A map read from a seed makes its nodes the cluster's; one read from
 * another node (the seed dead) may not name new ones. */
static void test_map_foreign(void)
{
	struct fake_node seed, other, foreign;
	struct script fs = { 0 }, ss = { 0 }, os = { 0 };
	fake_node_start(&foreign, "127.0.0.2", answer, &fs);
	fake_node_start(&other, "127.0.0.1", answer, &os);
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	ss = (struct script){ .nr = 2, .lo = { 0, 8192 }, .hi = { 8191, 16383 },
			      .who = { &seed, &other } };
	os = (struct script){ .nr = 2, .lo = { 0, 8192 }, .hi = { 8191, 16383 },
			      .who = { &foreign, &other } };
	struct cfs_tier *t = tier_on(&seed, NULL);
	CHECK_EQ(cfs_tier_probe(t), 0);
	CHECK_EQ(stats(t).known_nodes, 2);
	struct cfs_redis_reply *r = NULL;
	CHECK_EQ(get_key(t, key_in_half(0), &r), 0); /* other, announced by the seed */
	CHECK(is_value(r));
	cfs_redis_reply_free(r);
	fake_node_kill(&seed);
	CHECK_EQ(cfs_tier_probe(t), 0); /* from other: the foreign node's slots unserved */
	struct cfs_tier_stats st = stats(t);
	CHECK_EQ(st.redirects_refused, 1);
	CHECK_EQ(st.up, 1);
	CHECK_EQ(get_key(t, key_in_half(1), &r), -EAGAIN);
	CHECK(r == NULL);
	CHECK_EQ(get_key(t, key_in_half(0), &r), 0);
	cfs_redis_reply_free(r);
	CHECK_EQ(fake_count(&foreign, &foreign.connections), 0);
	cfs_tier_free(t);

	/* the foreign node announced by a seed: the cluster's (the user named the seed) */
	fake_node_stop(&seed);
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	ss.who[0] = &foreign;
	t = tier_on(&seed, NULL);
	CHECK_EQ(get_key(t, key_in_half(1), &r), 0);
	CHECK(is_value(r));
	cfs_redis_reply_free(r);
	CHECK_EQ(fake_count(&foreign, &foreign.auths), 1);
	CHECK_EQ(stats(t).redirects_refused, 0);
	cfs_tier_free(t);
	fake_node_stop(&seed);
	fake_node_stop(&other);
	fake_node_stop(&foreign);
}

static long vm_hwm_kib(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &v) == 1)
			break;
	if (f)
		fclose(f);
	return v;
}

static int mget1(struct cfs_tier *t)
{
	static const char *const argv[] = { "MGET", "k" };
	static const size_t len[] = { 4, 1 };
	struct cfs_tier_cmd c = { 2, argv, len, 0 };
	struct cfs_redis_reply *r = NULL;
	int rc = cfs_tier_exec_read(t, "k", 1, 1, &c, &r);
	cfs_redis_reply_free(r);
	return rc;
}

/* An MGET of one key of at most 1 MiB + 4 KiB answered with 2 x 300 MiB:
 * refused at the first bulk header, in little time and memory. */
static void test_reply_cap(void)
{
	struct fake_node seed;
	struct script ss = { .huge = 1 };
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	struct cfs_tier *t = tier_on(&seed, NULL);
	CHECK_EQ(cfs_tier_probe(t), 0);
	long before = vm_hwm_kib();
	int64_t t0 = cfs_clock_mono_ms();
	CHECK_EQ(mget1(t), CFS_E_PROTO);
	int64_t ms = cfs_clock_mono_ms() - t0;
	long after = vm_hwm_kib();
	printf("test_tier: MGET answered with 2 x 300 MiB: refused in %lld ms, VmHWM %ld -> %ld "
	       "KiB\n", (long long)ms, before, after);
	CHECK(ms < 1000);
	CHECK(before > 0 && after - before < 8 * 1024);
	cfs_tier_free(t); /* the node is resting now: a new client for the next */
	/* two 1 MiB values for one key: the second is past the cap */
	ss.huge = 0;
	ss.two_values = 1;
	t = tier_on(&seed, NULL);
	CHECK_EQ(mget1(t), CFS_E_PROTO);
	after = vm_hwm_kib();
	CHECK(after - before < 16 * 1024);
	cfs_tier_free(t);
	fake_node_stop(&seed);
}

/* A node answering each of 5 pipelined GETs 400 ms late: the call ends
 * at its deadline, 2 x (200 + 500) ms. */
static void test_slow_node(void)
{
	struct fake_node seed;
	struct script ss = { 0 };
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	struct cfs_tier *t = tier_on(&seed, &(struct topts){ .connect_ms = 200, .io_ms = 500 });
	CHECK_EQ(cfs_tier_probe(t), 0);
	ss.get_delay_ms = 400;
	static const char *const argv[] = { "GET", "k" };
	static const size_t len[] = { 3, 1 };
	struct cfs_tier_cmd c[5];
	for (int i = 0; i < 5; i++)
		c[i] = (struct cfs_tier_cmd){ 2, argv, len, 0 };
	struct cfs_redis_reply *r[5] = { 0 };
	int64_t t0 = cfs_clock_mono_ms();
	int rc = cfs_tier_exec(t, "k", 1, 5, c, r);
	int64_t ms = cfs_clock_mono_ms() - t0;
	printf("test_tier: 5 GETs answered 400 ms apart: %s after %lld ms (deadline 1400)\n",
	       cfs_tier_strerror(rc), (long long)ms);
	CHECK_EQ(rc, -ETIMEDOUT);
	CHECK(ms >= 1300 && ms < 2600); /* all five: 2000 ms and a success */
	for (int i = 0; i < 5; i++)
		CHECK(r[i] == NULL);
	cfs_tier_free(t);
	/* one GET answered 2 s late: the reply's own 300 ms, not retried on a
	 * new connection (that would be 600) nor waited for up to the call's
	 * 1000 */
	t = tier_on(&seed, &(struct topts){ .connect_ms = 200, .io_ms = 300 });
	ss.get_delay_ms = 2000;
	t0 = cfs_clock_mono_ms();
	CHECK_EQ(get(t, &r[0]), -ETIMEDOUT);
	ms = cfs_clock_mono_ms() - t0;
	printf("test_tier: one GET answered 2 s late: no answer after %lld ms (io 300)\n",
	       (long long)ms);
	CHECK(ms >= 280 && ms < 580);
	cfs_tier_free(t);
	fake_node_stop(&seed);
}

static int slow_lookup(const char *host, const char *service, const struct addrinfo *hints,
		       struct addrinfo **res)
{
	usleep(3000 * 1000); /* a resolver that answers late */
	(void)host;
	return getaddrinfo("127.0.0.1", service, hints, res);
}

/* A seed by a name whose lookup takes 3 s. */
static void test_slow_lookup(void)
{
	struct fake_node seed;
	fake_node_start(&seed, "127.0.0.1", answer, NULL);
	cfs_redis_set_lookup(slow_lookup);
	struct cfs_tier *t = tier_on(&seed, &(struct topts){ .seed_host = "slow.invalid",
							     .connect_ms = 200, .io_ms = 500 });
	int64_t t0 = cfs_clock_mono_ms();
	int rc = cfs_tier_probe(t);
	int64_t ms = cfs_clock_mono_ms() - t0;
	CHECK(rc != 0);
	CHECK(ms >= 150 && ms < 700);
	/* 8 lookups outstanding at most: then a name fails at once */
	for (int i = 0; i < CFS_REDIS_LOOKUPS_MAX; i++) {
		struct cfs_redis *c = NULL;
		struct cfs_redis_opts o = { .connect_ms = 10 };
		cfs_redis_connect("slow.invalid", seed.port, &o, &c);
		cfs_redis_close(c);
	}
	t0 = cfs_clock_mono_ms();
	struct cfs_redis *c = NULL;
	struct cfs_redis_opts o = { .connect_ms = 1000 };
	CHECK_EQ(cfs_redis_connect("slow.invalid", seed.port, &o, &c), -ETIMEDOUT);
	CHECK(cfs_clock_mono_ms() - t0 < 100);
	/* a literal is never looked up */
	CHECK_EQ(cfs_redis_connect("127.0.0.1", seed.port, &o, &c), 0);
	cfs_redis_close(c);
	CHECK_EQ(fake_count(&seed, &seed.auths), 0);
	cfs_redis_set_lookup(NULL);
	cfs_tier_free(t);
	fake_node_stop(&seed);
}

/* Waits (at most 3 s) until the table holds want nodes, reading the map
 * every 20 ms. */
static int wait_known(struct cfs_tier *t, unsigned want)
{
	int64_t end = cfs_clock_mono_ms() + 3000;
	while (cfs_clock_mono_ms() < end) {
		cfs_tier_probe(t);
		if (stats(t).known_nodes == want)
			return 1;
		usleep(20000);
	}
	return 0;
}

static void test_forget(void)
{
	struct fake_node seed, gone;
	struct script ss = { 0 };
	fake_node_start(&gone, "127.0.0.1", answer, NULL);
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	ss = (struct script){ .nr = 2, .lo = { 0, 8192 }, .hi = { 8191, 16383 },
			      .who = { &seed, &gone } };
	struct cfs_tier *t = tier_on(&seed, &(struct topts){ .forget_ms = 100 });
	CHECK_EQ(cfs_tier_probe(t), 0);
	CHECK_EQ(stats(t).known_nodes, 2);
	struct cfs_redis_reply *r = NULL;
	CHECK_EQ(get_key(t, key_in_half(0), &r), 0);
	cfs_redis_reply_free(r);
	/* the node dies and leaves the map: it leaves the table after forget_ms */
	fake_node_kill(&gone);
	ss.nr = 0;
	CHECK(wait_known(t, 1));
	cfs_tier_free(t);

	/* 300 ASKs to 300 ports of the seed's host (allowed, refused by the
	 * kernel): the table never holds more than 256 */
	ss = (struct script){ .redirect = "ASK", .port_base = 40000 };
	t = tier_on(&seed, NULL);
	unsigned most = 0;
	for (int i = 0; i < 300; i++) {
		CHECK(get(t, &r) != 0);
		unsigned k = (unsigned)stats(t).known_nodes;
		most = k > most ? k : most;
	}
	printf("test_tier: 300 ASKs to 300 ports: at most %u nodes known\n", most);
	CHECK(most <= 256 && most >= 200);
	cfs_tier_free(t);
	fake_node_stop(&seed);
	fake_node_stop(&gone);
}

/* Threads calling through ASK redirects to a live node while the map
 * flips and nodes leave the table every few ms. */
struct hammer {
	struct cfs_tier *t;
	volatile int stop;
	int ok, failed;
};

static void *hammer_main(void *arg)
{
	struct hammer *h = arg;
	while (!h->stop) {
		struct cfs_redis_reply *r = NULL;
		int rc = get_key(h->t, key_in_half(h->ok & 1), &r);
		if (!rc && is_value(r))
			__atomic_add_fetch(&h->ok, 1, __ATOMIC_RELAXED);
		else
			__atomic_add_fetch(&h->failed, 1, __ATOMIC_RELAXED);
		cfs_redis_reply_free(r);
	}
	return NULL;
}

static void test_churn(void)
{
	struct fake_node seed, a, b;
	struct script ss = { 0 }, as = { 0 };
	fake_node_start(&b, "127.0.0.1", answer, NULL);
	fake_node_start(&a, "127.0.0.1", answer, &as);
	fake_node_start(&seed, "127.0.0.1", answer, &ss);
	as = (struct script){ .redirect = "ASK", .to = &b };
	ss = (struct script){ .nr = 2, .lo = { 0, 8192 }, .hi = { 8191, 16383 },
			      .who = { &a, &b } };
	struct hammer h = { .t = tier_on(&seed, &(struct topts){ .forget_ms = 1 }) };
	CHECK_EQ(cfs_tier_probe(h.t), 0);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, hammer_main, &h);
	for (int i = 0; i < 100; i++) { /* a and b in and out of the map */
		ss.who[0] = i % 2 ? &seed : &a;
		ss.who[1] = i % 3 ? &seed : &b;
		cfs_tier_probe(h.t);
		usleep(3000);
	}
	h.stop = 1;
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	printf("test_tier: churn: %d calls served, %d failed\n", h.ok, h.failed);
	CHECK(h.ok > 0);
	cfs_tier_free(h.t);
	fake_node_stop(&seed);
	fake_node_stop(&a);
	fake_node_stop(&b);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	cfs_log_set_level(CFS_LOG_WARN);
	find_keys();
	test_reply_cap(); /* first: it measures the process's peak RSS */
	test_redirect_foreign("MOVED");
	test_redirect_foreign("ASK");
	test_map_foreign();
	test_slow_node();
	test_slow_lookup();
	test_forget();
	test_churn();
	return check_done("test_tier");
}
