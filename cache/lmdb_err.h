/* lmdb_err: the one translation of LMDB status codes into -errno, for the
 * two modules that call LMDB: the daemon's index (cache/index.c) and the GPU
 * loader's read-only view (kernels/cacheview.c).  Header only. */
#ifndef CFS_LMDB_ERR_H
#define CFS_LMDB_ERR_H

#include <errno.h>
#include <lmdb.h>

/* 0, -ENOENT (absent), -EEXIST, -ENOSPC (map or txn full, EDQUOT), -EINVAL
 * (bad size), -EAGAIN (reader slots full), -errno for a system error, -EIO
 * for anything else. */
static inline int cfs_lmdb_err(int rc)
{
	switch (rc) {
	case MDB_SUCCESS:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
	case MDB_KEYEXIST:
		return -EEXIST;
	case MDB_MAP_FULL:
	case MDB_TXN_FULL:
		return -ENOSPC;
	case MDB_BAD_VALSIZE:
		return -EINVAL;
	case MDB_READERS_FULL:
		return -EAGAIN;
	default:
		if (rc > 0)
			return rc == EDQUOT ? -ENOSPC : -rc;
		return -EIO;
	}
}

#endif
