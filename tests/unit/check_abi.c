/*
 * The msPTI ABI: every record's size, every field's offset and size, and
 * every enum value, as MSPTI.md lists them.  A header edit that moves a
 * field fails here.
 */
#include "config.h"

#include <check.h>
#include <stddef.h>
#include <stdlib.h>

#include "mspti/mspti.h"
#include "mstx/ms_tools_ext.h"
/* The ACL header after MSTX: the repeated aclrtStream typedef must compile. */
#include <acl/acl.h>

#define OFF(T, f, o)	ck_assert_msg(offsetof(T, f) == (o), #T "." #f " at %zu, want %d", offsetof(T, f), (o))
#define FSZ(T, f, s)	ck_assert_msg(sizeof(((T *)0)->f) == (s), #T "." #f " is %zu bytes, want %d", sizeof(((T *)0)->f), (s))
#define SZ(T, s)	ck_assert_msg(sizeof(T) == (s), "sizeof " #T " is %zu, want %d", sizeof(T), (s))
#define EQ(a, b)	ck_assert_msg((long long)(a) == (long long)(b), #a " is %lld, want %lld", (long long)(a), (long long)(b))

START_TEST(test_records)
{
	SZ(msptiActivity, 8);
	OFF(msptiActivity, kind, 0);
	FSZ(msptiActivity, kind, 4);
	SZ(msptiActivityMarker, 56);
	OFF(msptiActivityMarker, kind, 0);
	FSZ(msptiActivityMarker, kind, 4);
	OFF(msptiActivityMarker, flag, 4);
	FSZ(msptiActivityMarker, flag, 4);
	OFF(msptiActivityMarker, sourceKind, 8);
	FSZ(msptiActivityMarker, sourceKind, 4);
	OFF(msptiActivityMarker, timestamp, 12);
	FSZ(msptiActivityMarker, timestamp, 8);
	OFF(msptiActivityMarker, id, 20);
	FSZ(msptiActivityMarker, id, 8);
	OFF(msptiActivityMarker, objectId, 28);
	FSZ(msptiActivityMarker, objectId, 8);
	OFF(msptiActivityMarker, name, 36);
	FSZ(msptiActivityMarker, name, 8);
	OFF(msptiActivityMarker, domain, 44);
	FSZ(msptiActivityMarker, domain, 8);
	SZ(msptiActivityApi, 48);
	OFF(msptiActivityApi, kind, 0);
	FSZ(msptiActivityApi, kind, 4);
	OFF(msptiActivityApi, start, 4);
	FSZ(msptiActivityApi, start, 8);
	OFF(msptiActivityApi, end, 12);
	FSZ(msptiActivityApi, end, 8);
	OFF(msptiActivityApi, pt, 20);
	FSZ(msptiActivityApi, pt, 8);
	OFF(msptiActivityApi, pt.processId, 20);
	FSZ(msptiActivityApi, pt.processId, 4);
	OFF(msptiActivityApi, pt.threadId, 24);
	OFF(msptiActivityApi, correlationId, 28);
	FSZ(msptiActivityApi, correlationId, 8);
	OFF(msptiActivityApi, name, 36);
	FSZ(msptiActivityApi, name, 8);
	SZ(msptiActivityKernel, 56);
	OFF(msptiActivityKernel, kind, 0);
	FSZ(msptiActivityKernel, kind, 4);
	OFF(msptiActivityKernel, start, 4);
	FSZ(msptiActivityKernel, start, 8);
	OFF(msptiActivityKernel, end, 12);
	FSZ(msptiActivityKernel, end, 8);
	OFF(msptiActivityKernel, ds, 20);
	FSZ(msptiActivityKernel, ds, 8);
	OFF(msptiActivityKernel, ds.deviceId, 20);
	FSZ(msptiActivityKernel, ds.deviceId, 4);
	OFF(msptiActivityKernel, ds.streamId, 24);
	FSZ(msptiActivityKernel, ds.streamId, 4);
	OFF(msptiActivityKernel, correlationId, 28);
	FSZ(msptiActivityKernel, correlationId, 8);
	OFF(msptiActivityKernel, type, 36);
	FSZ(msptiActivityKernel, type, 8);
	OFF(msptiActivityKernel, name, 44);
	FSZ(msptiActivityKernel, name, 8);
	SZ(msptiActivityHccl, 56);
	OFF(msptiActivityHccl, kind, 0);
	FSZ(msptiActivityHccl, kind, 4);
	OFF(msptiActivityHccl, start, 4);
	FSZ(msptiActivityHccl, start, 8);
	OFF(msptiActivityHccl, end, 12);
	FSZ(msptiActivityHccl, end, 8);
	OFF(msptiActivityHccl, ds, 20);
	FSZ(msptiActivityHccl, ds, 8);
	OFF(msptiActivityHccl, ds.deviceId, 20);
	FSZ(msptiActivityHccl, ds.deviceId, 4);
	OFF(msptiActivityHccl, ds.streamId, 24);
	FSZ(msptiActivityHccl, ds.streamId, 4);
	OFF(msptiActivityHccl, bandWidth, 28);
	FSZ(msptiActivityHccl, bandWidth, 8);
	OFF(msptiActivityHccl, name, 36);
	FSZ(msptiActivityHccl, name, 8);
	OFF(msptiActivityHccl, commName, 44);
	FSZ(msptiActivityHccl, commName, 8);
	SZ(msptiActivityMemory, 64);
	OFF(msptiActivityMemory, kind, 0);
	FSZ(msptiActivityMemory, kind, 4);
	OFF(msptiActivityMemory, memoryOperationType, 4);
	FSZ(msptiActivityMemory, memoryOperationType, 4);
	OFF(msptiActivityMemory, memoryKind, 8);
	FSZ(msptiActivityMemory, memoryKind, 4);
	OFF(msptiActivityMemory, correlationId, 12);
	FSZ(msptiActivityMemory, correlationId, 8);
	OFF(msptiActivityMemory, start, 20);
	FSZ(msptiActivityMemory, start, 8);
	OFF(msptiActivityMemory, end, 28);
	FSZ(msptiActivityMemory, end, 8);
	OFF(msptiActivityMemory, address, 36);
	FSZ(msptiActivityMemory, address, 8);
	OFF(msptiActivityMemory, bytes, 44);
	FSZ(msptiActivityMemory, bytes, 8);
	OFF(msptiActivityMemory, processId, 52);
	FSZ(msptiActivityMemory, processId, 4);
	OFF(msptiActivityMemory, deviceId, 56);
	FSZ(msptiActivityMemory, deviceId, 4);
	OFF(msptiActivityMemory, streamId, 60);
	FSZ(msptiActivityMemory, streamId, 4);
	SZ(msptiActivityMemset, 56);
	OFF(msptiActivityMemset, kind, 0);
	FSZ(msptiActivityMemset, kind, 4);
	OFF(msptiActivityMemset, value, 4);
	FSZ(msptiActivityMemset, value, 4);
	OFF(msptiActivityMemset, bytes, 8);
	FSZ(msptiActivityMemset, bytes, 8);
	OFF(msptiActivityMemset, start, 16);
	FSZ(msptiActivityMemset, start, 8);
	OFF(msptiActivityMemset, end, 24);
	FSZ(msptiActivityMemset, end, 8);
	OFF(msptiActivityMemset, deviceId, 32);
	FSZ(msptiActivityMemset, deviceId, 4);
	OFF(msptiActivityMemset, streamId, 36);
	FSZ(msptiActivityMemset, streamId, 4);
	OFF(msptiActivityMemset, correlationId, 40);
	FSZ(msptiActivityMemset, correlationId, 8);
	OFF(msptiActivityMemset, isAsync, 48);
	FSZ(msptiActivityMemset, isAsync, 1);
	SZ(msptiActivityMemcpy, 56);
	OFF(msptiActivityMemcpy, kind, 0);
	FSZ(msptiActivityMemcpy, kind, 4);
	OFF(msptiActivityMemcpy, copyKind, 4);
	FSZ(msptiActivityMemcpy, copyKind, 4);
	OFF(msptiActivityMemcpy, bytes, 8);
	FSZ(msptiActivityMemcpy, bytes, 8);
	OFF(msptiActivityMemcpy, start, 16);
	FSZ(msptiActivityMemcpy, start, 8);
	OFF(msptiActivityMemcpy, end, 24);
	FSZ(msptiActivityMemcpy, end, 8);
	OFF(msptiActivityMemcpy, deviceId, 32);
	FSZ(msptiActivityMemcpy, deviceId, 4);
	OFF(msptiActivityMemcpy, streamId, 36);
	FSZ(msptiActivityMemcpy, streamId, 4);
	OFF(msptiActivityMemcpy, correlationId, 40);
	FSZ(msptiActivityMemcpy, correlationId, 8);
	OFF(msptiActivityMemcpy, isAsync, 48);
	FSZ(msptiActivityMemcpy, isAsync, 1);
	SZ(msptiActivityExternalCorrelation, 24);
	OFF(msptiActivityExternalCorrelation, kind, 0);
	FSZ(msptiActivityExternalCorrelation, kind, 4);
	OFF(msptiActivityExternalCorrelation, externalKind, 4);
	FSZ(msptiActivityExternalCorrelation, externalKind, 4);
	OFF(msptiActivityExternalCorrelation, externalId, 8);
	FSZ(msptiActivityExternalCorrelation, externalId, 8);
	OFF(msptiActivityExternalCorrelation, correlationId, 16);
	FSZ(msptiActivityExternalCorrelation, correlationId, 8);
	SZ(msptiActivityCommunication, 72);
	OFF(msptiActivityCommunication, kind, 0);
	FSZ(msptiActivityCommunication, kind, 4);
	OFF(msptiActivityCommunication, dataType, 4);
	FSZ(msptiActivityCommunication, dataType, 4);
	OFF(msptiActivityCommunication, count, 8);
	FSZ(msptiActivityCommunication, count, 8);
	OFF(msptiActivityCommunication, ds, 16);
	FSZ(msptiActivityCommunication, ds, 8);
	OFF(msptiActivityCommunication, ds.deviceId, 16);
	FSZ(msptiActivityCommunication, ds.deviceId, 4);
	OFF(msptiActivityCommunication, ds.streamId, 20);
	FSZ(msptiActivityCommunication, ds.streamId, 4);
	OFF(msptiActivityCommunication, start, 24);
	FSZ(msptiActivityCommunication, start, 8);
	OFF(msptiActivityCommunication, end, 32);
	FSZ(msptiActivityCommunication, end, 8);
	OFF(msptiActivityCommunication, algType, 40);
	FSZ(msptiActivityCommunication, algType, 8);
	OFF(msptiActivityCommunication, name, 48);
	FSZ(msptiActivityCommunication, name, 8);
	OFF(msptiActivityCommunication, commName, 56);
	FSZ(msptiActivityCommunication, commName, 8);
	OFF(msptiActivityCommunication, correlationId, 64);
	FSZ(msptiActivityCommunication, correlationId, 8);
	SZ(msptiCallbackData, 72);
	OFF(msptiCallbackData, callbackSite, 0);
	FSZ(msptiCallbackData, callbackSite, 4);
	OFF(msptiCallbackData, functionName, 8);
	FSZ(msptiCallbackData, functionName, 8);
	OFF(msptiCallbackData, functionParams, 16);
	FSZ(msptiCallbackData, functionParams, 8);
	OFF(msptiCallbackData, functionReturnValue, 24);
	FSZ(msptiCallbackData, functionReturnValue, 8);
	OFF(msptiCallbackData, symbolName, 32);
	FSZ(msptiCallbackData, symbolName, 8);
	OFF(msptiCallbackData, correlationId, 40);
	FSZ(msptiCallbackData, correlationId, 8);
	OFF(msptiCallbackData, reserved1, 48);
	FSZ(msptiCallbackData, reserved1, 8);
	OFF(msptiCallbackData, reserved2, 56);
	FSZ(msptiCallbackData, reserved2, 8);
	OFF(msptiCallbackData, correlationData, 64);
	FSZ(msptiCallbackData, correlationData, 8);
	SZ(msptiObjectId, 8);
	OFF(msptiObjectId, pt.processId, 0);
	OFF(msptiObjectId, pt.threadId, 4);
	OFF(msptiObjectId, ds.deviceId, 0);
	OFF(msptiObjectId, ds.streamId, 4);
	/* Every record size is a multiple of 8 and its alignment is 8. */
	ck_assert_int_eq(_Alignof(msptiActivityMarker), 8);
	ck_assert_int_eq(_Alignof(msptiActivityCommunication), 8);
}
END_TEST

