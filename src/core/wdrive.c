/* wdrive: the real client behind the write path's seam (see wdrive.h). */
#include "wdrive.h"

#include <time.h>

#include "clock.h"

static int ids(void *a, int n, char (*out)[CFS_ID_MAX])
{
	return cfs_drive_generate_ids(a, n, out);
}

static int create(void *a, const struct cfs_json_meta_in *m, struct cfs_file_meta *out)
{
	return cfs_drive_create(a, m, out);
}

static int upload(void *a, const struct cfs_drive_upload *u, struct cfs_file_meta *out)
{
	return cfs_drive_upload_all(a, u, out);
}

static int update(void *a, const char *id, const char *name, const char *add, const char *rm,
		  int trashed, int64_t mtime_ns, struct cfs_file_meta *out)
{
	return cfs_drive_update_meta(a, id, name, add, rm, trashed, mtime_ns, out);
}

static int del(void *a, const char *id)
{
	return cfs_drive_delete(a, id);
}

static int get(void *a, const char *id, struct cfs_file_meta *out)
{
	return cfs_drive_get(a, id, out);
}

static int list(void *a, const char *parent, cfs_drive_list_cb cb, void *arg)
{
	return cfs_drive_list(a, parent, cb, arg);
}

static int about(void *a, int64_t *limit, int64_t *usage)
{
	return cfs_drive_about(a, limit, usage, NULL, 0);
}

static int session_ok(void *a, const char *uri)
{
	return cfs_drive_session_ok(a, uri);
}

static int64_t now_ms(void *a)
{
	(void)a;
	return cfs_clock_ns(CLOCK_MONOTONIC) / 1000000;
}

static int64_t wall_ns(void *a)
{
	(void)a;
	return cfs_clock_wall_ns();
}

void cfs_wdrive_real(struct cfs_drive *d, struct cfs_wdrive *out)
{
	*out = (struct cfs_wdrive){ d, ids, create, upload, update, del, get, list, about,
				    session_ok, now_ms, wall_ns };
}
