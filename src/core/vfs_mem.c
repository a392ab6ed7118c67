/* vfs_mem: the thread that watches memory for a cache in RAM and applies
 * the pressure policy (memwatch.h) to the store and the read-ahead.
 *
 * Every CFS_MEMWATCH_TICK_MS it reads MemAvailable and PSI (memory.h), steps
 * the policy with the store's used bytes, sets the store's effective budget,
 * evicts down to it when told, and pauses or resumes every kind of
 * read-ahead (the reader's, and the dataset scan's runs are rewound so the
 * files it had queued are handed out again later).  Nothing runs on the
 * read path: readers only see the store's limit and the reader's flag. */
#include "vfs_int.h"

#include "err.h"
#include "log.h"
#include "store.h"

static void *watcher(void *arg)
{
	struct cfs_vfs *v = arg;
	struct cfs_vfs_mem *m = &v->mem;
	int paused = 0, warned = 0;
	uint64_t limit = 0; /* what the store was last told (0: none) */
	pthread_mutex_lock(&m->lock);
	while (!m->stop) {
		struct cfs_mem_sample s;
		int rc = cfs_mem_sample(&s);
		if (rc && !warned) {
			CFS_WARN("memory watcher: cannot read memory facts: %s", cfs_strerror(rc));
			warned = 1;
		}
		if (!rc) {
			struct cfs_store_stats st;
			cfs_store_stats(v->store, &st);
			struct cfs_memwatch_act a;
			int64_t now = cfs_vfs_now_ms();
			int was = m->w.pressured;
			cfs_memwatch_step(&m->w, &s, st.used_bytes, now, &a);
			pthread_mutex_unlock(&m->lock);
			if (a.pause != paused) {
				cfs_reader_pause_readahead(v->reader, a.pause);
				if (a.pause)
					cfs_vfs_scan_rewind(v);
				paused = a.pause;
			}
			uint64_t want = a.limit < st.budget ? a.limit : 0;
			if (want != limit)
				cfs_store_set_limit(v->store, limit = want);
			uint64_t bytes = 0, blocks = 0;
			if (a.evict)
				cfs_store_evict_to(v->store, a.limit, &bytes, &blocks);
			if (!was && m->w.pressured)
				CFS_WARN("memory pressure: %llu MiB available, floor %llu MiB: "
					 "read-ahead stopped, cache limited to %llu MiB (%llu MiB freed)",
					 (unsigned long long)(s.avail >> 20),
					 (unsigned long long)(m->w.o.floor >> 20),
					 (unsigned long long)(a.limit >> 20),
					 (unsigned long long)(bytes >> 20));
			pthread_mutex_lock(&m->lock);
			if (was && !m->w.pressured)
				CFS_INFO("memory pressure over: %llu MiB available",
					 (unsigned long long)(s.avail >> 20));
			if (bytes)
				cfs_memwatch_freed(&m->w, bytes, now);
			m->evicted_bytes += bytes;
			m->evicted_blocks += blocks;
		}
		cfs_vfs_wait_ms(&m->cond, &m->lock, CFS_MEMWATCH_TICK_MS);
	}
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

int cfs_vfs_start_memwatch(struct cfs_vfs *v)
{
	struct cfs_vfs_mem *m = &v->mem;
	if (m->started || !v->mem_floor) /* 0: off, or the cache folder is not in RAM */
		return 0;
	uint32_t bs = cfs_store_block_size(v->store);
	struct cfs_memwatch_opts o = { .budget = cfs_store_budget(v->store),
				       .floor = v->mem_floor,
				       .min_limit = 16ull * bs,
				       .hold_ms = v->mem_hold_ms };
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	m->ready = 1;
	cfs_memwatch_init(&m->w, &o);
	if (pthread_create(&m->thread, NULL, watcher, v) != 0)
		return -EAGAIN;
	m->started = 1;
	CFS_INFO("memory watcher on: keeps %llu MiB of RAM free (--min-free-memory)",
		 (unsigned long long)(v->mem_floor >> 20));
	return 0;
}

void cfs_vfs_memwatch_stop(struct cfs_vfs *v)
{
	struct cfs_vfs_mem *m = &v->mem;
	if (!m->ready)
		return;
	if (m->started) {
		pthread_mutex_lock(&m->lock);
		m->stop = 1;
		pthread_cond_signal(&m->cond);
		pthread_mutex_unlock(&m->lock);
		pthread_join(m->thread, NULL);
		m->started = 0;
	}
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
	m->ready = 0;
}

void cfs_vfs_mem_stats(struct cfs_vfs *v, struct cfs_vfs_mem_stats *out)
{
	struct cfs_vfs_mem *m = &v->mem;
	memset(out, 0, sizeof(*out));
	if (!m->ready)
		return;
	pthread_mutex_lock(&m->lock);
	out->watching = (uint64_t)m->started;
	out->floor = m->w.o.floor;
	out->avail = m->w.avail;
	out->pressure = (uint64_t)m->w.pressured;
	out->readahead_paused = (uint64_t)m->w.paused;
	out->under_ms = m->w.under_ms;
	out->episodes = m->w.episodes;
	out->evicted_bytes = m->evicted_bytes;
	out->evicted_blocks = m->evicted_blocks;
	pthread_mutex_unlock(&m->lock);
}
