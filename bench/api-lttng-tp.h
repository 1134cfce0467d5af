/* LTTng-UST tracepoint provider for bench/api-lttng.sh (not built by make). */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER mspti_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./api-lttng-tp.h"

#if !defined(API_LTTNG_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define API_LTTNG_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(mspti_bench, mark,
    LTTNG_UST_TP_ARGS(const char *, msg),
    LTTNG_UST_TP_FIELDS(lttng_ust_field_string(msg, msg)))

#endif

#include <lttng/tracepoint-event.h>
