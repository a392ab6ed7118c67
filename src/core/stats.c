/* stats: gathering the numbers in the daemon (see stats.h; statsfmt.c
 * renders them). */
#include "stats.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "clock.h"
#include "drive.h"
#include "err.h"
#include "reader.h"
#include "store.h"
#include "tiered.h"
#include "vfs.h"

struct field {
	const char *name;
	uint64_t v;
};

static const char *const fuse_op_names[CFS_FOP_COUNT] = {
	[CFS_FOP_LOOKUP] = "lookup", [CFS_FOP_GETATTR] = "getattr",
	[CFS_FOP_SETATTR] = "setattr", [CFS_FOP_OPEN] = "open", [CFS_FOP_READ] = "read",
	[CFS_FOP_WRITE] = "write", [CFS_FOP_FLUSH] = "flush", [CFS_FOP_RELEASE] = "release",
	[CFS_FOP_FSYNC] = "fsync", [CFS_FOP_CREATE] = "create", [CFS_FOP_OPENDIR] = "opendir",
	[CFS_FOP_READDIR] = "readdir", [CFS_FOP_READDIRPLUS] = "readdirplus",
	[CFS_FOP_RELEASEDIR] = "releasedir", [CFS_FOP_FORGET] = "forget",
	[CFS_FOP_GETXATTR] = "getxattr", [CFS_FOP_STATFS] = "statfs",
	[CFS_FOP_INTERRUPT] = "interrupt", [CFS_FOP_IOCTL] = "ioctl", [CFS_FOP_OTHER] = "other",
};

