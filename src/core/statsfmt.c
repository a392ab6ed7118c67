/* statsfmt: how the stats read to a person or a scraper (see stats.h):
 * the table `colabfs stats` prints (sections, binary units, rates for
 * --watch), JSON passed through, Prometheus text; and the recovery modes'
 * names.  Apart from stats.c, which gathers the numbers in the daemon, so
 * that the command line's lean front end (src/cli/front.c) links this
 * without the daemon's libraries. */
#define _GNU_SOURCE
#include "stats.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "err.h"
#include "json.h"
#include "progress.h"

const char *cfs_stats_recovery_name(uint32_t mode)
{
	static const char *const names[] = { "off", "resend", "forward", "none" };
	return mode < sizeof(names) / sizeof(names[0]) ? names[mode] : "unknown";
}

struct kv {
	char name[64];
	int64_t v;
};

struct kvs {
	struct kv e[192];
	size_t n;
};

static int collect(const char *name, int64_t v, void *arg)
{
	struct kvs *k = arg;
	if (k->n < sizeof(k->e) / sizeof(k->e[0])) {
		snprintf(k->e[k->n].name, sizeof(k->e[0].name), "%s", name);
		k->e[k->n++].v = v;
	}
	return 0;
}

/* Byte counts humanised (progress.h's one printer), others as they are. */
static void human(char *buf, size_t cap, const char *name, double v)
{
	if (strstr(name, "bytes") && v >= 1024)
		cfs_progress_bytes(buf, cap, v);
	else
		snprintf(buf, cap, "%.0f", v);
}

/* The table's sections: their names print under the title, in this order,
 * after every other name (in the daemon's order).  A name the daemon does not
 * send is left out, and so is a title with none of its names. */
static const char *const upload_rows[] = {
	"uploads_pending", "uploads_in_flight", "uploads_pending_bytes", "uploads_bytes_left",
	"uploads_failed", "uploads_last_error", "uploads_done_total", "uploads_bytes_total",
	"uploads_retries_total", "uploads_conflicts_total", "uploads_open_total",
	"uploads_open_bytes_total", "writes_bytes_total", "staging_bytes",
	"uploads_total", "upload_bytes_total", "upload_retries_total", "create_rate_limited_total",
	NULL,
};

static const char *const tier_rows[] = {
	"tier_up", "tier_nodes", "tier_hits_total", "tier_misses_total", "tier_bytes_read_total",
	"tier_bytes_written_total", "tier_published_total", "tier_lease_waits_total",
	"tier_lease_wait_hits_total", "tier_lease_timeouts_total", "tier_corrupt_total",
	"tier_forged_total", "tier_dropped_total", "tier_errors_total", "tier_bypassed_total",
	"tier_redirects_total", "tier_redirects_refused_total", "tier_map_refreshes_total",
	"tier_replica_reads_total", NULL,
};

static const struct section {
	const char *title;
	const char *const *rows;
} sections[] = {
	{ "uploads (write-back: staged at close, sent to Drive after)", upload_rows },
	{ "shared cache tier (--shared-cache: blocks shared through Redis Cluster)", tier_rows },
};

static const struct section *section_of(const char *name)
{
	for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++)
		for (const char *const *r = sections[s].rows; *r; r++)
			if (strcmp(name, *r) == 0)
				return &sections[s];
	return NULL;
}

/* One row of the table: cur->e[i], with its rate against old (NULL: none). */
static void table_row(FILE *out, const struct kvs *cur, size_t i, const struct kvs *old,
		      double dt_s)
{
	const struct kv *e = &cur->e[i];
	char val[32], rate[32] = "";
	human(val, sizeof(val), e->name, (double)e->v);
	if (strcmp(e->name, "recovery_mode") == 0) {
		snprintf(val, sizeof(val), "%s", cfs_stats_recovery_name((uint32_t)e->v));
	} else if (strcmp(e->name, "uploads_last_error") == 0) {
		const char *en = e->v > 0 && e->v < 4096 ? strerrorname_np((int)e->v) : NULL;
		if (!e->v)
			snprintf(val, sizeof(val), "none");
		else if (en)
			snprintf(val, sizeof(val), "%s (%" PRId64 ")", en, e->v);
	}
	if (old && dt_s > 0 && strstr(e->name, "_total")) {
		for (size_t j = 0; j < old->n; j++)
			if (strcmp(old->e[j].name, e->name) == 0)
				human(rate, sizeof(rate), e->name, (double)(e->v - old->e[j].v) / dt_s);
	}
	fprintf(out, "%-40s %16s %14s\n", e->name, val, rate);
}

int cfs_stats_render(FILE *out, const char *json, const char *prev, double dt_s,
		     const char *format)
{
	struct kvs cur = { 0 }, old = { 0 };
	if (cfs_json_flat_ints(json, strlen(json), collect, &cur))
		return CFS_E_PROTO;
	if (prev && cfs_json_flat_ints(prev, strlen(prev), collect, &old))
		prev = NULL;
	if (strcmp(format, "json") == 0) {
		fputs(json, out);
		return 0;
	}
	if (strcmp(format, "prometheus") == 0) {
		for (size_t i = 0; i < cur.n; i++) {
			const char *type = strstr(cur.e[i].name, "_total") ? "counter" : "gauge";
			fprintf(out, "# TYPE colabfs_%s %s\ncolabfs_%s %" PRId64 "\n", cur.e[i].name,
				type, cur.e[i].name, cur.e[i].v);
		}
		return 0;
	}
	fprintf(out, "%-40s %16s%s\n", "", "value", prev ? "          per s" : "");
	for (size_t i = 0; i < cur.n; i++)
		if (!section_of(cur.e[i].name))
			table_row(out, &cur, i, prev ? &old : NULL, dt_s);
	for (size_t s = 0; s < sizeof(sections) / sizeof(sections[0]); s++) {
		int titled = 0;
		for (const char *const *r = sections[s].rows; *r; r++)
			for (size_t i = 0; i < cur.n; i++)
				if (strcmp(cur.e[i].name, *r) == 0) {
					if (!titled++)
						fprintf(out, "\n%s\n", sections[s].title);
					table_row(out, &cur, i, prev ? &old : NULL, dt_s);
				}
	}
	return 0;
}
