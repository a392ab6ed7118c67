/* Fuzz harness: the credentials-file parser cfs_json_parse_credentials
 * (libFuzzer).  The input is the file.  On success the fields its type needs
 * are present and non-empty; on failure nothing is handed out and the reason
 * is a short NUL-terminated string. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "json.h"

static volatile size_t sink;

static void touch(const char *s, int required)
{
	if (!s) {
		assert(!required);
		return;
	}
	size_t n = strlen(s);
	assert(n > 0);
	for (size_t i = 0; i < n; i++)
		sink += (unsigned char)s[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *txt = malloc(size ? size : 1); /* exact size: no terminator to lean on */
	if (!txt)
		return 0;
	memcpy(txt, data, size);

	struct cfs_cred c;
	char why[128];
	memset(why, 'x', sizeof(why));
	int rc = cfs_json_parse_credentials(txt, size, &c, why, sizeof(why));
	assert(memchr(why, '\0', sizeof(why)) != NULL);
	if (rc == 0) {
		int user = c.type == CFS_CRED_AUTHORIZED_USER;
		assert(user || c.type == CFS_CRED_SERVICE_ACCOUNT);
		touch(c.client_id, user);
		touch(c.client_secret, user);
		touch(c.refresh_token, user);
		touch(c.client_email, !user);
		touch(c.private_key, !user);
		touch(c.private_key_id, 0);
		touch(c.token_uri, 0);
	} else {
		if (rc == CFS_E_PROTO)
			assert(why[0] != '\0');
		assert(!c.client_id && !c.client_secret && !c.refresh_token && !c.client_email &&
		       !c.private_key && !c.private_key_id && !c.token_uri);
	}
	cfs_cred_cleanup(&c);
	cfs_cred_cleanup(&c); /* twice: cleanup leaves the struct reusable */
	free(txt);
	return 0;
}
