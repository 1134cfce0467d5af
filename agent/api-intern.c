/*
 * String interning for record fields: a record's strings must stay valid
 * after its buffer is handed back, so each distinct string is copied once
 * and kept for the life of the process.  Lock-free: a chain of open
 * addressing tables of atomic pointers, each twice the size of the one
 * before; an insert that finds its probe window full moves to the next
 * table (allocated on demand with compare-and-swap).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "api.h"

#define INTERN_TABLES	20
#define INTERN_FIRST	4096
#define INTERN_PROBES	32

static const char *_Atomic *_Atomic intern_tables[INTERN_TABLES];

static uint64_t
intern_hash(const char *s, size_t len)
{
	uint64_t h = 1469598103934665603ull;	/* FNV-1a */
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)s[i];
		h *= 1099511628211ull;
	}
	return h ^ (h >> 29);
}

static const char *_Atomic *
intern_table(int i)
{
	const char *_Atomic *t = atomic_load_explicit(&intern_tables[i],
	    memory_order_acquire), *_Atomic *none = NULL;

	if (t != NULL)
		return t;
	t = calloc((size_t)INTERN_FIRST << i, sizeof(*t));
	if (t == NULL)
		return NULL;
	if (!atomic_compare_exchange_strong(&intern_tables[i], &none, t)) {
		free(t);
		t = none;
	}
	return t;
}

const char *
api_intern_n(const char *s, size_t maxlen)
{
	const char *_Atomic *t;
	const char *cur, *copy = NULL;
	size_t len, mask, j, k;
	uint64_t h;
	int i;

	if (s == NULL)
		return NULL;
	len = strnlen(s, maxlen);
	h = intern_hash(s, len);
	for (i = 0; i < INTERN_TABLES; i++) {
		if ((t = intern_table(i)) == NULL)
			break;
		mask = ((size_t)INTERN_FIRST << i) - 1;
		for (k = 0; k < INTERN_PROBES; k++) {
			j = (h + k) & mask;
			cur = atomic_load_explicit(&t[j], memory_order_acquire);
			if (cur == NULL) {
				if (copy == NULL) {
					if ((copy = malloc(len + 1)) == NULL)
						return NULL;
					memcpy((char *)copy, s, len);
					((char *)copy)[len] = '\0';
				}
				if (atomic_compare_exchange_strong(&t[j], &cur,
				    copy))
					return copy;
			}
			if (strncmp(cur, s, len) == 0 && cur[len] == '\0') {
				free((char *)copy);
				return cur;
			}
		}
	}
	free((char *)copy);
	return NULL;
}

const char *
api_intern(const char *s)
{
	return api_intern_n(s, (size_t)-1);
}
