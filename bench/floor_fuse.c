/* floor_fuse: the kernel's floor for workload 10 (bench/README.md).
 *
 * A FUSE server that does nothing but show a local folder, read-only, with
 * libfuse's low-level API: the tree is walked once at start, every name and
 * attribute is handed to the kernel for a day, an OPEN is answered at once
 * (FOPEN_KEEP_CACHE | FOPEN_NOFLUSH, as colabfs answers a reader's warm open),
 * a RELEASE likewise, and a READ is a pread of the local file.  What a warm
 * epoch costs over it is what the kernel and this machine charge for FUSE
 * itself: the floor under colabfs's rows.  With --no-open the first OPEN is
 * answered ENOSYS, and the kernel opens files itself from then on (Linux 4.20),
 * as on a read-only colabfs mount.
 *
 *     floor_fuse [--no-open] [--threads] SRC MNT
 *
 * Runs in the foreground until MNT is unmounted or it gets SIGINT/SIGTERM
 * (it unmounts itself then).  --threads: libfuse's multithreaded loop instead
 * of one thread.  Not part of colabfs: `make bench/floor_fuse`.
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TTL 86400.0

struct node {
	char *path;        /* the local file */
	const char *name;  /* its last component, inside path */
	fuse_ino_t parent;
	fuse_ino_t child, next;  /* first child; next sibling */
	struct stat st;
};

static struct node *nodes;   /* nodes[ino - 1]; ino 1 is the root */
static size_t n_nodes, cap_nodes;
static fuse_ino_t *slots;    /* (parent, name) -> ino, open addressing */
static size_t n_slots;
static int no_open;

static uint64_t key_hash(fuse_ino_t parent, const char *name)
{
	uint64_t h = 1469598103934665603ULL ^ parent;
	for (; *name; name++)
		h = (h ^ (unsigned char)*name) * 1099511628211ULL;
	return h;
}

static fuse_ino_t *slot_of(fuse_ino_t parent, const char *name)
{
	size_t i = key_hash(parent, name) & (n_slots - 1);
	while (slots[i]) {
		struct node *n = &nodes[slots[i] - 1];
		if (n->parent == parent && !strcmp(n->name, name))
			break;
		i = (i + 1) & (n_slots - 1);
	}
	return &slots[i];
}

static fuse_ino_t add_node(const char *path, fuse_ino_t parent)
{
	if (n_nodes == cap_nodes) {
		cap_nodes = cap_nodes ? 2 * cap_nodes : 1024;
		if (!(nodes = realloc(nodes, cap_nodes * sizeof(*nodes))))
			return 0;
	}
	struct node *n = &nodes[n_nodes];
	memset(n, 0, sizeof(*n));
	if (!(n->path = strdup(path)) || lstat(path, &n->st))
		return 0;
	const char *slash = strrchr(n->path, '/');
	n->name = slash ? slash + 1 : n->path;
	n->parent = parent;
	n->st.st_ino = ++n_nodes;
	if (parent) {
		n->next = nodes[parent - 1].child;
		nodes[parent - 1].child = n_nodes;
	}
	return n_nodes;
}

/* Adds dir's entries below node ino, depth first. */
static int walk(fuse_ino_t ino)
{
	DIR *d = opendir(nodes[ino - 1].path);
	if (!d)
		return -1;
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char *p;
		if (asprintf(&p, "%s/%s", nodes[ino - 1].path, e->d_name) < 0)
			rc = -1;
		fuse_ino_t c = rc ? 0 : add_node(p, ino);
		free(rc ? NULL : p);
		if (!c || (S_ISDIR(nodes[c - 1].st.st_mode) && walk(c)))
			rc = -1;
	}
	closedir(d);
	return rc;
}

static int index_names(void)
{
	for (n_slots = 1024; n_slots < 2 * n_nodes; n_slots *= 2)
		;
	if (!(slots = calloc(n_slots, sizeof(*slots))))
		return -1;
	for (fuse_ino_t i = 2; i <= n_nodes; i++)
		*slot_of(nodes[i - 1].parent, nodes[i - 1].name) = i;
	return 0;
}

static void op_init(void *ud, struct fuse_conn_info *conn)
{
	conn->want &= ~(unsigned)FUSE_CAP_AUTO_INVAL_DATA;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	fuse_ino_t ino = *slot_of(parent, name);
	if (!ino) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	struct fuse_entry_param e = { .ino = ino, .generation = 1, .attr = nodes[ino - 1].st,
				      .attr_timeout = TTL, .entry_timeout = TTL };
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_attr(req, &nodes[ino - 1].st, TTL);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	size_t used = 0;
	off_t i = 0;
	for (fuse_ino_t c = nodes[ino - 1].child; c; c = nodes[c - 1].next, i++) {
		if (i < off)
			continue;
		size_t n = fuse_add_direntry(req, buf + used, size - used, nodes[c - 1].name,
					     &nodes[c - 1].st, i + 1);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	if (no_open) {
		fuse_reply_err(req, ENOSYS);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	fi->keep_cache = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	int fd = open(nodes[ino - 1].path, O_RDONLY);
	if (fd < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	struct fuse_bufvec v = FUSE_BUFVEC_INIT(size);
	v.buf[0].flags = FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK;
	v.buf[0].fd = fd;
	v.buf[0].pos = off;
	fuse_reply_data(req, &v, FUSE_BUF_SPLICE_MOVE);
	close(fd);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	fuse_reply_err(req, 0);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
};

int main(int argc, char **argv)
{
	int threads = 0, a = 1;
	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "--no-open"))
			no_open = 1;
		else if (!strcmp(argv[a], "--threads"))
			threads = 1;
		else
			break;
	}
	if (argc - a != 2) {
		fprintf(stderr, "usage: floor_fuse [--no-open] [--threads] SRC MNT\n");
		return 2;
	}
	char *src = realpath(argv[a], NULL);
	if (!src || !add_node(src, 0) || !S_ISDIR(nodes[0].st.st_mode) || walk(1) ||
	    index_names()) {
		fprintf(stderr, "floor_fuse: cannot read the folder %s: %s\n", argv[a],
			strerror(errno));
		return 1;
	}
	char *fargv[] = { argv[0], "-o", "ro,fsname=floor_fuse,default_permissions", NULL };
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse_session *se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	int rc = 1;
	if (se && !fuse_set_signal_handlers(se)) {
		if (!fuse_session_mount(se, argv[a + 1])) {
			fprintf(stderr, "floor_fuse: %zu entries of %s at %s\n", n_nodes, src,
				argv[a + 1]);
			struct fuse_loop_config *cfg = fuse_loop_cfg_create();
			rc = threads ? fuse_session_loop_mt(se, cfg) : fuse_session_loop(se);
			fuse_loop_cfg_destroy(cfg);
			fuse_session_unmount(se);
		}
		fuse_remove_signal_handlers(se);
	}
	if (se)
		fuse_session_destroy(se);
	return rc ? 1 : 0;
}
