/**
 * @file mspti.h
 * @brief msPTI, the MindStudio Profiling Tools Interface: the one header to include.
 *
 * Activity API (mspti_activity.h): asynchronous records delivered in
 * user-supplied buffers.  Callback API (mspti_callback.h): synchronous
 * callbacks around runtime and HCCL calls.
 */
#ifndef MSPTI_H
#define MSPTI_H

#include "mspti_result.h"
#include "mspti_cbid.h"
#include "mspti_activity.h"
#include "mspti_callback.h"

#endif /* MSPTI_H */
