/*
 * HCCL interposers: API records, HCCL-domain callbacks, and the pending
 * join that turns the collective's device task into HCCL and
 * COMMUNICATION records (devtime.c).  functionParams points at a struct
 * <function>_params of the call's arguments, in order.
 */
#include "config.h"

#include <string.h>

#include <hccl/hccl.h>

#include "api.h"

#define HC	MSPTI_CB_DOMAIN_HCCL
#define COMM_KINDS	((1u << MSPTI_ACTIVITY_KIND_HCCL) | \
	(1u << MSPTI_ACTIVITY_KIND_COMMUNICATION))

struct HcclAllReduce_params {
	void *sendBuf; void *recvBuf; uint64_t count; HcclDataType dataType;
	HcclReduceOp op; HcclComm comm; aclrtStream stream;
};
struct HcclBroadcast_params {
	void *buf; uint64_t count; HcclDataType dataType; uint32_t root;
	HcclComm comm; aclrtStream stream;
};
struct HcclAllGather_params {
	void *sendBuf; void *recvBuf; uint64_t sendCount;
	HcclDataType dataType; HcclComm comm; aclrtStream stream;
};
struct HcclReduceScatter_params {
	void *sendBuf; void *recvBuf; uint64_t recvCount;
	HcclDataType dataType; HcclReduceOp op; HcclComm comm;
	aclrtStream stream;
};
struct HcclReduce_params {
	void *sendBuf; void *recvBuf; uint64_t count; HcclDataType dataType;
	HcclReduceOp op; uint32_t root; HcclComm comm; aclrtStream stream;
};
struct HcclAlltoAll_params {
	const void *sendBuf; uint64_t sendCount; HcclDataType sendType;
	const void *recvBuf; uint64_t recvCount; HcclDataType recvType;
	HcclComm comm; aclrtStream stream;
};
struct HcclAlltoAllV_params {
	const void *sendBuf; const void *sendCounts; const void *sdispls;
	HcclDataType sendType; const void *recvBuf; const void *recvCounts;
	const void *rdispls; HcclDataType recvType; HcclComm comm;
	aclrtStream stream;
};
struct HcclBarrier_params { HcclComm comm; aclrtStream stream; };
struct HcclScatter_params {
	void *sendBuf; void *recvBuf; uint64_t recvCount;
	HcclDataType dataType; uint32_t root; HcclComm comm;
	aclrtStream stream;
};
struct HcclSend_params {
	void *sendBuf; uint64_t count; HcclDataType dataType;
	uint32_t destRank; HcclComm comm; aclrtStream stream;
};
struct HcclRecv_params {
	void *recvBuf; uint64_t count; HcclDataType dataType;
	uint32_t srcRank; HcclComm comm; aclrtStream stream;
};
struct HcclBatchSendRecv_params {
	HcclSendRecvItem *sendRecvInfo; uint32_t itemNum; HcclComm comm;
	aclrtStream stream;
};

/* A collective whose device record cannot come to the in-process API
 * (no channel): counted for each of its kinds the API wants. */
static void
hccl_lost(uint32_t wanted)
{
	uint32_t w = wanted & api_kinds_api();

	if (w & (1u << MSPTI_ACTIVITY_KIND_HCCL))
		activity_drop(MSPTI_ACTIVITY_KIND_HCCL, 1);
	if (w & (1u << MSPTI_ACTIVITY_KIND_COMMUNICATION))
		activity_drop(MSPTI_ACTIVITY_KIND_COMMUNICATION, 1);
}

/* Every HCCL call: ICALL_BEGIN (api.h), then the pending join of the
 * collective's device task on stream. */
#define HCCL_CALL(fn, cbid, stream, call, ...)				\
	struct pending pd;						\
									\
	ICALL_BEGIN(fn, HCCL_E_NOT_SUPPORT, HC, cbid, NULL, call,	\
	    __VA_ARGS__);						\
	if (ret == HCCL_SUCCESS && (c.wanted & COMM_KINDS)) {		\
		icall_pending(&pd, &c, MSPTI_ACTIVITY_KIND_HCCL, stream); \
		/* No device record will come: counted, not silent. */	\
		if (devtime_submit(&pd) & DEVTIME_HOST_API)		\
			hccl_lost(c.wanted);				\
	}								\
	icall_exit(&c, &ret);						\
	return ret

