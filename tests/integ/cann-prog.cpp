// cann-prog.cpp - a program written the way CANN programs are (C++, the
// CANN header paths, securec, aclnn two-phase calls, HcclCommInitAll,
// acl_prof, msPTI activity records), built by cann-compat.sh against an
// installed prefix only.
//
// Prints "add ok", "matmul ok", "hccl ok", "prof ok", then, when libmspti
// is preloaded, one "kernel <name> <type>" line per KERNEL record and
// "api <name>" per API record.  Exits non-zero at the first failure.
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "acl/acl_prof.h"
#include "aclnnop/aclnn_add.h"
#include "aclnnop/aclnn_matmul.h"
#include "hccl/hccl.h"
#include "mspti.h"
#include "securec.h"

#define CHECK(x)							\
	do {								\
		long long rc_ = (long long)(x);				\
		if (rc_ != 0) {						\
			std::printf("FAIL %s = %lld\n", #x, rc_);	\
			std::exit(1);					\
		}							\
	} while (0)

static void
request(uint8_t **buf, size_t *size, size_t *max)
{
	*size = 1 << 20;
	*buf = static_cast<uint8_t *>(std::malloc(*size));
	*max = 0;
}

static void
complete(uint8_t *buf, size_t, size_t valid)
{
	msptiActivity *r = nullptr;

	while (msptiActivityGetNextRecord(buf, valid, &r) == MSPTI_SUCCESS) {
		if (r->kind == MSPTI_ACTIVITY_KIND_KERNEL) {
			auto *k = reinterpret_cast<msptiActivityKernel *>(r);
			std::printf("kernel %s %s\n", k->name, k->type);
		} else if (r->kind == MSPTI_ACTIVITY_KIND_API) {
			auto *a = reinterpret_cast<msptiActivityApi *>(r);
			std::printf("api %s\n", a->name);
		}
	}
	std::free(buf);
}

static aclTensor *
tensor(std::vector<int64_t> shape, aclDataType dt, size_t esize,
    const void *host, void **dev)
{
	std::vector<int64_t> strides(shape.size(), 1);
	size_t n = 1;

	for (size_t i = shape.size(); i-- > 0;) {
		strides[i] = (int64_t)n;
		n *= (size_t)shape[i];
	}
	CHECK(aclrtMalloc(dev, n * esize, ACL_MEM_MALLOC_HUGE_FIRST));
	CHECK(aclrtMemcpy(*dev, n * esize, host, n * esize,
	    ACL_MEMCPY_HOST_TO_DEVICE));
	return aclCreateTensor(shape.data(), shape.size(), dt, strides.data(),
	    0, ACL_FORMAT_ND, shape.data(), shape.size(), *dev);
}

static int
rank_main(HcclComm comm, int32_t dev, float *out)
{
	aclrtStream s;
	void *send, *recv;
	float v[2] = { (float)dev, 1 };

	CHECK(aclrtSetDevice(dev));
	CHECK(aclrtCreateStream(&s));
	CHECK(aclrtMalloc(&send, sizeof v, ACL_MEM_MALLOC_HUGE_FIRST));
	CHECK(aclrtMalloc(&recv, sizeof v, ACL_MEM_MALLOC_HUGE_FIRST));
	CHECK(aclrtMemcpy(send, sizeof v, v, sizeof v,
	    ACL_MEMCPY_HOST_TO_DEVICE));
	CHECK(HcclAllReduce(send, recv, 2, HCCL_DATA_TYPE_FP32,
	    HCCL_REDUCE_SUM, comm, s));
	CHECK(aclrtSynchronizeStream(s));
	CHECK(aclrtMemcpy(out, sizeof v, recv, sizeof v,
	    ACL_MEMCPY_DEVICE_TO_HOST));
	CHECK(aclrtDestroyStream(s));
	return 0;
}

int
main()
{
	msptiSubscriberHandle sub;
	aclrtStream stream;
	void *da, *db, *dout, *ws = nullptr;
	float a[4] = { 1, 2, 3, 4 }, b[4] = { 10, 20, 30, 40 }, out[4];
	float zero[4] = { 0, 0, 0, 0 }, alpha = 2;
	char msg[16];
	uint64_t wsz = 0;
	aclOpExecutor *ex;

	// Linked as CANN's samples link it; preloaded, libmspti also
	// interposes the runtime and delivers KERNEL records.
	msptiSubscribe(&sub, nullptr, nullptr);
	msptiActivityRegisterCallbacks(request, complete);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_KERNEL);
	msptiActivityEnable(MSPTI_ACTIVITY_KIND_API);

	CHECK(aclInit(nullptr));
	CHECK(aclrtSetDevice(0));
	CHECK(aclrtCreateStream(&stream));

	aclTensor *ta = tensor({ 2, 2 }, ACL_FLOAT, 4, a, &da);
	aclTensor *tb = tensor({ 2, 2 }, ACL_FLOAT, 4, b, &db);
	aclTensor *to = tensor({ 2, 2 }, ACL_FLOAT, 4, zero, &dout);
	aclScalar *sa = aclCreateScalar(&alpha, ACL_FLOAT);
	CHECK(ta == nullptr || tb == nullptr || to == nullptr || sa == nullptr);
	CHECK(aclnnAddGetWorkspaceSize(ta, tb, sa, to, &wsz, &ex));
	CHECK(aclnnAdd(ws, wsz, ex, stream));
	CHECK(aclrtSynchronizeStream(stream));
	CHECK(aclrtMemcpy(out, sizeof out, dout, sizeof out,
	    ACL_MEMCPY_DEVICE_TO_HOST));
	for (int i = 0; i < 4; i++)
		CHECK(out[i] != a[i] + alpha * b[i]);
	std::printf("add ok\n");

	CHECK(aclnnMatmulGetWorkspaceSize(ta, tb, to, 0, &wsz, &ex));
	CHECK(aclnnMatmul(nullptr, wsz, ex, stream));
	CHECK(aclrtSynchronizeStream(stream));
	CHECK(aclrtMemcpy(out, sizeof out, dout, sizeof out,
	    ACL_MEMCPY_DEVICE_TO_HOST));
	// [1 2; 3 4] x [10 20; 30 40]
	CHECK(out[0] != 70 || out[1] != 100 || out[2] != 150 || out[3] != 220);
	std::printf("matmul ok\n");
	CHECK(aclDestroyTensor(ta));
	CHECK(aclDestroyTensor(tb));
	CHECK(aclDestroyTensor(to));
	CHECK(aclDestroyScalar(sa));

	int32_t devs[2] = { 0, 1 };
	HcclComm comms[2];
	float res[2][2];
	CHECK(HcclCommInitAll(2, devs, comms));
	std::thread t0(rank_main, comms[0], 0, res[0]);
	std::thread t1(rank_main, comms[1], 1, res[1]);
	t0.join();
	t1.join();
	CHECK(res[0][0] != 1 || res[1][0] != 1 || res[0][1] != 2);
	CHECK(HcclCommDestroy(comms[0]));
	CHECK(HcclCommDestroy(comms[1]));
	std::printf("hccl ok\n");

	uint32_t pdev[1] = { 0 };
	aclprofConfig *cfg = aclprofCreateConfig(pdev, 1, ACL_AICORE_NONE,
	    nullptr, ACL_PROF_TASK_TIME | ACL_PROF_ACL_API);
	CHECK(cfg == nullptr);
	CHECK(aclprofInit("/tmp", 4));
	CHECK(aclprofStart(cfg));
	CHECK(aclprofStop(cfg));
	CHECK(aclprofDestroyConfig(cfg));
	CHECK(aclprofFinalize());
	CHECK(sprintf_s(msg, sizeof msg, "%s", "prof ok") != 7);
	CHECK(memcpy_s(msg, 4, "0123456789", 10) != ERANGE_AND_RESET);
	std::printf("%s\n", "prof ok");

	CHECK(aclrtDestroyStream(stream));
	CHECK(aclrtResetDevice(0));
	CHECK(aclFinalize());
	msptiActivityFlushAll(1);
	msptiUnsubscribe(sub);
	return 0;
}
