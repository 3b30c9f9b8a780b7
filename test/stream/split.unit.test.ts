import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { ChunkMetrics, StreamChunk } from "../../src/protocol/index.js";
import { chunkMetricsSchema, MAX_STREAM_CHUNK_BYTES } from "../../src/protocol/index.js";
import { chunkBody, chunkJson, RUNLET_METRIC_KEYS, reassemble, splitItem } from "../../src/stream/index.js";
import { jsonStringBytes } from "../../src/stream/slice-text.js";
import { extraMetrics, trickyString } from "./arbitraries.js";

/** A chunk's metrics, checked against the wire schema (which also types them). */
function meta(chunk: StreamChunk | undefined): ChunkMetrics {
  return chunkMetricsSchema.parse(chunk?.metrics);
}

/** Every property the splitter promises, checked on one item's chunks. */
function checkChunks(
  chunks: StreamChunk[],
  streamIndex: number,
  extra: Record<string, number | string>,
  maxChunkBytes: number,
): void {
  expect(chunks.length).toBeGreaterThan(0);
  const first = meta(chunks[0]);
  for (const [part, chunk] of chunks.entries()) {
    expect(Buffer.byteLength(JSON.stringify(chunk))).toBeLessThanOrEqual(maxChunkBytes);
    expect(chunkJson(chunk)).toBe(JSON.stringify(chunk));
    const body = chunkBody(chunk);
    expect(typeof body === "string" ? body : body.toString("utf8")).toBe(JSON.stringify(chunk));
    const metrics = meta(chunk);
    expect(metrics.streamIndex).toBe(streamIndex);
    expect(metrics.part).toBe(part);
    expect(metrics.parts).toBe(chunks.length);
    expect(metrics.encoding).toBe(first.encoding);
    expect(metrics.bytes).toBe(first.bytes);
    for (const [key, value] of Object.entries(extra)) {
      if (!RUNLET_METRIC_KEYS.has(key)) expect(metrics[key]).toBe(value);
    }
  }
}

/** No slice boundary falls between the halves of a surrogate pair. */
function expectWholeCodePoints(chunks: StreamChunk[]): void {
  for (let i = 1; i < chunks.length; i++) {
    const before = chunks[i - 1]!.output as string;
    const after = chunks[i]!.output as string;
    const high = before.charCodeAt(before.length - 1);
    const low = after.charCodeAt(0);
    expect(high >= 0xd800 && high <= 0xdbff && low >= 0xdc00 && low <= 0xdfff).toBe(false);
  }
}

const smallLimit = fc.integer({ min: 400, max: 900 });