HCCL_FUNC_VISIBILITY HcclResult
HcclAllReduce(void *sendBuf, void *recvBuf, uint64_t count,
    HcclDataType dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclAllReduce, MSPTI_CBID_HCCL_ALLREDUCE, stream,
	    (sendBuf, recvBuf, count, dataType, op, comm, stream),
	    sendBuf, recvBuf, count, dataType, op, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclBroadcast(void *buf, uint64_t count, HcclDataType dataType, uint32_t root,
    HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclBroadcast, MSPTI_CBID_HCCL_BROADCAST, stream,
	    (buf, count, dataType, root, comm, stream),
	    buf, count, dataType, root, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclAllGather(void *sendBuf, void *recvBuf, uint64_t sendCount,
    HcclDataType dataType, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclAllGather, MSPTI_CBID_HCCL_ALLGATHER, stream,
	    (sendBuf, recvBuf, sendCount, dataType, comm, stream),
	    sendBuf, recvBuf, sendCount, dataType, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclReduceScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
    HcclDataType dataType, HcclReduceOp op, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclReduceScatter, MSPTI_CBID_HCCL_REDUCE_SCATTER, stream,
	    (sendBuf, recvBuf, recvCount, dataType, op, comm, stream),
	    sendBuf, recvBuf, recvCount, dataType, op, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclReduce(void *sendBuf, void *recvBuf, uint64_t count, HcclDataType dataType,
    HcclReduceOp op, uint32_t root, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclReduce, MSPTI_CBID_HCCL_REDUCE, stream,
	    (sendBuf, recvBuf, count, dataType, op, root, comm, stream),
	    sendBuf, recvBuf, count, dataType, op, root, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclAlltoAll(const void *sendBuf, uint64_t sendCount, HcclDataType sendType,
    const void *recvBuf, uint64_t recvCount, HcclDataType recvType,
    HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclAlltoAll, MSPTI_CBID_HCCL_ALL_TO_ALL, stream,
	    (sendBuf, sendCount, sendType, recvBuf, recvCount, recvType, comm,
	    stream),
	    sendBuf, sendCount, sendType, recvBuf, recvCount, recvType, comm,
	    stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclAlltoAllV(const void *sendBuf, const void *sendCounts, const void *sdispls,
    HcclDataType sendType, const void *recvBuf, const void *recvCounts,
    const void *rdispls, HcclDataType recvType, HcclComm comm,
    aclrtStream stream)
{
	HCCL_CALL(HcclAlltoAllV, MSPTI_CBID_HCCL_ALL_TO_ALLV, stream,
	    (sendBuf, sendCounts, sdispls, sendType, recvBuf, recvCounts,
	    rdispls, recvType, comm, stream),
	    sendBuf, sendCounts, sdispls, sendType, recvBuf, recvCounts,
	    rdispls, recvType, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclBarrier(HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclBarrier, MSPTI_CBID_HCCL_BARRIER, stream,
	    (comm, stream), comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclScatter(void *sendBuf, void *recvBuf, uint64_t recvCount,
    HcclDataType dataType, uint32_t root, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclScatter, MSPTI_CBID_HCCL_SCATTER, stream,
	    (sendBuf, recvBuf, recvCount, dataType, root, comm, stream),
	    sendBuf, recvBuf, recvCount, dataType, root, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclSend(void *sendBuf, uint64_t count, HcclDataType dataType,
    uint32_t destRank, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclSend, MSPTI_CBID_HCCL_SEND, stream,
	    (sendBuf, count, dataType, destRank, comm, stream),
	    sendBuf, count, dataType, destRank, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclRecv(void *recvBuf, uint64_t count, HcclDataType dataType,
    uint32_t srcRank, HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclRecv, MSPTI_CBID_HCCL_RECV, stream,
	    (recvBuf, count, dataType, srcRank, comm, stream),
	    recvBuf, count, dataType, srcRank, comm, stream);
}

HCCL_FUNC_VISIBILITY HcclResult
HcclBatchSendRecv(HcclSendRecvItem *sendRecvInfo, uint32_t itemNum,
    HcclComm comm, aclrtStream stream)
{
	HCCL_CALL(HcclBatchSendRecv, MSPTI_CBID_HCCL_SENDRECV, stream,
	    (sendRecvInfo, itemNum, comm, stream),
	    sendRecvInfo, itemNum, comm, stream);
}
