/* err: status codes shared by every layer.
 *
 * Every colabfs function that can fail returns 0 on success, a negative errno
 * value (-ENOENT, -ENOMEM, ...) for conditions POSIX already names, or one of
 * the CFS_E_* codes below for conditions it does not.  Foreign codes (CURLcode,
 * MDB_*, jansson errors) are translated where they enter the program; only
 * fuse/reply.c turns a status into the errno the kernel sees. */
#ifndef CFS_ERR_H
#define CFS_ERR_H

enum {
	CFS_E_FIRST = -20000,
	CFS_E_NET = CFS_E_FIRST,   /* transport failure: connect, reset, timeout, TLS */
	CFS_E_PROTO,               /* a reply we cannot trust: bad JSON, wrong Content-Range */
	CFS_E_AUTH,                /* no usable credentials, or the token was refused */
	CFS_E_QUOTA,               /* Drive download quota or abuse flag: permanent for now */
	CFS_E_RATE,                /* rate limited (transient; final once out of retries) */
	CFS_E_SERVER,              /* 5xx (transient; final once out of retries) */
	CFS_E_NOTDL,               /* Drive says the item has no downloadable content */
	CFS_E_TOOBIG,              /* export larger than Drive allows */
	CFS_E_BADREQ,              /* Drive refused the request as malformed (400) */
	CFS_E_CONFIG,              /* bad option or configuration */
	CFS_E_TLS,                 /* the server's certificate does not verify: not transient */
	CFS_E_STOPPED,             /* a body sink ended the transfer: it has all it wants (not a
				    * failure; cfs_drive_read_sink reports it as success) */
	CFS_E_LAST
};

/* A short English description of a status (0, -errno or CFS_E_*).  Never NULL;
 * the string is static. */
const char *cfs_strerror(int status);

/* 1 if status is one of ours (CFS_E_*). */
int cfs_err_is_cfs(int status);

#endif
