/* reader: cached reads, download workers and prefetch (see reader.h for the
 * policy and the seam: every download goes through r->fetch, every reading
 * of the clock through r->now_ms). */
#include "reader.h"
#include "clock.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "drive.h"
#include "err.h"
#include "json.h"
#include "log.h"
#include "names.h"
#include "store.h"
#include "hash.h"

#define KEY_MAX 256
#define SPARES 8
#define BUCKETS 1024
#define WIN_MIN 4
#define RESERVED_WORKERS 1 /* never used by prefetch jobs: readers' misses go first */
#define SPLIT_MIN 4   /* a job starting while workers are idle is shared out, not below this */
#define SEQ_REQUEST (64u << 20) /* request size a sequential stream grows to (at least) */
#define WIN_GROWTH 4  /* window factor per sequential read */
#define SCAN_WORKERS 48 /* connections for dataset read-ahead (enough for 200/s at 240 ms) */
#define SCAN_QUEUE 256  /* scan jobs queued, at most */
#define FAILS 64
#define FAIL_MS 60000 /* how long a permanent refusal is believed without asking again */

struct job;

/* One block being downloaded, shared by every reader that wants it. */
struct flight {
	struct flight *next;
	char key[KEY_MAX];
	uint64_t block;
	int done, rc;
	char *data;        /* a copy of the block for waiters (or if not stored) */
	size_t len;
	int refs;          /* the job's + each waiter's */
	int waiters;
	struct job *job;   /* NULL once the job has ended */
};

/* A range request covering n consecutive blocks. */
struct job {
	struct job *next;
	struct cfs_reader *r;
	char id[CFS_ID_MAX], rev[CFS_ID_MAX], key[KEY_MAX];
	int64_t size;
	uint64_t first;
	uint32_t n, published; /* n shrinks (under lock) when the job is split */
	uint32_t seen_n;   /* the worker's copy of n, taken under lock at each block */
	uint32_t asked;    /* n when it started: the blocks its request asks for */
	int urgent, started;
	int scan;          /* a dataset scan's job (scan queue; its own workers) */
	struct job *rnext; /* running list */
	uint64_t bytes;
	char *blk;         /* the block being filled: a job needs one block of memory */
	size_t fill;
	struct flight **fl;
};

struct queue {
	struct job *head, *tail;
	int len;
};

/* A block the store could not keep, remembered for the next reads. */
struct spare {
	char key[KEY_MAX];
	uint64_t block;
	char *data;
	size_t len;
	uint64_t used;
};

/* A file Drive refused for good (quota, no permission, not downloadable):
 * reads fail at once and prefetch leaves it alone for a while. */
struct fail {
	char key[KEY_MAX];
	int rc;
	int64_t until_ms;
};

struct cfs_reader_stream {
	int64_t next;     /* where the last read ended */
	uint32_t window;  /* blocks to keep fetched ahead; 0: random */
	uint64_t ahead;   /* prefetch issued up to this block */
	int reads;
};

struct cfs_reader {
	cfs_reader_fetch_fn fetch;  /* the seam (reader.h) */
	void *fetch_io;             /* fetch's argument: opts.io, or the Drive client */
	void (*cancel)(void *io);
	void (*forget)(void *io, const char *id, const char *rev, int64_t size);
	int64_t (*now_ms)(void *io);
	void (*missed)(void *io, const char *key, uint64_t block);
	void *io;                   /* opts.io */
	struct cfs_store *store;
	uint32_t bs, max_blocks;
	uint32_t seq_blocks;  /* largest request of a sequential stream */
	uint64_t prefetch_budget;
	uint32_t win_max;     /* largest read-ahead window, in blocks */
	int workers;
	pthread_mutex_t lock;
	pthread_cond_t done;  /* a flight finished */
	pthread_cond_t work;  /* a job was queued, or stop */
	struct flight *flights[BUCKETS];
	struct queue urgent, bg, scanq;
	int running_bg, stop;
	int ra_paused;        /* memory pressure: no read-ahead of any kind */
	int running_scan, scan_workers;
	int idle;             /* workers waiting for work */
	struct job *running;  /* jobs being downloaded (rnext) */
	pthread_t *threads;
	int nthreads;
	struct spare spares[SPARES];
	uint64_t clock;
	struct fail fails[FAILS];
	struct cfs_reader_stats st; /* under lock */
};

static uint64_t nblocks(const struct cfs_reader *r, int64_t size)
{
	return size <= 0 ? 0 : ((uint64_t)size + r->bs - 1) / r->bs;
}

static size_t block_len(const struct cfs_reader *r, int64_t size, uint64_t b)
{
	int64_t start = (int64_t)b * r->bs;
	return (size_t)(size - start < (int64_t)r->bs ? size - start : (int64_t)r->bs);
}

