/* Unit tests: cluster (src/tier/cluster.c), Redis Cluster routing.
 * CRC16 against the specification's check value and known slots; hash
 * tags; a recorded CLUSTER SLOTS reply (3 masters, 3 replicas, the reply a
 * `redis-cli --cluster create` of six loopback nodes gives) routed to
 * masters and replicas; malformed replies refused whole; MOVED and ASK
 * redirections parsed, bad ones refused.
 *
 * Only the cluster named (issue 24): --shared-cache-nodes parsed strictly
 * (IPv4 and IPv6 CIDRs, bare addresses; host bits, prefix lengths, empty
 * items, spaces, leading zeros refused), CIDR matching at and around the
 * prefix boundary (IPv4-mapped IPv6 as IPv4), and the allow set: a seed's
 * host at any port, an announced node at its port only, names by text
 * (case-insensitively), a redirect target outside all of them refused. */
#include <arpa/inet.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cluster.h"
#include "err.h"
#include <errno.h>

/* Reply builders over a static pool (the tests never free). */
static struct cfs_cluster_reply pool[512];
static const struct cfs_cluster_reply *ptrs[2048];
static size_t npool, nptrs;

static const struct cfs_cluster_reply *S(const char *s)
{
	struct cfs_cluster_reply *r = &pool[npool++];
	*r = (struct cfs_cluster_reply){ .type = CFS_RESP_STRING, .str = s, .len = strlen(s) };
	return r;
}

static const struct cfs_cluster_reply *I(long long v)
{
	struct cfs_cluster_reply *r = &pool[npool++];
	*r = (struct cfs_cluster_reply){ .type = CFS_RESP_INTEGER, .integer = v };
	return r;
}

static const struct cfs_cluster_reply *A(size_t n, ...)
{
	struct cfs_cluster_reply *r = &pool[npool++];
	va_list ap;
	va_start(ap, n);
	const struct cfs_cluster_reply **el = &ptrs[nptrs];
	for (size_t i = 0; i < n; i++)
		ptrs[nptrs++] = va_arg(ap, const struct cfs_cluster_reply *);
	va_end(ap);
	*r = (struct cfs_cluster_reply){ .type = CFS_RESP_ARRAY, .n = n, .el = el };
	return r;
}

static const struct cfs_cluster_reply *NODE(const char *host, int port, const char *id)
{
	return A(3, S(host), I(port), S(id));
}

static struct cfs_cluster_map map;

static void test_hash(void)
{
	CHECK_EQ(cfs_cluster_crc16("123456789", 9), 0x31C3); /* CRC16-XMODEM check value */
	CHECK_EQ(cfs_cluster_crc16("", 0), 0);
	/* slots as a real cluster answers CLUSTER KEYSLOT */
	CHECK_EQ(cfs_cluster_slot("foo", 3), 12182);
	CHECK_EQ(cfs_cluster_slot("bar", 3), 5061);
	CHECK_EQ(cfs_cluster_slot("hello", 5), 866);
	/* hash tags: only what is between the first { and the next } */
	CHECK_EQ(cfs_cluster_slot("{user1000}.following", 20), cfs_cluster_slot("user1000", 8));
	CHECK_EQ(cfs_cluster_slot("{user1000}.followers", 20), cfs_cluster_slot("user1000", 8));
	CHECK_EQ(cfs_cluster_slot("foo{}{bar}", 10), cfs_cluster_crc16("foo{}{bar}", 10) & 16383);
	CHECK_EQ(cfs_cluster_slot("foo{{bar}}zap", 13), cfs_cluster_slot("{bar", 4));
	CHECK_EQ(cfs_cluster_slot("foo{bar}{zap}", 13), cfs_cluster_slot("bar", 3));
	CHECK_EQ(cfs_cluster_slot("no close {brace", 15), cfs_cluster_crc16("no close {brace", 15) & 16383);
	/* a key with a NUL is hashed whole, NUL included */
	CHECK_EQ(cfs_cluster_slot("a\0b", 3), cfs_cluster_crc16("a\0b", 3) & 16383);
}

static const struct cfs_cluster_reply *six_nodes(void)
{
	return A(3,
		 A(4, I(0), I(5460), NODE("127.0.0.1", 7000, "a1"), NODE("127.0.0.1", 7004, "b1")),
		 A(4, I(5461), I(10922), NODE("127.0.0.1", 7001, "a2"), NODE("127.0.0.1", 7005, "b2")),
		 A(4, I(10923), I(16383), NODE("127.0.0.1", 7002, "a3"), NODE("127.0.0.1", 7003, "b3")));
}

