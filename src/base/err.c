/* err: descriptions of status codes (see err.h). */
#include "err.h"

#include <string.h>

static const char *const cfs_msgs[] = {
	[CFS_E_NET - CFS_E_FIRST] = "network failure talking to Drive",
	[CFS_E_PROTO - CFS_E_FIRST] = "malformed or inconsistent reply from Drive",
	[CFS_E_AUTH - CFS_E_FIRST] = "authentication failed",
	[CFS_E_QUOTA - CFS_E_FIRST] = "Drive download quota exceeded or file flagged",
	[CFS_E_RATE - CFS_E_FIRST] = "Drive rate limit",
	[CFS_E_SERVER - CFS_E_FIRST] = "Drive server error",
	[CFS_E_NOTDL - CFS_E_FIRST] = "item has no downloadable content",
	[CFS_E_TOOBIG - CFS_E_FIRST] = "export larger than Drive allows",
	[CFS_E_BADREQ - CFS_E_FIRST] = "Drive rejected the request",
	[CFS_E_CONFIG - CFS_E_FIRST] = "invalid configuration",
	[CFS_E_TLS - CFS_E_FIRST] = "TLS certificate verification failed (see --ca-file)",
	[CFS_E_STOPPED - CFS_E_FIRST] = "transfer ended early by its reader",
};

int cfs_err_is_cfs(int status)
{
	return status >= CFS_E_FIRST && status < CFS_E_LAST;
}

const char *cfs_strerror(int status)
{
	if (status == 0)
		return "success";
	if (cfs_err_is_cfs(status))
		return cfs_msgs[status - CFS_E_FIRST];
	if (status < 0 && status > -4096)
		return strerror(-status);
	return "unknown error";
}
