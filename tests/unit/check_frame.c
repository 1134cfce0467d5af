/* Frame codec and blocking frame I/O, over real socketpairs. */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "frame.h"

static Mspti__Hello *
make_hello(void)
{
	static char *argv[] = { "train", "--steps", "3" };
	static uint32_t devs[] = { 0, 3 };
	static Mspti__Hello h = MSPTI__HELLO__INIT;

	h.exe = "/usr/bin/train";
	h.argv = argv;
	h.n_argv = 3;
	h.job_id = "job-42";
	h.rank = 7;
	h.local_rank = -1;
	h.world_size = 8;
	h.devices = devs;
	h.n_devices = 2;
	h.agent_version = "0.1.0";
	return &h;
}

START_TEST(test_roundtrip)
{
	Mspti__Hello *h = make_hello(), *back;
	struct frame_hdr fh;
	ProtobufCMessage *msg;
	uint8_t *buf;
	size_t len;

	ck_assert_int_eq(frame_pack(MSPTI__MSG_TYPE__MSG_HELLO, &h->base, &buf,
	    &len), 0);
	ck_assert_uint_gt(len, FRAME_HDR_LEN);
	ck_assert_int_eq(frame_hdr_parse(buf, &fh), 0);
	ck_assert_uint_eq(fh.type, MSPTI__MSG_TYPE__MSG_HELLO);
	ck_assert_uint_eq(fh.len, len - FRAME_HDR_LEN);
	ck_assert_int_eq(frame_unpack(&fh, buf + FRAME_HDR_LEN, &msg), 0);
	back = (Mspti__Hello *)msg;
	ck_assert_str_eq(back->exe, "/usr/bin/train");
	ck_assert_uint_eq(back->n_argv, 3);
	ck_assert_str_eq(back->argv[2], "3");
	ck_assert_str_eq(back->job_id, "job-42");
	ck_assert_int_eq(back->rank, 7);
	ck_assert_int_eq(back->local_rank, -1);
	ck_assert_uint_eq(back->n_devices, 2);
	ck_assert_uint_eq(back->devices[1], 3);
	protobuf_c_message_free_unpacked(msg, NULL);
	free(buf);
}
END_TEST

START_TEST(test_header_rejects)
{
	uint8_t hdr[FRAME_HDR_LEN];
	struct frame_hdr fh;

	frame_hdr_put(hdr, MSPTI__MSG_TYPE__MSG_HELLO, 10);
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), 0);
	hdr[0] ^= 0xff;		/* magic */
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), -EPROTO);
	frame_hdr_put(hdr, MSPTI__MSG_TYPE__MSG_HELLO, 10);
	hdr[4] = 9;		/* version */
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), -EPROTO);
	frame_hdr_put(hdr, 60, 10);	/* unknown type */
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), -EBADMSG);
	frame_hdr_put(hdr, 0xffff, 10);
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), -EBADMSG);
	frame_hdr_put(hdr, MSPTI__MSG_TYPE__MSG_STATUS_REQ, 100000);
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), -EMSGSIZE);
	frame_hdr_put(hdr, MSPTI__MSG_TYPE__MSG_LIST_REP, FRAME_MAX_LEN + 1);
	ck_assert_int_eq(frame_hdr_parse(hdr, &fh), -EMSGSIZE);
}
END_TEST

START_TEST(test_garbage_payload)
{
	uint8_t junk[64];
	struct frame_hdr fh = { FRAME_MAGIC, FRAME_VERSION,
	    MSPTI__MSG_TYPE__MSG_HELLO, sizeof(junk) };
	ProtobufCMessage *msg;

	memset(junk, 0xff, sizeof(junk));
	ck_assert_int_eq(frame_unpack(&fh, junk, &msg), -EBADMSG);
	ck_assert_ptr_null(msg);
}
END_TEST

