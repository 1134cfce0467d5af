/*
 * A caller built against the header before the inline check: compiled with
 * MSTX_NO_INLINE, so every MSTX call is a call of the exported function.
 */
#include "config.h"

#include <stddef.h>

#define MSTX_NO_INLINE 1
#include "mstx/ms_tools_ext.h"

void	old_header_mark(const char *message);
void	old_header_range(const char *message);

void
old_header_mark(const char *message)
{
	mstxMarkA(message, NULL);
}

void
old_header_range(const char *message)
{
	mstxRangeEnd(mstxRangeStartA(message, NULL));
}