describe("splitItem on strings", () => {
  it("keeps every chunk under the limit and reassembles the exact string, for any characters", () => {
    fc.assert(
      fc.property(trickyString(3_000), smallLimit, extraMetrics, fc.nat(1_000), (text, max, extra, index) => {
        const chunks = splitItem(text, index, extra, max);
        checkChunks(chunks, index, extra, max);
        expectWholeCodePoints(chunks.filter((c) => meta(c).encoding === "string"));
        expect(meta(chunks[0]).bytes).toBe(Buffer.byteLength(JSON.stringify(text)));
        expect(reassemble(chunks)).toEqual([text]);
      }),
      { numRuns: 300 },
    );
  });

  it("sends a string that fits as one json chunk holding the string itself", () => {
    expect(splitItem('say "hi"', 4, { tokens: 2 })).toEqual([
      {
        output: 'say "hi"',
        metrics: { streamIndex: 4, part: 0, parts: 1, encoding: "json", bytes: 12, tokens: 2 },
      },
    ]);
  });

  it("splits exactly when one more byte would pass the limit", () => {
    const metrics = { streamIndex: 0, part: 0, parts: 1, encoding: "json", bytes: 0 };
    // Solve for the string length whose single chunk is exactly the limit (bytes has 7 digits here).
    const fixed = Buffer.byteLength(
      JSON.stringify({ output: "", metrics: { ...metrics, bytes: 1_000_000 } }),
    );
    const fits = "a".repeat(MAX_STREAM_CHUNK_BYTES - fixed);
    const atLimit = splitItem(fits, 0);
    expect(atLimit).toHaveLength(1);
    expect(Buffer.byteLength(JSON.stringify(atLimit[0]))).toBe(MAX_STREAM_CHUNK_BYTES);
    const over = splitItem(`${fits}b`, 0);
    expect(over).toHaveLength(2);
    expect(over.map((c) => meta(c).encoding)).toEqual(["string", "string"]);
    expect(reassemble(over)).toEqual([`${fits}b`]);
  });

  it("splits multi-megabyte strings of escapes and astral characters at the real 1 MiB limit", () => {
    fc.assert(
      fc.property(trickyString(40), fc.integer({ min: 1_000_000, max: 3_500_000 }), (pattern, bytes) => {
        const unit = pattern === "" ? "x" : pattern;
        const text = unit.repeat(Math.ceil(bytes / Buffer.byteLength(unit)));
        const chunks = splitItem(text, 7, { tokens: 1 });
        checkChunks(chunks, 7, { tokens: 1 }, MAX_STREAM_CHUNK_BYTES);
        expectWholeCodePoints(chunks);
        const [back] = reassemble(chunks);
        expect(back === text).toBe(true);
      }),
      { numRuns: 6 },
    );
  });

  it("writes each slice of long plain text straight into bytes, with the handler's metrics in UTF-8", () => {
    const text = "plain ascii text ".repeat(200_000); // 3.4 MB, nothing to escape
    const extra = { model: "llamá 😀", tokens: 7 };
    const chunks = splitItem(text, 2, extra);
    expect(chunks.length).toBe(4);
    for (const chunk of chunks) {
      const body = chunkBody(chunk);
      // Bytes, not text: the HTTP client posts them as they are, with no second copy.
      expect(Buffer.isBuffer(body)).toBe(true);
      expect((body as Buffer).equals(Buffer.from(JSON.stringify(chunk)))).toBe(true);
    }
    expect(reassemble(chunks)).toEqual([text]);
    // Text that needs escaping is posted as its JSON text.
    expect(typeof chunkBody(splitItem(`${text}"`, 0)[0]!)).toBe("string");
  });

  it("fills each slice close to the limit instead of emitting many small chunks", () => {
    const text = '😀"é'.repeat(1_000_000); // 9 JSON bytes a repeat
    const chunks = splitItem(text, 0);
    const total = Buffer.byteLength(JSON.stringify(text));
    expect(chunks.length).toBe(Math.ceil(total / (MAX_STREAM_CHUNK_BYTES - 200)));
  });
});

describe("splitItem on JSON values", () => {
  it("splits any JSON value into json-text slices that parse back to an equal value", () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 4 }), smallLimit, extraMetrics, (value, max, extra) => {
        const chunks = splitItem(value, 3, extra, max);
        checkChunks(chunks, 3, extra, max);
        const json = JSON.stringify(value);
        expect(meta(chunks[0]).bytes).toBe(Buffer.byteLength(json));
        if (chunks.length === 1) expect(meta(chunks[0]).encoding).toBe("json");
        else if (typeof value === "string") expect(meta(chunks[0]).encoding).toBe("string");
        else expect(meta(chunks[0]).encoding).toBe("json-text");
        // Through the wire, as a client receives them.
        expect(reassemble(JSON.parse(JSON.stringify(chunks)))).toEqual([JSON.parse(json)]);
      }),
      { numRuns: 300 },
    );
  });

  it("keeps quote-heavy JSON under the limit when escaping pushes the part count past a digit", () => {
    // JSON text full of quotes doubles when escaped again as string slices, so the part count can
    // cross from 1 to 2 digits (9 → 10+) beyond what the JSON size alone predicts.
    for (let n = 300; n < 700; n += 3) {
      for (const max of [380, 400, 420]) {
        const value = Array.from({ length: n }, () => '"\\');
        const chunks = splitItem(value, 0, {}, max);
        checkChunks(chunks, 0, {}, max);
        expect(reassemble(chunks)).toEqual([value]);
      }
    }
  });

  it("splits a 5 MB object at the real limit and parses it back equal", () => {
    const value = { rows: Array.from({ length: 60_000 }, (_, i) => ({ i, text: `row "${i}" é😀\n` })) };
    const chunks = splitItem(value, 0);
    checkChunks(chunks, 0, {}, MAX_STREAM_CHUNK_BYTES);
    expect(meta(chunks[0]).encoding).toBe("json-text");
    expect(reassemble(chunks)).toEqual([value]);
  });

  it("throws RUNLET_OUTPUT_UNSERIALIZABLE for a BigInt, a cycle and undefined", () => {
    const cycle: { self?: unknown } = {};
    cycle.self = cycle;
    for (const value of [10n, { n: 1n }, cycle, undefined, () => 1]) {
      expect(() => splitItem(value, 0)).toThrow(
        expect.objectContaining({ code: "RUNLET_OUTPUT_UNSERIALIZABLE" }),
      );
    }
  });

  it("throws RUNLET_OUTPUT_TOO_LARGE when the handler's metrics leave no room for output", () => {
    expect(() => splitItem("x".repeat(500), 0, { note: "m".repeat(300) }, 400)).toThrow(
      expect.objectContaining({ code: "RUNLET_OUTPUT_TOO_LARGE" }),
    );
  });
});

