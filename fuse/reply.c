/* reply: status -> kernel errno (see reply.h).
 *
 * Transient classes that outlived their retries become EIO (the reader sees
 * the cause in the log); refused credentials and Drive's refusal to let us
 * download become EACCES; an export over Drive's limit is EFBIG. */
#include "reply.h"

#include <errno.h>

#include "err.h"

int cfs_reply_errno(int status)
{
	if (status >= 0)
		return 0;
	if (!cfs_err_is_cfs(status))
		return -status;
	switch (status) {
	case CFS_E_AUTH:
	case CFS_E_NOTDL:
		return EACCES;
	case CFS_E_TOOBIG:
		return EFBIG;
	case CFS_E_CONFIG:
		return EINVAL;
	case CFS_E_TLS:
		return EIO;
	default: /* NET, PROTO, QUOTA, RATE, SERVER, BADREQ */
		return EIO;
	}
}
