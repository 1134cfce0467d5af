/*
 * Fuzz target for the frame decoder: the input is a byte stream as read
 * from agent.sock or ctl.sock; frames are extracted the way the daemon
 * does it and every well-formed one is unpacked and freed.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>

#include "frame.h"

int	LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct frame_hdr h;
	ProtobufCMessage *msg;
	size_t off = 0;

	while (size - off >= FRAME_HDR_LEN) {
		if (frame_hdr_parse(data + off, &h) != 0)
			break;
		if (size - off - FRAME_HDR_LEN < h.len)
			break;
		if (frame_unpack(&h, data + off + FRAME_HDR_LEN, &msg) == 0)
			protobuf_c_message_free_unpacked(msg, NULL);
		off += FRAME_HDR_LEN + h.len;
	}
	return 0;
}
