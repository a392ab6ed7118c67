/* check: the few assertion macros the C unit tests use.  A failed check
 * prints where and what, and the test exits non-zero at the end. */
#ifndef CFS_CHECK_H
#define CFS_CHECK_H

#include <stdio.h>
#include <string.h>

static int check_failures;
static int check_count;

#define CHECK(cond)                                                                   \
	do {                                                                          \
		check_count++;                                                        \
		if (!(cond)) {                                                        \
			check_failures++;                                             \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, \
				#cond);                                               \
		}                                                                     \
	} while (0)

#define CHECK_EQ(a, b)                                                                    \
	do {                                                                              \
		long long va_ = (long long)(a), vb_ = (long long)(b);                     \
		check_count++;                                                            \
		if (va_ != vb_) {                                                         \
			check_failures++;                                                 \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %lld, %s == %lld\n", \
				__FILE__, __LINE__, #a, va_, #b, vb_);                    \
		}                                                                         \
	} while (0)

#define CHECK_STR(a, b)                                                                 \
	do {                                                                            \
		const char *sa_ = (a), *sb_ = (b);                                      \
		check_count++;                                                          \
		if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0) {                            \
			check_failures++;                                               \
			fprintf(stderr, "%s:%d: CHECK_STR failed: \"%s\" != \"%s\"\n",  \
				__FILE__, __LINE__, sa_ ? sa_ : "(null)", sb_ ? sb_ : "(null)"); \
		}                                                                       \
	} while (0)

static inline int check_done(const char *name)
{
	printf("%s: %d checks, %d failed\n", name, check_count, check_failures);
	return check_failures ? 1 : 0;
}

#endif
