/*
 * sim-securec.c - the bounds-checked memory and string functions of
 * securec.h (semantics there): the SDK's own implementation, so CANN
 * programs that include securec.h link against libnpusim (or its
 * libc_sec name) alone.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <securec.h>

#include "sim.h"

/* Do [a, a + alen) and [b, b + blen) share a byte? */
static int
sim_securec_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
	uintptr_t	x = (uintptr_t)a, y = (uintptr_t)b;

	return (x < y ? y - x < alen : x - y < blen);
}

/* The checks every function makes on the destination first. */
#define SIM_SECUREC_DEST(d, max, limit) do {				\
	if ((max) == 0 || (max) > (limit))				\
		return (ERANGE);					\
	if ((d) == NULL)						\
		return (EINVAL);					\
} while (0)

SIM_EXPORT errno_t
memset_s(void *dest, size_t destMax, int c, size_t count)
{
	SIM_SECUREC_DEST(dest, destMax, SECUREC_MEM_MAX_LEN);
	if (count > destMax) {
		memset(dest, c, destMax);
		return (ERANGE_AND_RESET);
	}
	memset(dest, c, count);
	return (EOK);
}

static errno_t
sim_securec_copy(void *dest, size_t destMax, const void *src, size_t count,
    int overlap_ok)
{
	SIM_SECUREC_DEST(dest, destMax, SECUREC_MEM_MAX_LEN);
	if (src == NULL) {
		memset(dest, 0, destMax);
		return (EINVAL_AND_RESET);
	}
	if (count > destMax) {
		memset(dest, 0, destMax);
		return (ERANGE_AND_RESET);
	}
	if (dest == src || count == 0)
		return (EOK);
	if (!overlap_ok && sim_securec_overlap(dest, count, src, count)) {
		memset(dest, 0, destMax);
		return (EOVERLAP_AND_RESET);
	}
	memmove(dest, src, count);
	return (EOK);
}

SIM_EXPORT errno_t
memcpy_s(void *dest, size_t destMax, const void *src, size_t count)
{
	return (sim_securec_copy(dest, destMax, src, count, 0));
}

SIM_EXPORT errno_t
memmove_s(void *dest, size_t destMax, const void *src, size_t count)
{
	return (sim_securec_copy(dest, destMax, src, count, 1));
}

/* Append the first n bytes of src at dest + at, in a buffer of destMax. */
static errno_t
sim_securec_put(char *dest, size_t destMax, size_t at, const char *src,
    size_t n)
{
	if (at + n >= destMax) {
		dest[0] = '\0';
		return (ERANGE_AND_RESET);
	}
	if (dest + at != src &&
	    sim_securec_overlap(dest, at + n + 1, src, n + 1)) {
		dest[0] = '\0';
		return (EOVERLAP_AND_RESET);
	}
	memmove(dest + at, src, n);
	dest[at + n] = '\0';
	return (EOK);
}

SIM_EXPORT errno_t
strcpy_s(char *strDest, size_t destMax, const char *strSrc)
{
	SIM_SECUREC_DEST(strDest, destMax, SECUREC_STRING_MAX_LEN);
	if (strSrc == NULL) {
		strDest[0] = '\0';
		return (EINVAL_AND_RESET);
	}
	if (strDest == strSrc)
		return (strnlen(strSrc, destMax) < destMax ? EOK :
		    ERANGE_AND_RESET);
	return (sim_securec_put(strDest, destMax, 0, strSrc,
	    strnlen(strSrc, destMax)));
}

SIM_EXPORT errno_t
strncpy_s(char *strDest, size_t destMax, const char *strSrc, size_t count)
{
	SIM_SECUREC_DEST(strDest, destMax, SECUREC_STRING_MAX_LEN);
	if (strSrc == NULL) {
		strDest[0] = '\0';
		return (EINVAL_AND_RESET);
	}
	if (count > SECUREC_STRING_MAX_LEN) {
		strDest[0] = '\0';
		return (ERANGE_AND_RESET);
	}
	return (sim_securec_put(strDest, destMax, 0, strSrc,
	    strnlen(strSrc, count < destMax ? count : destMax)));
}

static errno_t
sim_securec_cat(char *strDest, size_t destMax, const char *strSrc,
    size_t count)
{
	size_t	at;

	SIM_SECUREC_DEST(strDest, destMax, SECUREC_STRING_MAX_LEN);
	if (strSrc == NULL) {
		strDest[0] = '\0';
		return (EINVAL_AND_RESET);
	}
	if (count > SECUREC_STRING_MAX_LEN) {
		strDest[0] = '\0';
		return (ERANGE_AND_RESET);
	}
	if ((at = strnlen(strDest, destMax)) == destMax) {
		strDest[0] = '\0';
		return (EINVAL_AND_RESET);	/* dest not terminated */
	}
	/* Reading one byte past the room left tells it will not fit. */
	if (count > destMax - at)
		count = destMax - at;
	return (sim_securec_put(strDest, destMax, at, strSrc,
	    strnlen(strSrc, count)));
}

SIM_EXPORT errno_t
strcat_s(char *strDest, size_t destMax, const char *strSrc)
{
	return (sim_securec_cat(strDest, destMax, strSrc,
	    SECUREC_STRING_MAX_LEN));
}

SIM_EXPORT errno_t
strncat_s(char *strDest, size_t destMax, const char *strSrc, size_t count)
{
	return (sim_securec_cat(strDest, destMax, strSrc, count));
}

SIM_EXPORT int
vsnprintf_s(char *strDest, size_t destMax, size_t count, const char *format,
    va_list argList)
{
	int	n;

	if (strDest == NULL || destMax == 0 || destMax > SECUREC_STRING_MAX_LEN)
		return (-1);
	if (format == NULL || count > SECUREC_STRING_MAX_LEN) {
		strDest[0] = '\0';
		return (-1);
	}
	if (count < destMax) {
		/* Truncation to count is allowed but reported. */
		n = vsnprintf(strDest, count + 1, format, argList);
		if (n < 0) {
			strDest[0] = '\0';
			return (-1);
		}
		return ((size_t)n > count ? -1 : n);
	}
	n = vsnprintf(strDest, destMax, format, argList);
	if (n < 0 || (size_t)n >= destMax) {
		strDest[0] = '\0';
		return (-1);
	}
	return (n);
}

SIM_EXPORT int
snprintf_s(char *strDest, size_t destMax, size_t count, const char *format,
    ...)
{
	va_list	ap;
	int	n;

	va_start(ap, format);
	n = vsnprintf_s(strDest, destMax, count, format, ap);
	va_end(ap);
	return (n);
}

SIM_EXPORT int
vsprintf_s(char *strDest, size_t destMax, const char *format, va_list argList)
{
	/* count == destMax: the whole text must fit, never truncated. */
	return (vsnprintf_s(strDest, destMax, destMax, format, argList));
}

SIM_EXPORT int
sprintf_s(char *strDest, size_t destMax, const char *format, ...)
{
	va_list	ap;
	int	n;

	va_start(ap, format);
	n = vsprintf_s(strDest, destMax, format, ap);
	va_end(ap);
	return (n);
}
