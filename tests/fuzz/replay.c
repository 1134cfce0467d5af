/*
 * Corpus replay for builds without libFuzzer: feeds every file of the
 * corpus directories (arguments, else FUZZ_CORPUS) to the fuzz target, and
 * also deterministic variants of each (prefixes and single-byte flips), so
 * make check exercises the error paths the corpus leads to.
 */
#include "config.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static unsigned long inputs;

static int
replay_file(const char *path)
{
	struct stat sb;
	uint8_t *buf, *var;
	size_t n, i, step;
	FILE *f;

	if ((f = fopen(path, "rb")) == NULL || fstat(fileno(f), &sb) == -1) {
		perror(path);
		if (f != NULL)
			fclose(f);
		return -1;
	}
	n = (size_t)sb.st_size;
	buf = malloc(n + 1);
	var = malloc(n + 1);
	if (buf == NULL || var == NULL || fread(buf, 1, n, f) != n) {
		fprintf(stderr, "%s: read failed\n", path);
		fclose(f);
		free(buf);
		free(var);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	inputs++;
	step = n / 32 + 1;
	for (i = 0; i < n; i += step) {
		/* A copy, so that reads past the prefix are caught by tools. */
		memcpy(var, buf, i);
		LLVMFuzzerTestOneInput(var, i);
		memcpy(var, buf, n);
		var[i] ^= (uint8_t)(0x01 << (i % 8));
		LLVMFuzzerTestOneInput(var, n);
		inputs += 2;
	}
	free(buf);
	free(var);
	return 0;
}

static int
replay_path(const char *path)
{
	struct dirent *de;
	struct stat sb;
	char sub[4096];
	DIR *d;
	int rc = 0;

	if (stat(path, &sb) == -1) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(sb.st_mode))
		return replay_file(path);
	if ((d = opendir(path)) == NULL) {
		perror(path);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
		if (replay_path(sub) != 0)
			rc = -1;
	}
	closedir(d);
	return rc;
}

int
main(int argc, char **argv)
{
	int i, rc = 0;

	if (argc < 2) {
#ifdef FUZZ_CORPUS
		rc = replay_path(FUZZ_CORPUS);
#else
		fprintf(stderr, "usage: %s corpus-dir-or-file...\n", argv[0]);
		return 2;
#endif
	}
	for (i = 1; i < argc; i++)
		if (replay_path(argv[i]) != 0)
			rc = -1;
	printf("%s: %lu inputs\n", argv[0], inputs);
	if (inputs == 0)
		return 1;
	return rc == 0 ? 0 : 1;
}