/* ---- flights (lock held) ----------------------------------------------- */

static struct flight **bucket(struct cfs_reader *r, const char *key, uint64_t b)
{
	return &r->flights[(cfs_hash_fnv1a(key) ^ (b * 0x9e3779b97f4a7c15ULL)) % BUCKETS];
}

static struct flight *flight_find(struct cfs_reader *r, const char *key, uint64_t b)
{
	for (struct flight *f = *bucket(r, key, b); f; f = f->next)
		if (f->block == b && strcmp(f->key, key) == 0)
			return f;
	return NULL;
}

static void flight_put(struct cfs_reader *r, struct flight *f)
{
	if (--f->refs)
		return;
	for (struct flight **p = bucket(r, f->key, f->block); *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			break;
		}
	}
	free(f->data);
	free(f);
}

/* ---- spares (lock held) ------------------------------------------------- */

static int spare_get(struct cfs_reader *r, const char *key, uint64_t b, uint32_t boff,
		     uint32_t blen, char *dst)
{
	for (int i = 0; i < SPARES; i++) {
		struct spare *s = &r->spares[i];
		if (s->data && s->block == b && boff + blen <= s->len && strcmp(s->key, key) == 0) {
			memcpy(dst, s->data + boff, blen);
			s->used = ++r->clock;
			return 1;
		}
	}
	return 0;
}

static void spare_put(struct cfs_reader *r, const char *key, uint64_t b, const char *data,
		      size_t len)
{
	struct spare *v = &r->spares[0];
	for (int i = 1; i < SPARES; i++)
		if (r->spares[i].used < v->used)
			v = &r->spares[i];
	char *copy = malloc(len ? len : 1);
	if (!copy)
		return;
	memcpy(copy, data, len);
	free(v->data);
	snprintf(v->key, sizeof(v->key), "%s", key);
	v->block = b;
	v->data = copy;
	v->len = len;
	v->used = ++r->clock;
}

/* ---- permanent failures (lock held) -------------------------------------- */

static int64_t mono_ms(void *io)
{
	(void)io;
	return cfs_clock_mono_ms();
}

static int permanent(int rc)
{
	return rc == CFS_E_QUOTA || rc == CFS_E_NOTDL || rc == -EACCES || rc == CFS_E_TLS;
}

static int fail_get(struct cfs_reader *r, const char *key)
{
	int64_t now = r->now_ms(r->io);
	for (int i = 0; i < FAILS; i++)
		if (r->fails[i].until_ms > now && strcmp(r->fails[i].key, key) == 0)
			return r->fails[i].rc;
	return 0;
}

static void fail_put(struct cfs_reader *r, const char *key, int rc)
{
	struct fail *v = &r->fails[0];
	for (int i = 1; i < FAILS; i++)
		if (r->fails[i].until_ms < v->until_ms)
			v = &r->fails[i];
	snprintf(v->key, sizeof(v->key), "%s", key);
	v->rc = rc;
	v->until_ms = r->now_ms(r->io) + FAIL_MS;
}

/* ---- jobs ------------------------------------------------------------------ */

static void push(struct queue *q, struct job *j)
{
	j->next = NULL;
	if (q->tail)
		q->tail->next = j;
	else
		q->head = j;
	q->tail = j;
	q->len++;
}

static void push_front(struct queue *q, struct job *j)
{
	j->next = q->head;
	q->head = j;
	if (!q->tail)
		q->tail = j;
	q->len++;
}

static struct job *pop(struct queue *q)
{
	struct job *j = q->head;
	if (j) {
		q->head = j->next;
		if (!q->head)
			q->tail = NULL;
		q->len--;
	}
	return j;
}

static void unqueue(struct queue *q, struct job *j)
{
	struct job *prev = NULL;
	for (struct job *x = q->head; x; prev = x, x = x->next) {
		if (x == j) {
			if (prev)
				prev->next = j->next;
			else
				q->head = j->next;
			if (q->tail == j)
				q->tail = prev;
			q->len--;
			return;
		}
	}
}

static int ensure_workers(struct cfs_reader *r);

/* lock held.  A job for the run of blocks from first that are neither cached
 * (first itself is not checked) nor in flight, at most maxn long.  NULL if
 * there is nothing to do or no memory. */
enum { CLS_URGENT, CLS_BG, CLS_SCAN };

