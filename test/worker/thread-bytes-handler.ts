import { BroadcastChannel } from "node:worker_threads";
import { z } from "zod";
import { defineHandler } from "../../src/index.js";

/**
 * A handler module for loop.unit.test.ts under `isolation: "thread"`: yields one item of `bytes` bytes
 * (byte i is `(i * 7) & 0xff`) and, on `channel`, posts the number of each base64 slice the
 * splitter makes (it reads the bytes' `buffer` once per slice), so the test on the main thread can
 * see how far chunk making runs ahead of the posts.
 */
export default defineHandler({
  isolation: "thread",
  maxBufferedStreamBytes: 3 * 1_048_576,
  input: z.object({ bytes: z.number().int(), channel: z.string() }),
  async *handler({ input }) {
    const channel = new BroadcastChannel(input.channel);
    let made = 0;
    class CountingBytes extends Uint8Array {
      override get buffer(): ArrayBuffer {
        channel.postMessage(made);
        made += 1;
        return super.buffer as ArrayBuffer;
      }
    }
    const data = new CountingBytes(input.bytes);
    for (let i = 0; i < input.bytes; i++) data[i] = (i * 7) & 0xff;
    try {
      yield data;
    } finally {
      channel.close();
    }
  },
});