int cfs_stats_json(const struct cfs_stats_src *s, struct cfs_buf *out)
{
	struct cfs_drive_stats d = { 0 };
	struct cfs_store_stats c = { 0 };
	struct cfs_reader_stats r = { 0 };
	int64_t now = cfs_clock_mono_ms();
	if (s->drive)
		cfs_drive_stats(s->drive, &d);
	if (s->store)
		cfs_store_stats(s->store, &c);
	if (s->reader)
		cfs_reader_stats(s->reader, &r);
	struct cfs_tiered_stats ts = { 0 };
	if (s->tiered)
		cfs_tiered_stats(s->tiered, &ts);
	uint64_t checked = 0, mismatched = 0, polls = 0, changes = 0;
	struct cfs_vfs_scan_stats sc = { 0 };
	struct cfs_vfs_mem_stats mem = { 0 };
	struct cfs_vfs_write_stats ws = { 0 };
	if (s->vfs) {
		cfs_vfs_mem_stats(s->vfs, &mem);
		cfs_vfs_write_stats(s->vfs, &ws);
		cfs_vfs_counters(s->vfs, &checked, &mismatched);
		cfs_vfs_poll_stats(s->vfs, &polls, &changes);
		cfs_vfs_scan_stats(s->vfs, &sc);
	}
	struct cfs_stats_recovery rec = { 0 };
	const struct cfs_stats_recovery *sr = s->recovery;
	if (sr) {
		rec.mode = __atomic_load_n(&sr->mode, __ATOMIC_RELAXED);
		rec.restarts = __atomic_load_n(&sr->restarts, __ATOMIC_RELAXED);
		rec.resends = __atomic_load_n(&sr->resends, __ATOMIC_RELAXED);
		rec.resent = __atomic_load_n(&sr->resent, __ATOMIC_RELAXED);
		rec.replayed = __atomic_load_n(&sr->replayed, __ATOMIC_RELAXED);
		rec.poisoned = __atomic_load_n(&sr->poisoned, __ATOMIC_RELAXED);
		rec.requests = __atomic_load_n(&sr->requests, __ATOMIC_RELAXED);
		rec.journalled = __atomic_load_n(&sr->journalled, __ATOMIC_RELAXED);
		rec.mounted_ms = __atomic_load_n(&sr->mounted_ms, __ATOMIC_RELAXED);
		for (size_t i = 0; i < CFS_FOP_COUNT; i++)
			rec.by_op[i] = __atomic_load_n(&sr->by_op[i], __ATOMIC_RELAXED);
	}
	struct cfs_stats_loop lp = { 0 };
	if (s->loop) {
		lp.served_inline = __atomic_load_n(&s->loop->served_inline, __ATOMIC_RELAXED);
		lp.handoffs = __atomic_load_n(&s->loop->handoffs, __ATOMIC_RELAXED);
		lp.rescues = __atomic_load_n(&s->loop->rescues, __ATOMIC_RELAXED);
		lp.workers = __atomic_load_n(&s->loop->workers, __ATOMIC_RELAXED);
	}
	int64_t since = sr && rec.mounted_ms ? rec.mounted_ms : s->started_ms;
	const struct field f[] = {
		{ "uptime_seconds", (uint64_t)((now - since) / 1000) },
		{ "server_pid", (uint64_t)getpid() },
		{ "recovery_mode", rec.mode },
		{ "server_restarts_total", rec.restarts },
		{ "recovery_resends_total", rec.resends },
		{ "requests_resent_total", rec.resent },
		{ "requests_replayed_total", rec.replayed },
		{ "requests_journalled_total", rec.journalled },
		{ "fuse_requests_total", rec.requests },
		{ "requests_failed_crash_loop_total", rec.poisoned },
		{ "fuse_workers", lp.workers },
		{ "fuse_served_by_reader_total", lp.served_inline },
		{ "fuse_handoffs_total", lp.handoffs },
		{ "fuse_rescues_total", lp.rescues },
		{ "cache_hits_total", r.hits },
		{ "cache_misses_total", r.misses },
		{ "bytes_from_cache_total", r.bytes_cache },
		{ "bytes_from_drive_total", r.bytes_drive },
		{ "reads_bytes_total", s->vfs ? cfs_vfs_read_bytes(s->vfs) : 0 },
		{ "cache_used_bytes", c.used_bytes },
		{ "cache_budget_bytes", c.budget },
		{ "cache_effective_budget_bytes", c.effective },
		{ "memory_watch", mem.watching },
		{ "memory_floor_bytes", mem.floor },
		{ "memory_available_bytes", mem.avail },
		{ "memory_pressure", mem.pressure },
		{ "memory_pressure_ms_total", mem.under_ms },
		{ "memory_pressure_episodes_total", mem.episodes },
		{ "memory_pressure_evicted_bytes_total", mem.evicted_bytes },
		{ "memory_pressure_evicted_blocks_total", mem.evicted_blocks },
		{ "readahead_paused", mem.readahead_paused },
		{ "readahead_pauses_total", r.ra_pauses },
		{ "cache_blocks", c.blocks },
		{ "cache_files", c.keys },
		{ "cache_evictions_total", c.evictions },
		{ "cache_evicted_bytes_total", c.evicted_bytes },
		{ "cache_retired_blocks_total", c.retired },
		{ "cache_checksum_failures_total", c.crc_failures },
		{ "cache_index_resets_total", c.index_resets },
		{ "cache_full_retries_total", c.enospc_retries },
		{ "cache_blocks_access_counted", c.counted_blocks },
		{ "cache_access_counts_total", c.counted_hits },
		{ "files_checksum_verified_total", checked },
		{ "files_checksum_mismatches_total", mismatched },
		{ "blocks_served_uncached_total", r.uncached },
		{ "downloads_total", r.downloads },
		{ "download_requests_total", r.requests },
		{ "blocks_prefetched_total", r.prefetched },
		{ "prefetch_queued_bytes", r.queued_bytes },
		{ "downloads_joined_total", r.joined },
		{ "downloads_in_flight", r.inflight },
		{ "dataset_scans_total", sc.scans },
		{ "dataset_scans_running", sc.running },
		{ "dataset_prefetched_files_total", sc.files },
		{ "dataset_prefetched_bytes_total", sc.bytes },
		{ "dataset_used_bytes_total", sc.used },
		{ "dataset_wasted_bytes_total", sc.wasted },
		{ "dataset_ahead_bytes", sc.ahead },
		{ "listing_order_prefetched_files_total", sc.order_files },
		{ "scan_requests_total", r.scan_jobs },
		{ "scan_requests_queued", r.scan_queued },
		{ "order_hints_total", sc.hints },
		{ "order_hints_dropped_total", sc.hints_dropped },
		{ "order_hint_files_total", sc.hint_files },
		{ "order_hint_bytes_total", sc.hint_bytes },
		{ "order_hint_used_bytes_total", sc.hint_used },
		{ "order_hint_wasted_bytes_total", sc.hint_wasted },
		{ "order_hint_ahead_bytes", sc.hint_ahead },
		{ "order_hint_window_bytes", sc.hint_window },
		{ "order_hint_files_left", sc.hint_files_left },
		{ "change_polls_total", polls },
		{ "changes_applied_total", changes },
		{ "drive_requests_total", d.requests },
		{ "drive_retries_total", d.retries },
		{ "drive_connections_total", d.connects },
		{ "drive_resumed_downloads_total", d.resumed },
		{ "drive_paced_calls_total", d.paced },
		{ "api_rate", (uint64_t)(d.api_rate + 0.5) },
		{ "api_rate_in_units", (uint64_t)d.api_units },
		{ "api_burst", (uint64_t)(d.api_burst + 0.5) },
		{ "drive_quota_units_total", d.units },
		{ "rate_limited_total", d.rate_limited },
		{ "api_rate_decreases_total", d.rate_cuts },
		{ "stalls_total", d.stalls },
		{ "hedges_total", d.hedges },
		{ "hedge_wins_total", d.hedge_wins },
		{ "uploads_pending", ws.pending },
		{ "uploads_in_flight", ws.in_flight },
		{ "uploads_pending_bytes", ws.pending_bytes },
		{ "uploads_bytes_left", ws.bytes_left },
		{ "uploads_failed", ws.failed },
		{ "uploads_last_error", ws.last_error > -4096 && ws.last_error < 0
						? (uint64_t)-ws.last_error : ws.last_error ? EIO : 0 },
		{ "uploads_done_total", ws.done },
		{ "uploads_bytes_total", ws.bytes },
		{ "uploads_retries_total", ws.retries },
		{ "uploads_conflicts_total", ws.conflicts },
		{ "uploads_open_total", ws.snapshots },
		{ "uploads_open_bytes_total", ws.snapshot_bytes },
		{ "writes_bytes_total", ws.writes_bytes },
		{ "staging_bytes", ws.staging_bytes },
		{ "uploads_total", d.uploads },
		{ "upload_bytes_total", d.upload_bytes },
		{ "upload_retries_total", d.upload_retries },
		{ "create_rate_limited_total", d.create_limited },
		{ "ttfb_p95_ms", d.ttfb_p95_us > 0 ? (uint64_t)d.ttfb_p95_us / 1000 : 0 },
		{ "body_pause_p95_ms", d.pause_p95_us > 0 ? (uint64_t)d.pause_p95_us / 1000 : 0 },
		{ "drive_errors_total", d.errors },
		{ "drive_errors_network_total", d.err_net },
		{ "drive_errors_server_total", d.err_server },
		{ "drive_errors_rate_limit_total", d.err_rate },
		{ "drive_errors_malformed_total", d.err_proto },
		{ "drive_errors_auth_total", d.err_auth },
		{ "drive_errors_quota_total", d.err_quota },
		{ "drive_errors_not_found_total", d.err_notfound },
		{ "drive_errors_permission_total", d.err_access },
		{ "drive_media_bytes_total", d.bytes_media },
		{ "drive_json_bytes_total", d.bytes_json },
		{ "tier_up", ts.up },
		{ "tier_nodes", ts.nodes },
		{ "tier_hits_total", ts.hits },
		{ "tier_misses_total", ts.misses },
		{ "tier_bytes_read_total", ts.bytes_read },
		{ "tier_bytes_written_total", ts.bytes_written },
		{ "tier_published_total", ts.published },
		{ "tier_lease_waits_total", ts.lease_waits },
		{ "tier_lease_wait_hits_total", ts.lease_wait_hits },
		{ "tier_lease_timeouts_total", ts.lease_timeouts },
		{ "tier_corrupt_total", ts.corrupt },
		{ "tier_forged_total", ts.forged },
		{ "tier_dropped_total", ts.dropped },
		{ "tier_errors_total", ts.errors },
		{ "tier_bypassed_total", ts.bypassed },
		{ "tier_redirects_total", ts.redirects },
		{ "tier_redirects_refused_total", ts.redirects_refused },
		{ "tier_map_refreshes_total", ts.refreshes },
		{ "tier_replica_reads_total", ts.replica_reads },
	};
	int rc = cfs_buf_append(out, "{", 1);
	for (size_t i = 0; !rc && i < sizeof(f) / sizeof(f[0]); i++) {
		char line[128];
		int n = snprintf(line, sizeof(line), "%s\"%s\":%" PRIu64, i ? "," : "", f[i].name,
				 f[i].v);
		rc = cfs_buf_append(out, line, (size_t)n);
	}
	for (size_t i = 0; !rc && i < CFS_FOP_COUNT; i++) {
		char line[128];
		int n = snprintf(line, sizeof(line), ",\"fuse_requests_%s_total\":%" PRIu64,
				 fuse_op_names[i], rec.by_op[i]);
		rc = cfs_buf_append(out, line, (size_t)n);
	}
	if (!rc)
		rc = cfs_buf_append(out, "}\n", 2);
	return rc;
}

void cfs_stats_sample(const struct cfs_stats_src *s, struct cfs_hist_sample *out)
{
	struct cfs_drive_stats d = { 0 };
	struct cfs_reader_stats r = { 0 };
	struct cfs_vfs_write_stats ws = { 0 };
	if (s->drive)
		cfs_drive_stats(s->drive, &d);
	if (s->reader)
		cfs_reader_stats(s->reader, &r);
	if (s->vfs)
		cfs_vfs_write_stats(s->vfs, &ws);
	*out = (struct cfs_hist_sample){
		.read_bytes = s->vfs ? cfs_vfs_read_bytes(s->vfs) : 0,
		.drive_bytes = d.bytes_media,
		.drive_requests = d.requests,
		.api_rate_milli = d.api_rate > 0 ? (uint64_t)(d.api_rate * 1000 + 0.5) : 0,
		.cache_hits = r.hits,
		.cache_misses = r.misses,
		.uploads_pending = ws.pending,
		.upload_bytes = d.upload_bytes,
		.upload_bytes_left = ws.bytes_left,
	};
}