static struct job *job_make(struct cfs_reader *r, const struct cfs_reader_file *f,
			    uint64_t first, uint32_t maxn, int cls)
{
	int urgent = cls == CLS_URGENT;
	uint64_t total = nblocks(r, f->size);
	uint32_t n = 0;
	if (ensure_workers(r))
		return NULL;
	while (n < maxn && first + n < total && !flight_find(r, f->key, first + n) &&
	       (n == 0 || !cfs_store_has(r->store, f->key, first + n)))
		n++;
	if (!n)
		return NULL;
	struct job *j = calloc(1, sizeof(*j));
	struct flight **fl = calloc(n, sizeof(*fl));
	if (!j || !fl) {
		free(j);
		free(fl);
		return NULL;
	}
	j->r = r;
	snprintf(j->id, sizeof(j->id), "%s", f->id);
	snprintf(j->rev, sizeof(j->rev), "%s", f->rev ? f->rev : "");
	snprintf(j->key, sizeof(j->key), "%s", f->key);
	j->size = f->size;
	j->first = first;
	j->fl = fl;
	j->urgent = urgent;
	j->scan = cls == CLS_SCAN;
	for (uint32_t i = 0; i < n; i++) {
		struct flight *x = calloc(1, sizeof(*x));
		if (!x)
			break;
		snprintf(x->key, sizeof(x->key), "%s", f->key);
		x->block = first + i;
		x->refs = 1;
		x->job = j;
		struct flight **b = bucket(r, x->key, x->block);
		x->next = *b;
		*b = x;
		fl[i] = x;
		j->n++;
		j->bytes += block_len(r, f->size, first + i);
	}
	if (!j->n) {
		free(fl);
		free(j);
		return NULL;
	}
	r->st.inflight += j->n;
	r->st.requests++;
	if (!urgent)
		r->st.prefetched += j->n;
	if (cls == CLS_BG)
		r->st.queued_bytes += j->bytes;
	if (cls == CLS_SCAN)
		r->st.scan_jobs++;
	push(cls == CLS_URGENT ? &r->urgent : cls == CLS_SCAN ? &r->scanq : &r->bg, j);
	pthread_cond_signal(&r->work);
	return j;
}

/* lock held: a reader waits on a queued prefetch job, so it goes first now. */
static void promote(struct cfs_reader *r, struct job *j)
{
	if (j->urgent || j->started)
		return;
	if (j->scan) {
		unqueue(&r->scanq, j);
		j->scan = 0;
	} else {
		unqueue(&r->bg, j);
		r->st.queued_bytes -= j->bytes;
	}
	j->urgent = 1;
	push(&r->urgent, j);
	pthread_cond_signal(&r->work);
}

/* lock held.  Moves blocks [at, n) of j (at > 0) into a new job, not started,
 * which the caller queues; the bytes move with them, so the prefetch
 * accounting is unchanged.  NULL (and j unchanged) without memory. */
static struct job *job_split(struct cfs_reader *r, struct job *j, uint32_t at)
{
	uint32_t k = j->n - at;
	struct job *x = calloc(1, sizeof(*x));
	struct flight **fl = calloc(k, sizeof(*fl));
	if (!x || !fl) {
		free(x);
		free(fl);
		return NULL;
	}
	x->r = r;
	memcpy(x->id, j->id, sizeof(x->id));
	memcpy(x->rev, j->rev, sizeof(x->rev));
	memcpy(x->key, j->key, sizeof(x->key));
	x->size = j->size;
	x->first = j->first + at;
	x->n = k;
	x->urgent = j->urgent;
	x->scan = j->scan;
	x->fl = fl;
	for (uint32_t i = 0; i < k; i++) {
		fl[i] = j->fl[at + i];
		j->fl[at + i] = NULL;
		if (fl[i])
			fl[i]->job = x;
		uint64_t len = block_len(r, j->size, x->first + i);
		x->bytes += len;
		j->bytes -= len;
	}
	j->n = at;
	r->st.requests++;
	return x;
}

/* lock held: may a prefetch job start now?  Prefetch leaves a worker free
 * for readers' misses.  (Cutting a running prefetch for a miss instead was
 * tried: ending a transfer early throws away the bytes in transit, and the
 * rest of its range is asked for again, so blocks were downloaded twice.) */
static int bg_may_start(const struct cfs_reader *r, const struct job *j)
{
	(void)j;
	return r->running_bg < r->workers - RESERVED_WORKERS;
}

/* lock held: block i of the job is final (rc 0, its bytes in data) or failed. */
static void finish_block(struct cfs_reader *r, struct job *j, uint32_t i, int rc, int stored,
			 const char *data)
{
	struct flight *f = j->fl[i];
	if (!f)
		return;
	size_t len = block_len(r, j->size, j->first + i);
	if (!rc && (f->waiters || !stored)) {
		f->data = malloc(len ? len : 1);
		if (f->data)
			memcpy(f->data, data, len);
		else
			rc = -ENOMEM;
	}
	if (!rc && !stored)
		spare_put(r, j->key, j->first + i, data, len);
	f->rc = rc;
	f->len = rc ? 0 : len;
	f->done = 1;
	f->job = NULL;
	r->st.inflight--;
	if (!rc)
		r->st.downloads++;
	if (!rc && !stored)
		r->st.uncached++;
	pthread_cond_broadcast(&r->done);
	flight_put(r, f);
	j->fl[i] = NULL;
}