START_TEST(test_enums)
{
	EQ(MSPTI_SUCCESS, 0);
	EQ(MSPTI_ERROR_INVALID_PARAMETER, 1);
	EQ(MSPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, 2);
	EQ(MSPTI_ERROR_MAX_LIMIT_REACHED, 3);
	EQ(MSPTI_ERROR_DEVICE_OFFLINE, 4);
	EQ(MSPTI_ERROR_QUEUE_EMPTY, 5);
	EQ(MSPTI_ERROR_WITHOUT_LD_PRELOAD, 6);
	EQ(MSPTI_ERROR_INNER, 999);
	EQ(MSPTI_ERROR_FORCE_INT, 0x7fffffff);
	EQ(MSPTI_ACTIVITY_KIND_INVALID, 0);
	EQ(MSPTI_ACTIVITY_KIND_MARKER, 1);
	EQ(MSPTI_ACTIVITY_KIND_KERNEL, 2);
	EQ(MSPTI_ACTIVITY_KIND_API, 3);
	EQ(MSPTI_ACTIVITY_KIND_HCCL, 4);
	EQ(MSPTI_ACTIVITY_KIND_MEMORY, 5);
	EQ(MSPTI_ACTIVITY_KIND_MEMSET, 6);
	EQ(MSPTI_ACTIVITY_KIND_MEMCPY, 7);
	EQ(MSPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, 8);
	EQ(MSPTI_ACTIVITY_KIND_COMMUNICATION, 9);
	EQ(MSPTI_ACTIVITY_KIND_ACL_API, 10);
	EQ(MSPTI_ACTIVITY_KIND_NODE_API, 11);
	EQ(MSPTI_ACTIVITY_KIND_RUNTIME_API, 12);
	EQ(MSPTI_ACTIVITY_KIND_COUNT, 13);
	EQ(MSPTI_ACTIVITY_SOURCE_KIND_HOST, 0);
	EQ(MSPTI_ACTIVITY_SOURCE_KIND_DEVICE, 1);
	EQ(MSPTI_EXTERNAL_CORRELATION_KIND_INVALID, 0);
	EQ(MSPTI_EXTERNAL_CORRELATION_KIND_UNKNOWN, 1);
	EQ(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, 2);
	EQ(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, 3);
	EQ(MSPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, 4);
	EQ(MSPTI_EXTERNAL_CORRELATION_KIND_SIZE, 5);
	EQ(MSPTI_ACTIVITY_FLAG_NONE, 0);
	EQ(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 1);
	EQ(MSPTI_ACTIVITY_FLAG_MARKER_START, 2);
	EQ(MSPTI_ACTIVITY_FLAG_MARKER_END, 4);
	EQ(MSPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS_WITH_DEVICE, 8);
	EQ(MSPTI_ACTIVITY_FLAG_MARKER_START_WITH_DEVICE, 16);
	EQ(MSPTI_ACTIVITY_FLAG_MARKER_END_WITH_DEVICE, 32);
	EQ(MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0);
	EQ(MSPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 1);
	EQ(MSPTI_ACTIVITY_MEMORY_UNKNOWN, 0);
	EQ(MSPTI_ACTIVITY_MEMORY_DEVICE, 1);
	EQ(MSPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN, 0);
	EQ(MSPTI_ACTIVITY_MEMCPY_KIND_HTOH, 1);
	EQ(MSPTI_ACTIVITY_MEMCPY_KIND_HTOD, 2);
	EQ(MSPTI_ACTIVITY_MEMCPY_KIND_DTOH, 3);
	EQ(MSPTI_ACTIVITY_MEMCPY_KIND_DTOD, 4);
	EQ(MSPTI_ACTIVITY_MEMCPY_KIND_DEFAULT, 5);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_INT8, 0);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_INT16, 1);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_INT32, 2);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_FP16, 3);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_FP32, 4);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_INT64, 5);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_UINT64, 6);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_UINT8, 7);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_UINT16, 8);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_UINT32, 9);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_FP64, 10);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_BFP16, 11);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_INT128, 12);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_HIF8, 14);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_FP8E4M3, 15);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_FP8E5M2, 16);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_FP8E8M0, 17);
	EQ(MSPTI_ACTIVITY_COMMUNICATION_INVALID_TYPE, 0xFFFF);
	EQ(MSPTI_CB_DOMAIN_INVALID, 0);
	EQ(MSPTI_CB_DOMAIN_RUNTIME, 1);
	EQ(MSPTI_CB_DOMAIN_HCCL, 2);
	EQ(MSPTI_CB_DOMAIN_SIZE, 3);
	EQ(MSPTI_API_ENTER, 0);
	EQ(MSPTI_API_EXIT, 1);
	EQ(MSPTI_INVALID_DEVICE_ID, 0xFFFFFFFFu);
	EQ(MSPTI_INVALID_STREAM_ID, 0xFFFFFFFFu);
	EQ(MSPTI_INVALID_CORRELATION_ID, 0);
	EQ(MSPTI_CBID_RUNTIME_INVALID, 0);
	EQ(MSPTI_CBID_RUNTIME_DEVICE_SET, 1);
	EQ(MSPTI_CBID_RUNTIME_DEVICE_RESET, 2);
	EQ(MSPTI_CBID_RUNTIME_DEVICE_SET_EX, 3);
	EQ(MSPTI_CBID_RUNTIME_CONTEXT_CREATED_EX, 4);
	EQ(MSPTI_CBID_RUNTIME_CONTEXT_CREATED, 5);
	EQ(MSPTI_CBID_RUNTIME_CONTEXT_DESTROY, 6);
	EQ(MSPTI_CBID_RUNTIME_STREAM_CREATED, 7);
	EQ(MSPTI_CBID_RUNTIME_STREAM_DESTROY, 8);
	EQ(MSPTI_CBID_RUNTIME_STREAM_SYNCHRONIZED, 9);
	EQ(MSPTI_CBID_RUNTIME_LAUNCH, 10);
	EQ(MSPTI_CBID_RUNTIME_CPU_LAUNCH, 11);
	EQ(MSPTI_CBID_RUNTIME_AICPU_LAUNCH, 12);
	EQ(MSPTI_CBID_RUNTIME_AIV_LAUNCH, 13);
	EQ(MSPTI_CBID_RUNTIME_FFTS_LAUNCH, 14);
	EQ(MSPTI_CBID_RUNTIME_MALLOC, 15);
	EQ(MSPTI_CBID_RUNTIME_FREE, 16);
	EQ(MSPTI_CBID_RUNTIME_MALLOC_HOST, 17);
	EQ(MSPTI_CBID_RUNTIME_FREE_HOST, 18);
	EQ(MSPTI_CBID_RUNTIME_MALLOC_CACHED, 19);
	EQ(MSPTI_CBID_RUNTIME_FLUSH_CACHE, 20);
	EQ(MSPTI_CBID_RUNTIME_INVALID_CACHE, 21);
	EQ(MSPTI_CBID_RUNTIME_MEMCPY, 22);
	EQ(MSPTI_CBID_RUNTIME_MEMCPY_HOST, 23);
	EQ(MSPTI_CBID_RUNTIME_MEMCPY_ASYNC, 24);
	EQ(MSPTI_CBID_RUNTIME_MEM_CPY2D, 25);
	EQ(MSPTI_CBID_RUNTIME_MEM_CPY2D_ASYNC, 26);
	EQ(MSPTI_CBID_RUNTIME_MEM_SET, 27);
	EQ(MSPTI_CBID_RUNTIME_MEM_SET_ASYNC, 28);
	EQ(MSPTI_CBID_RUNTIME_MEM_GET_INFO, 29);
	EQ(MSPTI_CBID_RUNTIME_RESERVE_MEM_ADDRESS, 30);
	EQ(MSPTI_CBID_RUNTIME_RELEASE_MEM_ADDRESS, 31);
	EQ(MSPTI_CBID_RUNTIME_MALLOC_PHYSICAL, 32);
	EQ(MSPTI_CBID_RUNTIME_FREE_PHYSICAL, 33);
	EQ(MSPTI_CBID_RUNTIME_MEM_EXPORT_TO_SHAREABLE_HANDLE, 34);
	EQ(MSPTI_CBID_RUNTIME_MEM_IMPORT_FROM_SHAREABLE_HANDLE, 35);
	EQ(MSPTI_CBID_RUNTIME_MEM_SET_PID_TO_SHAREABLE_HANDLE, 36);
	EQ(MSPTI_CBID_RUNTIME_SIZE, 37);
	EQ(MSPTI_CBID_HCCL_INVALID, 0);
	EQ(MSPTI_CBID_HCCL_ALLREDUCE, 1);
	EQ(MSPTI_CBID_HCCL_BROADCAST, 2);
	EQ(MSPTI_CBID_HCCL_ALLGATHER, 3);
	EQ(MSPTI_CBID_HCCL_REDUCE_SCATTER, 4);
	EQ(MSPTI_CBID_HCCL_REDUCE, 5);
	EQ(MSPTI_CBID_HCCL_ALL_TO_ALL, 6);
	EQ(MSPTI_CBID_HCCL_ALL_TO_ALLV, 7);
	EQ(MSPTI_CBID_HCCL_BARRIER, 8);
	EQ(MSPTI_CBID_HCCL_SCATTER, 9);
	EQ(MSPTI_CBID_HCCL_SEND, 10);
	EQ(MSPTI_CBID_HCCL_RECV, 11);
	EQ(MSPTI_CBID_HCCL_SENDRECV, 12);
	EQ(MSPTI_CBID_HCCL_SIZE, 13);
	/* All enums are int-sized. */
	ck_assert_int_eq(sizeof(msptiResult), 4);
	ck_assert_int_eq(sizeof(msptiActivityKind), 4);
	ck_assert_int_eq(sizeof(msptiActivityFlag), 4);
	ck_assert_int_eq(sizeof(msptiCommunicationDataType), 4);
	ck_assert_int_eq(sizeof(msptiCallbackDomain), 4);
	ck_assert_int_eq(sizeof(msptiCallbackId), 4);
	ck_assert_int_eq(sizeof(mstxRangeId), 8);
	ck_assert_int_eq(sizeof(aclrtStream), sizeof(void *));
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("abi");
	TCase *tc = tcase_create("abi");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_records);
	tcase_add_test(tc, test_enums);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
