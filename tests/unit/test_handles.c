/* Unit tests: the handle table (handles.h): add, get, remove, references,
 * numbers taken by another kind, growth, and threads racing release with
 * reads. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "handles.h"

struct obj {
	struct cfs_handle h;
	int freed_marker;
};

static int dropped;

static void drop(struct cfs_handle *e, void *arg)
{
	(void)arg;
	dropped++;
	free(e);
}

static struct obj *new_obj(uint64_t fh, int kind)
{
	struct obj *o = calloc(1, sizeof(*o));
	o->h.fh = fh;
	o->h.kind = kind;
	return o;
}

static void test_basic(void)
{
	struct cfs_handles *h;
	CHECK_EQ(cfs_handles_new(&h), 0);
	struct obj *a = new_obj(4096, 1);
	struct cfs_handle *got = NULL;
	CHECK_EQ(cfs_handles_add(h, &a->h, &got), 0);
	CHECK(got == &a->h);
	CHECK_EQ(cfs_handles_unref(got), 0); /* the table still has one */
	CHECK(cfs_handles_get(h, 4096, 2) == NULL); /* other kind */
	CHECK(cfs_handles_get(h, 4097, 1) == NULL);
	struct cfs_handle *e = cfs_handles_get(h, 4096, 1);
	CHECK(e == &a->h);
	/* the same number added again (a rebuild race): the first one wins */
	struct obj *b = new_obj(4096, 1);
	CHECK_EQ(cfs_handles_add(h, &b->h, &got), 0);
	CHECK(got == &a->h);
	CHECK_EQ(cfs_handles_unref(got), 0);
	struct obj *c = new_obj(4096, 2);
	CHECK_EQ(cfs_handles_add(h, &c->h, &got), -EEXIST);
	free(b);
	free(c);
	/* release while a reader holds it: the reader frees */
	CHECK(cfs_handles_remove(h, 4096, 2) == NULL);
	struct cfs_handle *r = cfs_handles_remove(h, 4096, 1);
	CHECK(r == &a->h);
	CHECK(cfs_handles_remove(h, 4096, 1) == NULL);
	CHECK_EQ(cfs_handles_count(h), 0);
	CHECK_EQ(cfs_handles_unref(r), 0);
	CHECK_EQ(cfs_handles_unref(e), 1);
	free(a);
	/* many: the buckets grow; leftovers are dropped at free */
	for (uint64_t i = 1; i <= 5000; i++) {
		struct obj *o = new_obj(i * 7, 1);
		CHECK_EQ(cfs_handles_add(h, &o->h, &got), 0);
		cfs_handles_unref(got);
	}
	CHECK_EQ(cfs_handles_count(h), 5000);
	int found = 0;
	for (uint64_t i = 1; i <= 5000; i++) {
		struct cfs_handle *x = cfs_handles_get(h, i * 7, 1);
		found += x != NULL && x->fh == i * 7;
		if (x)
			cfs_handles_unref(x);
	}
	CHECK_EQ(found, 5000);
	for (uint64_t i = 1; i <= 2500; i++) {
		struct cfs_handle *x = cfs_handles_remove(h, i * 7, 1);
		CHECK(x != NULL);
		if (x && cfs_handles_unref(x))
			free(x);
	}
	dropped = 0;
	cfs_handles_free(h, drop, NULL);
	CHECK_EQ(dropped, 2500);
	cfs_handles_free(NULL, drop, NULL);
}

/* Readers get and unref while a releaser removes: each object is freed
 * exactly once, by whoever drops the last reference (ASan builds catch a
 * use after free or a leak). */
#define MT_N 2000
static struct cfs_handles *mt;
static int mt_freed;

static void *reader(void *arg)
{
	(void)arg;
	for (int round = 0; round < 50; round++)
		for (uint64_t i = 1; i <= MT_N; i++) {
			struct cfs_handle *e = cfs_handles_get(mt, i, 1);
			if (!e)
				continue;
			struct obj *o = (struct obj *)e;
			o->freed_marker++; /* touch it: must still be alive */
			if (cfs_handles_unref(e)) {
				__atomic_add_fetch(&mt_freed, 1, __ATOMIC_RELAXED);
				free(o);
			}
		}
	return NULL;
}

static void test_threads(void)
{
	CHECK_EQ(cfs_handles_new(&mt), 0);
	for (uint64_t i = 1; i <= MT_N; i++) {
		struct obj *o = new_obj(i, 1);
		struct cfs_handle *got;
		cfs_handles_add(mt, &o->h, &got);
		cfs_handles_unref(got);
	}
	pthread_t t[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&t[i], NULL, reader, NULL);
	for (uint64_t i = 1; i <= MT_N; i++) {
		struct cfs_handle *e = cfs_handles_remove(mt, i, 1);
		if (e && cfs_handles_unref(e)) {
			__atomic_add_fetch(&mt_freed, 1, __ATOMIC_RELAXED);
			free(e);
		}
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	CHECK_EQ(mt_freed, MT_N);
	CHECK_EQ(cfs_handles_count(mt), 0);
	cfs_handles_free(mt, NULL, NULL);
}

int main(void)
{
	test_basic();
	test_threads();
	return check_done("test_handles");
}
