import fc from "fast-check";
import { describe, expect, it } from "vitest";
import type { StreamChunk } from "../../src/protocol/index.js";
import { createReassembler, reassemble, splitItem } from "../../src/stream/index.js";
import { trickyString } from "./arbitraries.js";

const item = fc.oneof(
  trickyString(1_500),
  fc.jsonValue({ maxDepth: 3 }),
  fc.uint8Array({ maxLength: 1_500 }).map((bytes) => Buffer.from(bytes)),
);

function expectSameValues(back: unknown[], values: unknown[]): void {
  expect(back).toHaveLength(values.length);
  for (const [i, value] of values.entries()) {
    if (Buffer.isBuffer(value)) expect(Buffer.compare(back[i] as Buffer, value)).toBe(0);
    else expect(back[i]).toEqual(JSON.parse(JSON.stringify(value)));
  }
}

describe("reassembly of a whole stream", () => {
  it("gives back every yielded value in order, however the items were split", () => {
    fc.assert(
      fc.property(fc.array(item, { maxLength: 12 }), fc.integer({ min: 300, max: 900 }), (values, max) => {
        const chunks = values.flatMap((value, index) => splitItem(value, index, { tokens: index }, max));
        // Through the wire, as a client receives them.
        expectSameValues(reassemble(JSON.parse(JSON.stringify(chunks))), values);
      }),
      { numRuns: 200 },
    );
  });

  it("completes a value only when its last part arrives, whatever the read batches", () => {
    fc.assert(
      fc.property(fc.array(item, { minLength: 1, maxLength: 8 }), fc.nat(), (values, seed) => {
        const posted = values.flatMap((value, index) => splitItem(value, index, {}, 300));
        const chunks: StreamChunk[] = JSON.parse(JSON.stringify(posted));
        const reassembler = createReassembler();
        const back: unknown[] = [];
        // Feed in arbitrary batch sizes, as successive /stream reads would.
        let at = 0;
        let step = seed;
        while (at < chunks.length) {
          const size = 1 + (step % 5);
          step = Math.floor(step / 5) + 7;
          for (const chunk of chunks.slice(at, at + size)) {
            const done = reassembler.push(chunk);
            const { part, parts } = chunk.metrics ?? {};
            const isLast = part === Number(parts) - 1;
            expect(done).toHaveLength(isLast ? 1 : 0);
            back.push(...done);
          }
          at += size;
        }
        expect(reassembler.pending).toBe(false);
        reassembler.finish();
        expectSameValues(back, values);
      }),
      { numRuns: 100 },
    );
  });

  it("passes chunks without runlet metrics through as their output", () => {
    const chunks: StreamChunk[] = [{ output: "a" }, { output: { b: 1 }, metrics: { tokens: 3 } }];
    expect(reassemble(chunks)).toEqual(["a", { b: 1 }]);
  });
});

describe("reassembly errors", () => {
  const parts = splitItem("x".repeat(2_000), 0, {}, 400);
  const next = splitItem("y", 1);

  it("fails with RUNLET_STREAM_REASSEMBLY when a middle part is missing", () => {
    expect(parts.length).toBeGreaterThan(3);
    const missing = [parts[0]!, parts[2]!];
    expect(() => reassemble(missing)).toThrow(expect.objectContaining({ code: "RUNLET_STREAM_REASSEMBLY" }));
    expect(() => reassemble(missing)).toThrow(/item 0: expected part 1, got part 2/);
  });

  it("fails when the next item starts before the previous one is complete", () => {
    expect(() => reassemble([parts[0]!, ...next])).toThrow(/item 0 is missing parts after 0/);
  });

  it("fails when an item starts at a part other than 0", () => {
    expect(() => reassemble(parts.slice(1))).toThrow(/item 0 starts at part 1, not 0/);
  });

  it("fails when a whole item is missing between two others", () => {
    const third = splitItem("z", 2);
    expect(() => reassemble([...parts, ...third])).toThrow(/expected item 1, got item 2/);
  });

  it("fails when the stream ends inside an item", () => {
    expect(() => reassemble(parts.slice(0, -1))).toThrow(/ended inside item 0/);
  });

  it("fails when parts arrive out of order", () => {
    const swapped = [parts[0]!, parts[2]!, parts[1]!, ...parts.slice(3)];
    expect(() => reassemble(swapped)).toThrow(expect.objectContaining({ code: "RUNLET_STREAM_REASSEMBLY" }));
  });
});