/* Stores and publishes the job's current block (complete in j->blk).
 * Returns 1 if the job has more blocks to receive, 0 if it is complete, 2 if
 * it was cut short (fewer blocks than it asked for): the transfer should end
 * now. */
static int publish(struct job *j)
{
	struct cfs_reader *r = j->r;
	uint32_t i = j->published;
	size_t len = block_len(r, j->size, j->first + i);
	int src = cfs_store_put(r->store, j->key, j->first + i, j->blk, (uint32_t)len);
	if (src)
		CFS_DEBUG("block %s#%llu not cached (%s); serving it uncached", j->key,
			  (unsigned long long)(j->first + i), strerror(-src));
	pthread_mutex_lock(&r->lock);
	finish_block(r, j, i, 0, src == 0, j->blk);
	j->published++;
	j->fill = 0;
	int ret = j->published < j->n ? 1 : j->n < j->asked ? 2 : 0;
	j->seen_n = j->n;
	pthread_mutex_unlock(&r->lock);
	return ret;
}

/* Bytes of the range as they arrive: fill the current block, publish it
 * when complete.  Bytes a retry sends again are skipped. */
static int on_bytes(void *arg, int64_t at, const char *p, size_t n)
{
	struct job *j = arg;
	struct cfs_reader *r = j->r;
	while (n) {
		if (j->published >= j->seen_n) /* cut short: stop; else more than we asked for */
			return j->seen_n < j->asked ? 1 : -1;
		int64_t want = (int64_t)(j->first + j->published) * r->bs + (int64_t)j->fill;
		if (at < want) {
			size_t skip = (size_t)(want - at) < n ? (size_t)(want - at) : n;
			p += skip;
			n -= skip;
			at += (int64_t)skip;
			continue;
		}
		if (at > want)
			return -1; /* a gap: never serve a block with a hole */
		size_t blen = block_len(r, j->size, j->first + j->published);
		if (cfs_buf_fill_block(j->blk, &j->fill, blen, &p, &n, &at) && publish(j) == 2)
			return 1; /* cut short: end the transfer, successfully */
	}
	return 0;
}

static void run_job(struct job *j)
{
	struct cfs_reader *r = j->r;
	size_t len = 0;
	for (uint32_t i = 0; i < j->asked; i++) /* the job as it started; it may be cut */
		len += block_len(r, j->size, j->first + i);
	size_t got = 0;
	j->blk = malloc(r->bs);
	int rc = j->blk ? r->fetch(r->fetch_io, j->id, j->rev[0] ? j->rev : NULL, j->size,
				   (int64_t)j->first * r->bs, len, on_bytes, j, &got,
				   j->urgent ? CFS_PACE_URGENT : CFS_PACE_BACKGROUND)
			: -ENOMEM;
	pthread_mutex_lock(&r->lock);
	if (!rc && j->published < j->n) /* 416: the file is shorter than its listing said */
		rc = -ESTALE;
	if (permanent(rc))
		fail_put(r, j->key, rc);
	for (uint32_t i = j->published; i < j->n; i++)
		finish_block(r, j, i, rc ? rc : -EIO, 0, NULL);
	pthread_mutex_unlock(&r->lock);
	free(j->blk);
	j->blk = NULL;
}

/* lock held: j was just taken from q by a worker.  Its share of the work
 * outstanding (j, the rest of q, and the blocks running jobs have still to
 * receive) is that divided by the workers; a longer j keeps its share (at
 * least SPLIT_MIN blocks) and puts the rest back at the front of q, where the
 * next worker splits it again.  So a stream's large requests spread over
 * every worker while it ramps up and near the end of a file, where equal
 * shares finish together; with a deep queue (a long stream) jobs stay whole.
 * No request is ever cut. */
static void share_out(struct cfs_reader *r, struct queue *q, struct job *j)
{
	if (j->n < 2 * SPLIT_MIN)
		return;
	uint64_t work = j->n;
	for (struct job *x = q->head; x; x = x->next)
		work += x->n;
	for (struct job *x = r->running; x; x = x->rnext)
		work += x->n - x->published;
	uint64_t keep = (work + (uint64_t)r->workers - 1) / (uint64_t)r->workers;
	if (keep < SPLIT_MIN)
		keep = SPLIT_MIN;
	if (keep >= j->n)
		return;
	struct job *x = job_split(r, j, (uint32_t)keep);
	if (x) {
		push_front(q, x);
		pthread_cond_signal(&r->work);
	}
}

