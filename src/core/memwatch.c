/* memwatch: memory-pressure policy (see memwatch.h). */
#include "memwatch.h"

#include <string.h>

#define CREDIT_MS 1000  /* bytes freed this recently count as available */
#define GROW_EVERY_MS 1000

void cfs_memwatch_init(struct cfs_memwatch *w, const struct cfs_memwatch_opts *o)
{
	memset(w, 0, sizeof(*w));
	w->o = *o;
	if (w->o.hold_ms <= 0)
		w->o.hold_ms = CFS_MEMWATCH_HOLD_MS;
	if (w->o.min_limit > w->o.budget)
		w->o.min_limit = w->o.budget;
	w->margin = o->floor / 4;
	w->limit = o->budget;
	w->last_pressure_ms = INT64_MIN / 2;
	w->freed_ms = INT64_MIN / 2;
}

static int under_pressure(const struct cfs_memwatch *w, const struct cfs_mem_sample *s,
			  uint64_t avail)
{
	if (avail < w->o.floor)
		return 1;
	return s->psi && s->some10 >= CFS_MEMWATCH_PSI_SOME && avail < w->o.floor + 2 * w->margin;
}

void cfs_memwatch_step(struct cfs_memwatch *w, const struct cfs_mem_sample *s, uint64_t used,
		       int64_t now_ms, struct cfs_memwatch_act *act)
{
	uint64_t credit = now_ms - w->freed_ms < CREDIT_MS ? w->freed_recent : 0;
	uint64_t avail = s->avail + credit;
	int p = under_pressure(w, s, avail);

	if (w->pressured && w->last_ms)
		w->under_ms += (uint64_t)(now_ms - w->last_ms);
	w->last_ms = now_ms;
	w->avail = s->avail;
	act->evict = 0;
	if (p) {
		if (!w->pressured)
			w->episodes++;
		w->pressured = 1;
		w->last_pressure_ms = now_ms;
		uint64_t want = w->o.floor + w->margin;
		uint64_t deficit = avail < want ? want - avail : w->margin; /* PSI alone: a margin */
		uint64_t target = used > deficit ? used - deficit : 0;
		if (target < w->o.min_limit)
			target = w->o.min_limit;
		if (target < w->limit)
			w->limit = target;
		act->evict = used > w->limit;
	} else {
		w->pressured = 0;
		uint64_t keep = w->o.floor + 2 * w->margin;
		if (w->limit < w->o.budget && now_ms - w->last_pressure_ms >= w->o.hold_ms &&
		    now_ms - w->last_grow_ms >= GROW_EVERY_MS && avail > keep) {
			uint64_t step = w->o.budget / 10;
			if (step > avail - keep)
				step = avail - keep;
			w->limit = w->limit + step > w->o.budget ? w->o.budget : w->limit + step;
			w->last_grow_ms = now_ms;
		}
	}
	w->paused = w->pressured || now_ms - w->last_pressure_ms < w->o.hold_ms;
	act->limit = w->limit;
	act->pause = w->paused;
}

void cfs_memwatch_freed(struct cfs_memwatch *w, uint64_t freed, int64_t now_ms)
{
	/* several evictions within the window: all of it is still on its way */
	w->freed_recent = now_ms - w->freed_ms < CREDIT_MS ? w->freed_recent + freed : freed;
	w->freed_ms = now_ms;
}
