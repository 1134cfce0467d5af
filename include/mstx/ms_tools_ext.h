/**
 * @file ms_tools_ext.h
 * @brief MSTX: marks, ranges and domains an application annotates itself with.
 *
 * The functions are implemented in libmspti.so.  A mark or range becomes an
 * msPTI MARKER activity record when MSPTI_ACTIVITY_KIND_MARKER is enabled,
 * the message is non-NULL and shorter than 255 bytes, and the domain is
 * enabled.  With a non-NULL stream, a second record with source DEVICE is
 * emitted when the device reaches that point of the stream.
 */
#ifndef MS_TOOLS_EXT_H
#define MS_TOOLS_EXT_H

#include <stdint.h>

#ifndef MSTX_API
#if defined(__GNUC__) || defined(__clang__)
/** Marks a function as part of the exported MSTX ABI. */
#define MSTX_API __attribute__((visibility("default")))
#else
#define MSTX_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * aclrtStream comes from the ACL headers when they are included first; else
 * it is declared here (the same type, so a later ACL header still compiles:
 * C11 and C++ allow repeating a typedef of the same type).
 */
#if !defined(ACL_ACL_H) && !defined(INC_EXTERNAL_ACL_ACL_BASE_H_) && \
    !defined(MSTX_ACLRT_STREAM_DEFINED)
#define MSTX_ACLRT_STREAM_DEFINED 1
/** A device stream; NULL means "no device record" for MSTX calls. */
typedef void *aclrtStream;
#endif

/** Range id; 0 means failure (nothing recorded). */
typedef uint64_t mstxRangeId;

/** Opaque domain. */
struct mstxDomainRegistration_st;
/** Opaque domain type. */
typedef struct mstxDomainRegistration_st mstxDomainRegistration_t;
/** Handle of a domain created by mstxDomainCreateA. */
typedef mstxDomainRegistration_t *mstxDomainHandle_t;

/**
 * @brief An instantaneous mark in the default domain.
 * @param message text (< 255 bytes), copied.
 * @param stream if not NULL, also mark when the device reaches this point.
 */
MSTX_API void mstxMarkA(const char *message, aclrtStream stream);

/**
 * @brief Starts a range in the default domain.
 * @return the range id, or 0 when nothing is recorded.
 */
MSTX_API mstxRangeId mstxRangeStartA(const char *message, aclrtStream stream);

/** @brief Ends a range started by mstxRangeStartA (0 is ignored). */
MSTX_API void mstxRangeEnd(mstxRangeId id);

/**
 * @brief Creates (or returns the existing) domain called name.
 * @return the handle, NULL on a NULL or too long name.
 */
MSTX_API mstxDomainHandle_t mstxDomainCreateA(const char *name);

/** @brief Destroys a domain handle (its name keeps its enabled state). */
MSTX_API void mstxDomainDestroy(mstxDomainHandle_t domain);

/** @brief An instantaneous mark in domain. */
MSTX_API void mstxDomainMarkA(mstxDomainHandle_t domain, const char *message,
    aclrtStream stream);

/** @brief Starts a range in domain; 0 when nothing is recorded. */
MSTX_API mstxRangeId mstxDomainRangeStartA(mstxDomainHandle_t domain,
    const char *message, aclrtStream stream);

/** @brief Ends a range of domain. */
MSTX_API void mstxDomainRangeEnd(mstxDomainHandle_t domain, mstxRangeId id);

/*
 * The disabled check, inline in the caller (as LTTng-UST's tracepoints do):
 * with MSTX off, a mark or range call costs one load and a branch, not a
 * call into libmspti.so.  mstxEnabledState has bit 0 set while every call
 * must come in (libmspti.so records markers: MSPTI_ACTIVITY_KIND_MARKER
 * enabled, or a capture session with the marker kind), and bit 1 while
 * range starts must (msptid counts the process's steps, capturing or
 * not), with bits 8-15 the first byte of the step range's name (only such
 * range starts come in; 0: all do); the functions check again, so a stale read only costs a call, or
 * skips one that would have recorded nothing.  A program built against an
 * older header calls in whenever it is nonzero, which is also right.  The
 * functions stay exported: programs built against a
 * header without this, function pointers and dlsym keep working.  Define
 * MSTX_NO_INLINE before including this header to call the functions
 * directly (e.g. against an MSTX library that has no mstxEnabledState).
 */
#if !defined(MSTX_NO_INLINE) && (defined(__GNUC__) || defined(__clang__))
/** Nonzero while markers are recorded; written by libmspti.so only. */
extern MSTX_API const volatile uint32_t mstxEnabledState;

#define MSTX_INLINE_ static inline __attribute__((always_inline, unused))
/* Every call comes in (bit 0); range starts come in (any bit), those
 * counted as steps only by their first byte (bits 8-15) under bit 1. */
#define MSTX_ON_ __builtin_expect((mstxEnabledState & 1u) != 0, 0)

MSTX_INLINE_ int
mstxInlineStartOn_(const char *message)
{
	uint32_t st = mstxEnabledState, c = (st >> 8) & 0xffu;

	return __builtin_expect(st != 0, 0) && ((st & 1u) != 0 ||
	    !message || c == 0 || (unsigned char)message[0] == c);
}

MSTX_INLINE_ void
mstxInlineMarkA_(const char *message, aclrtStream stream)
{
	if (MSTX_ON_)
		(mstxMarkA)(message, stream);
}

MSTX_INLINE_ mstxRangeId
mstxInlineRangeStartA_(const char *message, aclrtStream stream)
{
	return mstxInlineStartOn_(message) ?
	    (mstxRangeStartA)(message, stream) : 0;
}

MSTX_INLINE_ void
mstxInlineRangeEnd_(mstxRangeId id)
{
	if (MSTX_ON_)
		(mstxRangeEnd)(id);
}

MSTX_INLINE_ void
mstxInlineDomainMarkA_(mstxDomainHandle_t domain, const char *message,
    aclrtStream stream)
{
	if (MSTX_ON_)
		(mstxDomainMarkA)(domain, message, stream);
}

MSTX_INLINE_ mstxRangeId
mstxInlineDomainRangeStartA_(mstxDomainHandle_t domain, const char *message,
    aclrtStream stream)
{
	return mstxInlineStartOn_(message) ?
	    (mstxDomainRangeStartA)(domain, message, stream) : 0;
}

MSTX_INLINE_ void
mstxInlineDomainRangeEnd_(mstxDomainHandle_t domain, mstxRangeId id)
{
	if (MSTX_ON_)
		(mstxDomainRangeEnd)(domain, id);
}

/* Function-like: mstxMarkA without arguments is still the function. */
#define mstxMarkA(m, s)			mstxInlineMarkA_((m), (s))
#define mstxRangeStartA(m, s)		mstxInlineRangeStartA_((m), (s))
#define mstxRangeEnd(id)		mstxInlineRangeEnd_((id))
#define mstxDomainMarkA(d, m, s)	mstxInlineDomainMarkA_((d), (m), (s))
#define mstxDomainRangeStartA(d, m, s) \
	mstxInlineDomainRangeStartA_((d), (m), (s))
#define mstxDomainRangeEnd(d, id)	mstxInlineDomainRangeEnd_((d), (id))
#endif

#ifdef __cplusplus
}
#endif

#endif /* MS_TOOLS_EXT_H */