static void test_slots(void)
{
	CHECK_EQ(cfs_cluster_map_from_slots(&map, six_nodes(), "10.0.0.1"), 0);
	CHECK_EQ(map.nnodes, 6);
	CHECK_EQ(map.covered, CFS_CLUSTER_SLOTS);
	unsigned n = cfs_cluster_route(&map, cfs_cluster_slot("foo", 3), 0); /* 12182 */
	CHECK_STR(map.node[n].host, "127.0.0.1");
	CHECK_EQ(map.node[n].port, 7002);
	n = cfs_cluster_route(&map, 12182, 1);
	CHECK_EQ(map.node[n].port, 7003);
	n = cfs_cluster_route(&map, 0, 0);
	CHECK_EQ(map.node[n].port, 7000);
	n = cfs_cluster_route(&map, 5461, 0);
	CHECK_EQ(map.node[n].port, 7001);
	n = cfs_cluster_route(&map, 16383, 2); /* no second replica: the master */
	CHECK_EQ(map.node[n].port, 7002);
	CHECK_EQ(cfs_cluster_route(&map, 16384, 0), CFS_CLUSTER_NO_NODE);

	/* a slot range without a master, an empty host (the seed's), no id */
	const struct cfs_cluster_reply *part =
		A(2, A(3, I(0), I(99), A(2, S(""), I(6379))),
		  A(3, I(200), I(200), A(2, S("?"), I(6380))));
	CHECK_EQ(cfs_cluster_map_from_slots(&map, part, "10.0.0.1"), 0);
	CHECK_EQ(map.covered, 101);
	CHECK_EQ(cfs_cluster_route(&map, 100, 0), CFS_CLUSTER_NO_NODE);
	n = cfs_cluster_route(&map, 50, 0);
	CHECK_STR(map.node[n].host, "10.0.0.1");
	CHECK_EQ(map.node[n].port, 6379);
	n = cfs_cluster_route(&map, 200, 0);
	CHECK_EQ(map.node[n].port, 6380);

	/* refused whole, and then it covers nothing */
	const struct cfs_cluster_reply *bad[] = {
		I(3),                                                          /* not an array */
		A(1, A(2, I(0), I(10))),                                       /* no master */
		A(1, A(3, I(10), I(5), NODE("h", 1, "x"))),                    /* end < start */
		A(1, A(3, I(0), I(16384), NODE("h", 1, "x"))),                 /* past the last slot */
		A(1, A(3, I(0), I(10), NODE("h", 0, "x"))),                    /* port 0 */
		A(1, A(3, I(0), I(10), NODE("h", 70000, "x"))),                /* port too big */
		A(1, A(3, S("0"), I(10), NODE("h", 1, "x"))),                  /* slot as a string */
		A(1, A(3, I(0), I(10), A(1, S("h")))),                         /* node without port */
		A(2, A(3, I(0), I(10), NODE("h", 1, "x")),
		  A(3, I(5), I(20), NODE("g", 2, "y"))),                       /* two owners */
		A(1, A(3, I(0), I(10), NODE("", 1, "x"))),                     /* no host, no seed */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(cfs_cluster_map_from_slots(&map, bad[i], i == 9 ? NULL : "seed"), CFS_E_PROTO);
		CHECK_EQ(map.covered, 0);
		CHECK_EQ(cfs_cluster_route(&map, 3, 0), CFS_CLUSTER_NO_NODE);
	}
	/* a host NUL inside it */
	struct cfs_cluster_reply nulhost = { .type = CFS_RESP_STRING, .str = "a\0b", .len = 3 };
	const struct cfs_cluster_reply *nh = A(1, A(3, I(0), I(1), A(2, &nulhost, I(5))));
	CHECK_EQ(cfs_cluster_map_from_slots(&map, nh, "seed"), CFS_E_PROTO);
}