static void running_del(struct cfs_reader *r, struct job *j)
{
	for (struct job **p = &r->running; *p; p = &(*p)->rnext) {
		if (*p == j) {
			*p = j->rnext;
			return;
		}
	}
}

static void *worker(void *arg)
{
	struct cfs_reader *r = arg;
	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct job *j = pop(&r->urgent);
		if (j)
			share_out(r, &r->urgent, j);
		if (!j && r->bg.head && bg_may_start(r, r->bg.head) && (j = pop(&r->bg)))
			share_out(r, &r->bg, j);
		if (!j && r->running_scan < r->scan_workers)
			j = pop(&r->scanq);
		if (!j) {
			r->idle++;
			pthread_cond_wait(&r->work, &r->lock);
			r->idle--;
			continue;
		}
		if (j->scan)
			r->running_scan++;
		else if (!j->urgent)
			r->running_bg++;
		j->started = 1;
		j->seen_n = j->asked = j->n;
		j->rnext = r->running;
		r->running = j;
		pthread_mutex_unlock(&r->lock);
		run_job(j);
		pthread_mutex_lock(&r->lock);
		running_del(r, j);
		if (j->scan) {
			r->running_scan--;
		} else if (!j->urgent) {
			r->running_bg--;
			r->st.queued_bytes -= j->bytes;
		}
		pthread_cond_signal(&r->work);
		free(j->fl);
		free(j);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

/* ---- setup ------------------------------------------------------------------ */

/* The real download (opts.fetch NULL): io is the Drive client. */
int cfs_reader_drive_fetch(void *io, const char *id, const char *rev, int64_t size, int64_t off,
			   size_t len, cfs_drive_sink_fn sink, void *arg, size_t *got, int prio)
{
	return cfs_drive_read_sink(io, id, rev, size, off, len, sink, arg, got, prio);
}

int cfs_reader_new(struct cfs_drive *d, struct cfs_store *s, const struct cfs_reader_opts *o,
		   struct cfs_reader **out)
{
	struct cfs_reader *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->fetch = o && o->fetch ? o->fetch : cfs_reader_drive_fetch;
	r->fetch_io = o && o->fetch ? o->io : d;
	r->io = o ? o->io : NULL;
	r->cancel = o ? o->cancel : NULL;
	r->forget = o ? o->forget : NULL;
	r->now_ms = o && o->now_ms ? o->now_ms : mono_ms;
	r->missed = o ? o->missed : NULL;
	r->store = s;
	r->bs = cfs_store_block_size(s);
	/* `workers` connections for read-ahead, and one more kept for readers'
	 * own misses, so a miss never waits behind a 64 MiB prefetch */
	r->workers = (o && o->workers > 0 ? o->workers : 16) + RESERVED_WORKERS;
	r->scan_workers = o && o->scan_workers > 0 ? o->scan_workers : SCAN_WORKERS;
	uint64_t maxreq = o && o->max_request ? o->max_request : 16u << 20;
	r->max_blocks = maxreq / r->bs ? (uint32_t)(maxreq / r->bs) : 1;
	r->seq_blocks = SEQ_REQUEST / r->bs > r->max_blocks ? SEQ_REQUEST / r->bs : r->max_blocks;
	/* enough read-ahead to keep every worker on a full-size request, two
	 * rounds deep (the reader itself follows the first request of a round),
	 * but no more than a quarter of the cache */
	r->win_max = 2u * (uint32_t)(r->workers - RESERVED_WORKERS) * r->seq_blocks;
	uint64_t cap = cfs_store_budget(s) / r->bs / 4;
	if (cap && r->win_max > cap)
		r->win_max = (uint32_t)cap;
	if (r->win_max < 64)
		r->win_max = 64;
	r->prefetch_budget = o && o->prefetch_budget ? o->prefetch_budget
						    : (uint64_t)r->win_max * r->bs;
	pthread_mutex_init(&r->lock, NULL);
	pthread_cond_init(&r->done, NULL);
	pthread_cond_init(&r->work, NULL);
	r->threads = calloc((size_t)(r->workers + r->scan_workers), sizeof(*r->threads));
	if (!r->threads) {
		cfs_reader_free(r);
		return -ENOMEM;
	}
	*out = r;
	return 0;
}

/* lock held.  Workers start with the first job, so a reader made before the
 * daemon forks has no threads to lose in the fork. */
static int ensure_workers(struct cfs_reader *r)
{
	for (int i = r->nthreads; i < r->workers + r->scan_workers; i++) {
		if (pthread_create(&r->threads[i], NULL, worker, r) != 0)
			break;
		r->nthreads++;
	}
	return r->nthreads ? 0 : -EAGAIN;
}

void cfs_reader_free(struct cfs_reader *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = 1;
	pthread_cond_broadcast(&r->work);
	pthread_mutex_unlock(&r->lock);
	if (r->cancel) /* after stop: no queued job starts on a cancelled client */
		r->cancel(r->io);
	for (int i = 0; i < r->nthreads; i++)
		pthread_join(r->threads[i], NULL);
	free(r->threads);
	struct queue *qs[] = { &r->urgent, &r->bg, &r->scanq };
	for (int q = 0; q < 3; q++) {
		struct job *j;
		while ((j = pop(qs[q]))) {
			for (uint32_t i = 0; i < j->n; i++)
				if (j->fl[i])
					finish_block(r, j, i, -ECANCELED, 0, NULL);
			free(j->fl);
			free(j);
		}
	}
	for (int b = 0; b < BUCKETS; b++) {
		while (r->flights[b]) {
			struct flight *f = r->flights[b];
			r->flights[b] = f->next;
			free(f->data);
			free(f);
		}
	}
	for (int i = 0; i < SPARES; i++)
		free(r->spares[i].data);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->done);
	pthread_cond_destroy(&r->work);
	free(r);
}

