/*
 * securec.h - bounds-checked memory and string functions, the simulated
 * NPU SDK's own small implementation (libnpusim, also answering as
 * libc_sec) of the interface CANN programs include.
 *
 * Every function takes the destination's capacity (destMax, in bytes,
 * including the terminating NUL for strings).  Return values:
 *   EOK                 success
 *   ERANGE              destMax is 0 or above SECUREC_MEM_MAX_LEN
 *                       (nothing written)
 *   EINVAL              dest is NULL (nothing written)
 *   EINVAL_AND_RESET    src is NULL, or strcat's dest is not terminated
 *   ERANGE_AND_RESET    the result does not fit in destMax
 *   EOVERLAP_AND_RESET  source and destination overlap (memcpy_s, str*)
 * The *_AND_RESET errors leave the destination reset: zeroed (memcpy_s,
 * memmove_s), filled with c up to destMax (memset_s), or an empty string.
 * The printf family returns the length written, or -1 (destination an
 * empty string) if it does not fit; snprintf_s returns -1 too when it
 * truncated to count, keeping the truncated text.
 */
#ifndef SECUREC_H_NPUSIM
#define SECUREC_H_NPUSIM

/* As CANN's securec.h does: programs get memcpy, malloc and printf from
 * it without including their headers. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef SECUREC_DEFINED_ERRNO_TYPE
#define SECUREC_DEFINED_ERRNO_TYPE
typedef int errno_t;
#endif

#ifndef EOK
#define EOK			0
#endif
#ifndef EINVAL_AND_RESET
#define EINVAL_AND_RESET	(22 | 128)
#endif
#ifndef ERANGE_AND_RESET
#define ERANGE_AND_RESET	(34 | 128)
#endif
#ifndef EOVERLAP_AND_RESET
#define EOVERLAP_AND_RESET	(54 | 128)
#endif

#define SECUREC_MEM_MAX_LEN	0x7fffffffUL
#define SECUREC_STRING_MAX_LEN	0x7fffffffUL

#ifndef SECUREC_API
#define SECUREC_API __attribute__((visibility("default")))
#endif

SECUREC_API errno_t memset_s(void *dest, size_t destMax, int c, size_t count);
SECUREC_API errno_t memcpy_s(void *dest, size_t destMax, const void *src,
    size_t count);
SECUREC_API errno_t memmove_s(void *dest, size_t destMax, const void *src,
    size_t count);
SECUREC_API errno_t strcpy_s(char *strDest, size_t destMax,
    const char *strSrc);
SECUREC_API errno_t strncpy_s(char *strDest, size_t destMax,
    const char *strSrc, size_t count);
SECUREC_API errno_t strcat_s(char *strDest, size_t destMax,
    const char *strSrc);
SECUREC_API errno_t strncat_s(char *strDest, size_t destMax,
    const char *strSrc, size_t count);
SECUREC_API int sprintf_s(char *strDest, size_t destMax, const char *format,
    ...) __attribute__((format(printf, 3, 4)));
SECUREC_API int vsprintf_s(char *strDest, size_t destMax, const char *format,
    va_list argList) __attribute__((format(printf, 3, 0)));
SECUREC_API int snprintf_s(char *strDest, size_t destMax, size_t count,
    const char *format, ...) __attribute__((format(printf, 4, 5)));
SECUREC_API int vsnprintf_s(char *strDest, size_t destMax, size_t count,
    const char *format, va_list argList) __attribute__((format(printf, 4, 0)));

#ifdef __cplusplus
}
#endif

#endif /* SECUREC_H_NPUSIM */
