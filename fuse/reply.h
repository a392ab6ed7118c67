/* reply: the one place a colabfs status becomes the errno the kernel sees. */
#ifndef CFS_REPLY_H
#define CFS_REPLY_H

/* Maps 0 / -errno / CFS_E_* to a positive errno (0 for success). */
int cfs_reply_errno(int status);

#endif