uint64_t cfs_reader_small_max(const struct cfs_reader *r)
{
	return (uint64_t)r->max_blocks * r->bs;
}

struct cfs_reader_stream *cfs_reader_stream_new(void)
{
	return calloc(1, sizeof(struct cfs_reader_stream));
}

void cfs_reader_stream_free(struct cfs_reader_stream *s)
{
	free(s);
}

void cfs_reader_forget(struct cfs_reader *r, const struct cfs_reader_file *f)
{
	if (r->forget)
		r->forget(r->io, f->id, f->rev, f->size);
}

void cfs_reader_stats(struct cfs_reader *r, struct cfs_reader_stats *out)
{
	pthread_mutex_lock(&r->lock);
	*out = r->st;
	out->scan_queued = (uint64_t)r->scanq.len + (uint64_t)r->running_scan;
	pthread_mutex_unlock(&r->lock);
}

/* ---- reads ------------------------------------------------------------------ */

/* lock held.  Queues prefetch jobs for blocks [from, to] under the budget;
 * returns the first block it did not cover (to + 1 when it got there). */
static uint64_t prefetch_range(struct cfs_reader *r, const struct cfs_reader_file *f,
			       uint64_t from, uint64_t to, uint32_t chunk, int cls)
{
	uint64_t total = nblocks(r, f->size);
	if (to >= total)
		to = total ? total - 1 : 0;
	uint64_t b = from;
	if (r->ra_paused)
		return b;
	while (total && b <= to) {
		if ((cls == CLS_SCAN ? r->scanq.len >= SCAN_QUEUE
				     : r->st.queued_bytes >= r->prefetch_budget) ||
		    fail_get(r, f->key))
			return b;
		if (flight_find(r, f->key, b) || cfs_store_has(r->store, f->key, b)) {
			b++;
			continue;
		}
		uint32_t n = chunk;
		if (b + n > to + 1)
			n = (uint32_t)(to + 1 - b);
		struct job *j = job_make(r, f, b, n, cls);
		if (!j)
			return b;
		b += j->n;
	}
	return b;
}

/* Bytes [boff, boff+blen) of block b from the store into dst; 1 when all were there. */
static int from_store(struct cfs_reader *r, const struct cfs_reader_file *f, uint64_t b,
		      uint32_t boff, uint32_t blen, char *dst)
{
	uint32_t got = 0;
	return cfs_store_read(r->store, f->key, b, boff, blen, dst, &got) == 0 && got == blen;
}

/* Gets bytes [boff, boff+blen) of block b into dst: from a remembered block,
 * an existing flight, or a new urgent job of up to chunk blocks. */