static void test_redirect(void)
{
	unsigned slot = 0;
	struct cfs_cluster_node to;
	const char *m = "MOVED 3999 127.0.0.1:6381";
	CHECK_EQ(cfs_cluster_redirect(m, strlen(m), &slot, &to), 1);
	CHECK_EQ(slot, 3999);
	CHECK_STR(to.host, "127.0.0.1");
	CHECK_EQ(to.port, 6381);
	const char *a = "ASK 12182 10.1.2.3:7002";
	CHECK_EQ(cfs_cluster_redirect(a, strlen(a), &slot, &to), 2);
	CHECK_EQ(slot, 12182);
	CHECK_STR(to.host, "10.1.2.3");
	const char *v6 = "MOVED 1 ::1:7000";
	CHECK_EQ(cfs_cluster_redirect(v6, strlen(v6), &slot, &to), 1);
	CHECK_STR(to.host, "::1");
	CHECK_EQ(to.port, 7000);
	const char *same = "MOVED 7 :6380";
	CHECK_EQ(cfs_cluster_redirect(same, strlen(same), &slot, &to), 1);
	CHECK_STR(to.host, "");
	const char *other[] = { "ERR unknown command", "MOVEDX 1 h:1", "CLUSTERDOWN Hash slot not served",
				"ASKING" };
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		CHECK_EQ(cfs_cluster_redirect(other[i], strlen(other[i]), &slot, &to), 0);
	const char *bad[] = { "MOVED 16384 h:1", "MOVED x h:1", "MOVED 1 h", "MOVED 1 h:", "MOVED 1 h:0",
			      "MOVED 1 h:65536", "MOVED 1 h:1x", "ASK 1", "MOVED 1234567 h:1",
			      "MOVED 1 a b:1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_EQ(cfs_cluster_redirect(bad[i], strlen(bad[i]), &slot, &to), CFS_E_PROTO);
}

static int in(const char *cidrs, const char *addr)
{
	struct cfs_cluster_cidr c[8];
	struct cfs_cluster_addr a;
	char why[200];
	int n = cfs_cluster_cidrs_parse(cidrs, c, 8, why, sizeof(why));
	if (n < 0 || !cfs_cluster_addr_parse(addr, &a))
		return -1;
	for (int i = 0; i < n; i++)
		if (cfs_cluster_cidr_match(&c[i], &a))
			return 1;
	return 0;
}

static void test_cidr(void)
{
	struct cfs_cluster_cidr c[4];
	char why[200];
	CHECK_EQ(cfs_cluster_cidrs_parse("10.0.0.0/8,fd00::/8,192.168.1.7", c, 4, why, sizeof(why)), 3);
	CHECK_EQ(c[0].bits, 8);
	CHECK_EQ(c[1].net.family, AF_INET6);
	CHECK_EQ(c[1].bits, 8);
	CHECK_EQ(c[2].bits, 32);
	const char *bad[] = {
		"", ",", "10.0.0.0/8,", ",10.0.0.0/8", "10.0.0.0/8,,fd00::/8", /* empty items */
		"10.0.0.0 /8", " 10.0.0.0/8", "10.0.0.0/8 ",                     /* spaces */
		"10.0.0.1/8", "fd00::1/8", "10.0.0.128/25x",                      /* host bits, junk */
		"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/-1", "10.0.0.0/08", /* prefixes */
		"10.0.0/8", "10.0.0.256/32", "010.0.0.0/8", "host.example/8",     /* addresses */
		"[fd00::]/8", "fe80::1%eth0/128", "/8", "10.0.0.0/8/8",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why[0] = 0;
		int rc = cfs_cluster_cidrs_parse(bad[i], c, 4, why, sizeof(why));
		if (rc != CFS_E_CONFIG)
			fprintf(stderr, "test_cluster: \"%s\" parsed (%d)\n", bad[i], rc);
		CHECK_EQ(rc, CFS_E_CONFIG);
		CHECK(strstr(why, "--shared-cache-nodes") != NULL);
	}
	CHECK_EQ(cfs_cluster_cidrs_parse("1.0.0.0/8,2.0.0.0/8,3.0.0.0/8,4.0.0.0/8,5.0.0.0/8", c, 4,
					 why, sizeof(why)), CFS_E_CONFIG); /* too many */
	/* matching */
	CHECK_EQ(in("10.0.0.0/8", "10.255.255.255"), 1);
	CHECK_EQ(in("10.0.0.0/8", "11.0.0.0"), 0);
	CHECK_EQ(in("10.0.0.0/8", "9.255.255.255"), 0);
	CHECK_EQ(in("127.0.0.0/30", "127.0.0.3"), 1);
	CHECK_EQ(in("127.0.0.0/30", "127.0.0.4"), 0);
	CHECK_EQ(in("192.168.1.7", "192.168.1.7"), 1);
	CHECK_EQ(in("192.168.1.7", "192.168.1.6"), 0);
	CHECK_EQ(in("0.0.0.0/0", "203.0.113.9"), 1);
	CHECK_EQ(in("0.0.0.0/0", "::1"), 0);       /* families never mix */
	CHECK_EQ(in("::/0", "10.0.0.1"), 0);
	CHECK_EQ(in("fd00::/8", "fd12:3456::1"), 1);
	CHECK_EQ(in("fd00::/8", "fe00::1"), 0);
	CHECK_EQ(in("2001:db8::/33", "2001:db8:7fff::1"), 1);
	CHECK_EQ(in("2001:db8::/33", "2001:db8:8000::1"), 0);
	CHECK_EQ(in("10.0.0.0/8", "::ffff:10.1.2.3"), 1); /* mapped: as IPv4 */
	CHECK_EQ(in("::ffff:10.0.0.0/104", "10.1.2.3"), 1);
	CHECK_EQ(in("::ffff:10.0.0.0/104", "11.1.2.3"), 0);
	struct cfs_cluster_addr a;
	CHECK_EQ(cfs_cluster_addr_parse("redis.example", &a), 0);
	CHECK_EQ(cfs_cluster_addr_parse("[::1]", &a), 0);
	CHECK_EQ(cfs_cluster_addr_parse("::1", &a), 1);
	CHECK_EQ(a.family, AF_INET6);
}

static void test_allow(void)
{
	static struct cfs_cluster_allow al;
	struct cfs_cluster_cidr c[2];
	char why[200];
	cfs_cluster_allow_init(&al, NULL, 0);
	/* nothing yet: nothing allowed */
	CHECK_EQ(cfs_cluster_allowed(&al, "127.0.0.1", 7000), 0);
	/* a seed's host: any port */
	CHECK_EQ(cfs_cluster_allow_add(&al, "127.0.0.1", 0), 0);
	CHECK_EQ(cfs_cluster_allowed(&al, "127.0.0.1", 7000), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "127.0.0.1", 7999), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "::ffff:127.0.0.1", 7999), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "127.0.0.2", 7000), 0); /* the redirect */
	/* an announced node: its port only */
	CHECK_EQ(cfs_cluster_allow_add(&al, "10.0.0.5", 7001), 0);
	CHECK_EQ(cfs_cluster_allowed(&al, "10.0.0.5", 7001), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "10.0.0.5", 7002), 0);
	/* names, by text */
	CHECK_EQ(cfs_cluster_allow_add(&al, "Redis-0.cache.internal", 0), 0);
	CHECK_EQ(cfs_cluster_allowed(&al, "redis-0.cache.internal", 6379), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "redis-0.cache.internal.evil.example", 6379), 0);
	CHECK_EQ(cfs_cluster_allowed(&al, "evil.example", 6379), 0);
	CHECK_EQ(cfs_cluster_allow_add(&al, "node-3", 7003), 0);
	CHECK_EQ(cfs_cluster_allowed(&al, "node-3", 7003), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "node-3", 7004), 0);
	/* adding again changes nothing; an address by address */
	CHECK_EQ(cfs_cluster_allow_add(&al, "10.0.0.5", 7001), 0);
	CHECK_EQ(al.naddr, 2);
	struct cfs_cluster_addr x;
	CHECK(cfs_cluster_addr_parse("10.0.0.5", &x));
	CHECK_EQ(cfs_cluster_allowed_addr(&al, &x, 7001), 1);
	CHECK_EQ(cfs_cluster_allowed_addr(&al, &x, 7000), 0);
	/* CIDRs: any port, any address inside */
	CHECK_EQ(cfs_cluster_cidrs_parse("192.168.0.0/16,fd00::/8", c, 2, why, sizeof(why)), 2);
	cfs_cluster_allow_init(&al, c, 2);
	CHECK_EQ(cfs_cluster_allowed(&al, "192.168.44.2", 1), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "fd00::7", 65535), 1);
	CHECK_EQ(cfs_cluster_allowed(&al, "192.169.0.1", 1), 0);
	CHECK_EQ(cfs_cluster_allowed(&al, "some.name", 1), 0); /* a name is never in a CIDR by text */
	/* full: -ENOSPC, nothing overwritten */
	char h[32];
	int rc = 0;
	for (unsigned i = 0; i <= CFS_CLUSTER_ALLOW_ADDRS && !rc; i++) {
		snprintf(h, sizeof(h), "10.%u.%u.1", i / 256, i % 256);
		rc = cfs_cluster_allow_add(&al, h, 1);
	}
	CHECK_EQ(rc, -ENOSPC);
	CHECK_EQ(cfs_cluster_allowed(&al, "10.0.0.1", 1), 1);
}

int main(void)
{
	test_hash();
	test_slots();
	test_redirect();
	test_cidr();
	test_allow();
	return check_done("test_cluster");
}
