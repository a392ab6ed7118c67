/* Unit tests: the native-file export map. */
#include <errno.h>

#include "check.h"
#include "export.h"

int main(void)
{
	struct cfs_export_map m;
	char why[160];
	const char *ext, *mime;
	CHECK_EQ(cfs_export_parse(NULL, &m, why, sizeof(why)), 0);
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.document", &ext, &mime), 0);
	CHECK_STR(ext, "docx");
	CHECK_STR(mime, "application/vnd.openxmlformats-officedocument.wordprocessingml.document");
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.drawing", &ext, &mime), 0);
	CHECK_STR(ext, "pdf");
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.form", &ext, &mime), -ENOENT);
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.script", &ext, &mime), -ENOENT);
	CHECK_EQ(cfs_export_lookup(&m, "text/plain", &ext, &mime), -ENOENT);

	CHECK_EQ(cfs_export_parse("document=pdf,spreadsheet=csv,presentation=none", &m, why,
				  sizeof(why)),
		 0);
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.document", &ext, &mime), 0);
	CHECK_STR(ext, "pdf");
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.spreadsheet", &ext, &mime), 0);
	CHECK_STR(mime, "text/csv");
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.presentation", &ext, &mime),
		 -ENOENT);
	CHECK_EQ(cfs_export_lookup(&m, "application/vnd.google-apps.drawing", &ext, &mime), 0);

	CHECK_EQ(cfs_export_parse("document=xlsx", &m, why, sizeof(why)), -EINVAL);
	CHECK(strstr(why, "xlsx") != NULL);
	CHECK_EQ(cfs_export_parse("movie=mp4", &m, why, sizeof(why)), -EINVAL);
	CHECK_EQ(cfs_export_parse("document", &m, why, sizeof(why)), -EINVAL);
	return check_done("test_export");
}