START_TEST(test_pack_rejects_mismatch)
{
	Mspti__Hello *h = make_hello();
	uint8_t *buf;
	size_t len;

	/* A Hello cannot be sent as a ListRequest. */
	ck_assert_int_eq(frame_pack(MSPTI__MSG_TYPE__MSG_LIST_REQ, &h->base,
	    &buf, &len), -EINVAL);
}
END_TEST

/* Sends over a socketpair with a tiny send buffer, so frames split. */
START_TEST(test_socket_small_buffers)
{
	int sv[2], size = 1024;
	Mspti__Hello *h = make_hello();
	char big[3000];
	struct frame_hdr fh;
	ProtobufCMessage *msg;

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	h->exe = big;
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (fork() == 0) {
		close(sv[1]);
		for (int i = 0; i < 20; i++)
			if (frame_send(sv[0], MSPTI__MSG_TYPE__MSG_HELLO,
			    &h->base, -1) != 0)
				_exit(1);
		_exit(0);
	}
	close(sv[0]);
	for (int i = 0; i < 20; i++) {
		ck_assert_int_eq(frame_recv(sv[1], 5000, &fh, &msg, NULL), 0);
		ck_assert_uint_eq(strlen(((Mspti__Hello *)msg)->exe),
		    sizeof(big) - 1);
		protobuf_c_message_free_unpacked(msg, NULL);
	}
	ck_assert_int_eq(frame_recv(sv[1], 5000, &fh, &msg, NULL), -ECONNRESET);
	close(sv[1]);
	h->exe = "/usr/bin/train";
}
END_TEST

START_TEST(test_socket_truncated_and_timeout)
{
	int sv[2];
	uint8_t hdr[FRAME_HDR_LEN];
	struct frame_hdr fh;
	ProtobufCMessage *msg;

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* Nothing sent: times out. */
	ck_assert_int_eq(frame_recv(sv[1], 50, &fh, &msg, NULL), -ETIMEDOUT);
	/* A header promising 40 bytes, then 5 and a close: truncated. */
	frame_hdr_put(hdr, MSPTI__MSG_TYPE__MSG_HELLO, 40);
	ck_assert_int_eq(write(sv[0], hdr, sizeof(hdr)), sizeof(hdr));
	ck_assert_int_eq(write(sv[0], "abcde", 5), 5);
	close(sv[0]);
	ck_assert_int_eq(frame_recv(sv[1], 1000, &fh, &msg, NULL), -ECONNRESET);
	ck_assert_ptr_null(msg);
	close(sv[1]);
}
END_TEST

START_TEST(test_fd_passing)
{
	int sv[2], fd, got = -1;
	Mspti__StatusRequest req = MSPTI__STATUS_REQUEST__INIT;
	struct frame_hdr fh;
	ProtobufCMessage *msg;
	char buf[8] = { 0 };

	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	fd = open("/proc/self/cmdline", O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(frame_send(sv[0], MSPTI__MSG_TYPE__MSG_STATUS_REQ,
	    &req.base, fd), 0);
	close(fd);
	ck_assert_int_eq(frame_recv(sv[1], 1000, &fh, &msg, &got), 0);
	ck_assert_int_ge(got, 0);
	ck_assert_int_gt(read(got, buf, sizeof(buf) - 1), 0);
	close(got);
	protobuf_c_message_free_unpacked(msg, NULL);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

int
main(void)
{
	Suite *s = suite_create("frame");
	TCase *tc = tcase_create("core");
	SRunner *sr;
	int failed;

	tcase_add_test(tc, test_roundtrip);
	tcase_add_test(tc, test_header_rejects);
	tcase_add_test(tc, test_garbage_payload);
	tcase_add_test(tc, test_pack_rejects_mismatch);
	tcase_add_test(tc, test_socket_small_buffers);
	tcase_add_test(tc, test_socket_truncated_and_timeout);
	tcase_add_test(tc, test_fd_passing);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