describe("splitItem on bytes", () => {
  it("splits any byte array into base64 slices that decode to the same bytes", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 4_000 }), smallLimit, extraMetrics, (data, max, extra) => {
        const chunks = splitItem(data, 9, extra, max);
        checkChunks(chunks, 9, extra, max);
        expect(meta(chunks[0]).encoding).toBe("base64");
        expect(meta(chunks[0]).bytes).toBe(data.byteLength);
        const [back] = reassemble(chunks);
        expect(Buffer.isBuffer(back)).toBe(true);
        expect(Buffer.compare(back as Buffer, data)).toBe(0);
      }),
      { numRuns: 300 },
    );
  });

  it("sends a small Buffer whole as base64, since JSON cannot carry bytes", () => {
    expect(splitItem(Buffer.from([0, 1, 255]), 2)).toEqual([
      { output: "AAH/", metrics: { streamIndex: 2, part: 0, parts: 1, encoding: "base64", bytes: 3 } },
    ]);
  });

  it("splits a view into a larger buffer without reading outside the view", () => {
    const backing = Buffer.alloc(3_000_000, 0xaa);
    const view = new Uint8Array(backing.buffer, backing.byteOffset + 100, 2_500_000).fill(0x11);
    const chunks = splitItem(view, 0);
    checkChunks(chunks, 0, {}, MAX_STREAM_CHUNK_BYTES);
    const [back] = reassemble(chunks);
    expect((back as Buffer).equals(Buffer.alloc(2_500_000, 0x11))).toBe(true);
  });

  it("splits random megabyte buffers at the real limit", () => {
    fc.assert(
      fc.property(fc.integer({ min: 700_000, max: 2_600_000 }), fc.integer(), (size, seed) => {
        const data = Buffer.alloc(size);
        for (let i = 0; i < size; i += 4)
          data.writeInt32LE((seed ^ (i * 2_654_435_761)) | 0, Math.min(i, size - 4));
        const chunks = splitItem(data, 1);
        checkChunks(chunks, 1, {}, MAX_STREAM_CHUNK_BYTES);
        expect((reassemble(chunks)[0] as Buffer).equals(data)).toBe(true);
      }),
      { numRuns: 5 },
    );
  });

  it("posts long mostly-plain ASCII text exactly as JSON.stringify writes it, and measures it exactly", () => {
    // Long text takes the fast plain-ASCII measure and the joined chunk text; one odd character
    // anywhere (an escape, a control character, a non-ASCII unit) must send it the slow way.
    const odd = fc.constantFrom('"', "\\", "\n", "\u0000", "\u001f", "\u007f", "é", "😀", "\ud800");
    fc.assert(
      fc.property(
        fc.string({ unit: fc.constantFrom("a", "b", " ", "~", "!"), minLength: 1_024, maxLength: 6_000 }),
        fc.option(fc.tuple(odd, fc.nat()), { nil: undefined }),
        extraMetrics,
        (plain, insert, extra) => {
          const text =
            insert === undefined
              ? plain
              : `${plain.slice(0, insert[1] % plain.length)}${insert[0]}${plain.slice(insert[1] % plain.length)}`;
          expect(jsonStringBytes(text)).toBe(Buffer.byteLength(JSON.stringify(text)) - 2);
          const chunks = splitItem(text, 3, extra, 1_500);
          checkChunks(chunks, 3, extra, 1_500);
          expect(reassemble(chunks)[0]).toBe(text);
        },
      ),
      { numRuns: 60 },
    );
  });
});