static int read_miss(struct cfs_reader *r, const struct cfs_reader_file *f, uint64_t b,
		     uint32_t boff, uint32_t blen, char *dst, uint32_t chunk)
{
	for (int tries = 0; tries < 8; tries++) {
		pthread_mutex_lock(&r->lock);
		if (spare_get(r, f->key, b, boff, blen, dst)) {
			pthread_mutex_unlock(&r->lock);
			return 0;
		}
		struct flight *fl = flight_find(r, f->key, b);
		int failed = fl ? 0 : fail_get(r, f->key);
		if (failed) {
			pthread_mutex_unlock(&r->lock);
			return failed;
		}
		if (fl) {
			r->st.joined++;
			if (fl->job)
				promote(r, fl->job);
		} else if (cfs_store_has(r->store, f->key, b)) {
			/* another reader's download of it ended (stored) after our
			 * read missed: read it there, not from Drive again */
			pthread_mutex_unlock(&r->lock);
			if (from_store(r, f, b, boff, blen, dst))
				return 0;
			continue;
		} else {
			struct job *j = job_make(r, f, b, chunk, CLS_URGENT);
			if (!j) {
				pthread_mutex_unlock(&r->lock);
				return -ENOMEM;
			}
			fl = j->fl[0];
		}
		fl->refs++;
		fl->waiters++;
		while (!fl->done)
			pthread_cond_wait(&r->done, &r->lock);
		int rc = fl->rc, copied = 0;
		if (!rc && fl->data && boff + blen <= fl->len) {
			memcpy(dst, fl->data + boff, blen);
			copied = 1;
		} else if (!rc && boff + blen > fl->len && fl->data) {
			rc = -ESTALE;
		}
		flight_put(r, fl);
		pthread_mutex_unlock(&r->lock);
		if (rc || copied)
			return rc;
		/* finished before we joined and went to the store: read it there */
		if (from_store(r, f, b, boff, blen, dst))
			return 0;
	}
	return -EIO;
}

/* lock held.  Updates the access pattern; returns the window. */
static uint32_t observe(struct cfs_reader *r, struct cfs_reader_stream *s, int64_t off,
			size_t len)
{
	int64_t slack = 2 * (int64_t)r->bs;
	int seq = s->reads ? off >= s->next - slack && off <= s->next + slack : off == 0;
	if (seq) {
		s->window = s->window ? s->window * WIN_GROWTH : WIN_MIN;
		if (s->window > r->win_max)
			s->window = r->win_max;
	} else {
		s->window = 0;
		s->ahead = 0;
	}
	s->next = off + (int64_t)len;
	s->reads++;
	return s->window;
}

int cfs_reader_read(struct cfs_reader *r, struct cfs_reader_stream *stream,
		    const struct cfs_reader_file *f, int64_t off, size_t len, char *buf,
		    size_t *got)
{
	*got = 0;
	if (off < 0)
		return -EINVAL;
	if (strlen(f->key) >= KEY_MAX || strlen(f->id) >= CFS_ID_MAX ||
	    (f->rev && strlen(f->rev) >= CFS_ID_MAX))
		return -ENAMETOOLONG;
	if (off >= f->size || len == 0)
		return 0;
	if ((int64_t)len > f->size - off)
		len = (size_t)(f->size - off);
	uint32_t window = 0;
	if (stream) {
		pthread_mutex_lock(&r->lock);
		window = observe(r, stream, off, len);
		pthread_mutex_unlock(&r->lock);
	}
	/* small files whole; sequential readers in growing requests; else a block */
	uint32_t chunk = (uint64_t)f->size <= (uint64_t)r->max_blocks * r->bs ? r->max_blocks
			 : window ? (window / 2 < r->max_blocks ? window / 2 : r->max_blocks)
				  : 1;
	if (!chunk)
		chunk = 1;
	size_t pos = 0;
	uint64_t hits = 0, misses = 0, bytes_cache = 0, bytes_drive = 0;
	int rc = 0;
	while (pos < len) {
		int64_t at = off + (int64_t)pos;
		uint64_t b = (uint64_t)at / r->bs;
		uint32_t boff = (uint32_t)(at - (int64_t)b * r->bs);
		uint32_t blen = r->bs - boff;
		if (blen > len - pos)
			blen = (uint32_t)(len - pos);
		uint32_t n = 0;
		if (cfs_store_read(r->store, f->key, b, boff, blen, buf + pos, &n) == 0 && n == blen) {
			hits++;
			bytes_cache += blen;
		} else {
			misses++;
			if (r->missed)
				r->missed(r->io, f->key, b);
			/* No short reads: FUSE would take one for the end of the file. */
			if ((rc = read_miss(r, f, b, boff, blen, buf + pos, chunk)))
				break;
			bytes_drive += blen;
		}
		pos += blen;
	}
	pthread_mutex_lock(&r->lock);
	r->st.hits += hits;
	r->st.misses += misses;
	r->st.bytes_cache += bytes_cache;
	r->st.bytes_drive += bytes_drive;
	if (!rc && stream && window) {
		/* Refill the window only when a whole request's worth of it is
		 * missing, in requests as large as a sequential stream may make
		 * (idle workers split them): topping it up one block per read
		 * would turn a sequential reader into 1-block requests. */
		uint64_t last = (uint64_t)(off + (int64_t)len - 1) / r->bs;
		uint64_t from = stream->ahead > last + 1 ? stream->ahead : last + 1;
		uint32_t pchunk = window / 2 < r->seq_blocks ? window / 2 : r->seq_blocks;
		if (!pchunk)
			pchunk = 1;
		if (from + pchunk <= last + window + 1)
			stream->ahead = prefetch_range(r, f, from, last + window, pchunk, CLS_BG);
	}
	pthread_mutex_unlock(&r->lock);
	if (!rc)
		*got = len;
	return rc;
}

