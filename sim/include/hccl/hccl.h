/*
 * hccl/hccl.h - HCCL collective API of the simulated NPU (libnpusim).
 *
 * Signatures follow the public CANN hccl.h.  Ranks are processes of one
 * node that rendezvous in POSIX shared memory named from the root info.
 * Collectives are asynchronous: they are queued on the given stream and a
 * failure at execution (a peer died, a timeout) is reported by
 * aclrtSynchronizeStream; later calls on a broken comm return HCCL_E_REMOTE.
 */
#ifndef HCCL_HCCL_H
#define HCCL_HCCL_H

#include <hccl/hccl_types.h>
#include <acl/acl.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef HCCL_FUNC_VISIBILITY
#define HCCL_FUNC_VISIBILITY __attribute__((visibility("default")))
#endif

HCCL_FUNC_VISIBILITY HcclResult HcclGetRootInfo(HcclRootInfo *rootInfo);
/** Synchronous: waits (bounded by NPUSIM_HCCL_TIMEOUT_S) for all ranks. */
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitRootInfo(uint32_t nRanks,
    const HcclRootInfo *rootInfo, uint32_t rank, HcclComm *comm);
/**
 * One process drives ndev ranks: comms[i] is rank i on devices[i] (ids
 * distinct and below NPUSIM_DEVICES).  Synchronous; on failure no comm is
 * left and comms is untouched.
 */
HCCL_FUNC_VISIBILITY HcclResult HcclCommInitAll(uint32_t ndev,
    int32_t *devices, HcclComm *comms);
HCCL_FUNC_VISIBILITY HcclResult HcclCommDestroy(HcclComm comm);
HCCL_FUNC_VISIBILITY HcclResult HcclGetRankId(HcclComm comm, uint32_t *rank);
HCCL_FUNC_VISIBILITY HcclResult HcclGetRankSize(HcclComm comm,
    uint32_t *rankSize);
/** Name of the comm (libnpusim: the shm name), buffer of >= 128 bytes. */
HCCL_FUNC_VISIBILITY HcclResult HcclGetCommName(HcclComm comm, char *commName);
HCCL_FUNC_VISIBILITY const char *HcclGetErrorString(HcclResult code);

HCCL_FUNC_VISIBILITY HcclResult HcclAllReduce(void *sendBuf, void *recvBuf,
    uint64_t count, HcclDataType dataType, HcclReduceOp op, HcclComm comm,
    aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclBroadcast(void *buf, uint64_t count,
    HcclDataType dataType, uint32_t root, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAllGather(void *sendBuf, void *recvBuf,
    uint64_t sendCount, HcclDataType dataType, HcclComm comm,
    aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclReduceScatter(void *sendBuf,
    void *recvBuf, uint64_t recvCount, HcclDataType dataType,
    HcclReduceOp op, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclReduce(void *sendBuf, void *recvBuf,
    uint64_t count, HcclDataType dataType, HcclReduceOp op, uint32_t root,
    HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclAlltoAll(const void *sendBuf,
    uint64_t sendCount, HcclDataType sendType, const void *recvBuf,
    uint64_t recvCount, HcclDataType recvType, HcclComm comm,
    aclrtStream stream);
/** Counts and displacements are uint64_t arrays of nRanks elements. */
HCCL_FUNC_VISIBILITY HcclResult HcclAlltoAllV(const void *sendBuf,
    const void *sendCounts, const void *sdispls, HcclDataType sendType,
    const void *recvBuf, const void *recvCounts, const void *rdispls,
    HcclDataType recvType, HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclBarrier(HcclComm comm, aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclScatter(void *sendBuf, void *recvBuf,
    uint64_t recvCount, HcclDataType dataType, uint32_t root, HcclComm comm,
    aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclSend(void *sendBuf, uint64_t count,
    HcclDataType dataType, uint32_t destRank, HcclComm comm,
    aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclRecv(void *recvBuf, uint64_t count,
    HcclDataType dataType, uint32_t srcRank, HcclComm comm,
    aclrtStream stream);
HCCL_FUNC_VISIBILITY HcclResult HcclBatchSendRecv(
    HcclSendRecvItem *sendRecvInfo, uint32_t itemNum, HcclComm comm,
    aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* HCCL_HCCL_H */
