import { describe, expect, it } from "vitest";
import { Fifo } from "../../src/fifo.js";

describe("Fifo", () => {
  it("gives items back in the order they came, across its compactions", () => {
    const queue = new Fifo<number>();
    const taken: number[] = [];
    // Interleaved pushes and takes cross the 1 024-item compaction point many times.
    for (let i = 0; i < 10_000; i++) {
      queue.push(i);
      if (i % 3 !== 0) taken.push(queue.shift()!);
    }
    expect(queue.size).toBe(10_000 - taken.length);
    for (let item = queue.shift(); item !== undefined; item = queue.shift()) taken.push(item);
    expect(taken).toEqual(Array.from({ length: 10_000 }, (_, i) => i));
    expect(queue.size).toBe(0);
  });

  it("answers undefined when empty, and clear() empties it", () => {
    const queue = new Fifo<string>();
    expect(queue.shift()).toBeUndefined();
    queue.push("a");
    queue.push("b");
    expect(queue.toArray()).toEqual(["a", "b"]);
    queue.clear();
    expect(queue.size).toBe(0);
    expect(queue.shift()).toBeUndefined();
    queue.push("c");
    expect(queue.shift()).toBe("c");
  });

  it("lists what is queued front first, as a copy", () => {
    const queue = new Fifo<number>();
    for (let i = 0; i < 3_000; i++) queue.push(i);
    for (let i = 0; i < 2_000; i++) queue.shift();
    const listed = queue.toArray();
    expect(listed).toEqual(Array.from({ length: 1_000 }, (_, i) => 2_000 + i));
    listed.length = 0;
    expect(queue.size).toBe(1_000);
  });
});