int cfs_reader_prefetch(struct cfs_reader *r, const struct cfs_reader_file *f)
{
	if (strlen(f->key) >= KEY_MAX || f->size <= 0)
		return 0;
	pthread_mutex_lock(&r->lock);
	int busy = r->st.queued_bytes >= r->prefetch_budget || r->ra_paused;
	if (!busy)
		prefetch_range(r, f, 0, nblocks(r, f->size) - 1, r->max_blocks, CLS_BG);
	pthread_mutex_unlock(&r->lock);
	return busy ? -EBUSY : 0;
}

int cfs_reader_scan(struct cfs_reader *r, const struct cfs_reader_file *f)
{
	if (strlen(f->key) >= KEY_MAX || f->size <= 0 ||
	    (uint64_t)f->size > (uint64_t)r->max_blocks * r->bs)
		return 0;
	pthread_mutex_lock(&r->lock);
	uint64_t requests = r->st.requests, last = nblocks(r, f->size) - 1;
	int rc = 0;
	if (r->scanq.len >= SCAN_QUEUE || r->ra_paused)
		rc = -EBUSY;
	else if (prefetch_range(r, f, 0, last, r->max_blocks, CLS_SCAN) <= last)
		rc = r->scanq.len >= SCAN_QUEUE ? -EBUSY : 0; /* full now, or no memory */
	if (!rc && r->st.requests != requests)
		rc = 1;
	pthread_mutex_unlock(&r->lock);
	return rc;
}

void cfs_reader_scan_cancel(struct cfs_reader *r)
{
	pthread_mutex_lock(&r->lock);
	struct job *j;
	while ((j = pop(&r->scanq))) {
		for (uint32_t i = 0; i < j->n; i++)
			if (j->fl[i])
				finish_block(r, j, i, -ECANCELED, 0, NULL);
		free(j->fl);
		free(j);
	}
	pthread_mutex_unlock(&r->lock);
}

void cfs_reader_pause_readahead(struct cfs_reader *r, int on)
{
	pthread_mutex_lock(&r->lock);
	int was = r->ra_paused;
	r->ra_paused = on ? 1 : 0;
	if (on && !was)
		r->st.ra_pauses++;
	pthread_mutex_unlock(&r->lock);
	if (on && !was)
		cfs_reader_scan_cancel(r);
}

int cfs_reader_warm(struct cfs_reader *r, const struct cfs_reader_file *f, int64_t off,
		    uint64_t len, uint64_t *fetched)
{
	*fetched = 0;
	if (strlen(f->key) >= KEY_MAX)
		return -ENAMETOOLONG;
	if (off < 0 || off >= f->size || !len)
		return 0;
	if (len > (uint64_t)(f->size - off)) /* clamped to the file: off + len cannot wrap */
		len = (uint64_t)(f->size - off);
	uint64_t first = (uint64_t)off / r->bs;
	uint64_t last = ((uint64_t)off + len - 1) / r->bs;
	if (last >= nblocks(r, f->size))
		last = nblocks(r, f->size) - 1;
	size_t n = (size_t)(last - first + 1), nw = 0;
	struct flight **wait = calloc(n, sizeof(*wait));
	if (!wait)
		return -ENOMEM;
	pthread_mutex_lock(&r->lock);
	for (uint64_t b = first; b <= last; b++) {
		struct flight *fl = flight_find(r, f->key, b);
		if (!fl && !cfs_store_has(r->store, f->key, b)) {
			/* warm asks for it: make a job now, prefetch budget or not */
			struct job *j = job_make(r, f, b, r->max_blocks, CLS_BG);
			fl = j ? j->fl[0] : NULL;
		}
		if (fl) {
			fl->refs++; /* no waiter: warm needs the block stored, not a copy */
			wait[nw++] = fl;
		}
	}
	int rc = 0;
	for (size_t i = 0; i < nw; i++) {
		while (!wait[i]->done)
			pthread_cond_wait(&r->done, &r->lock);
		if (wait[i]->rc && !rc)
			rc = wait[i]->rc;
		if (!wait[i]->rc)
			*fetched += wait[i]->len;
		flight_put(r, wait[i]);
	}
	pthread_mutex_unlock(&r->lock);
	free(wait);
	return rc;
}
