import { describe, expect, it } from "vitest";
import { StreamCoalescer } from "../../src/stream/index.js";

/** A clock the test advances by hand. */
function manualClock(): { now: () => number; advance: (ms: number) => void } {
  let time = 1_000;
  return {
    now: () => time,
    advance: (ms) => {
      time += ms;
    },
  };
}

describe("StreamCoalescer", () => {
  it("merges consecutive strings until the window passes", () => {
    const clock = manualClock();
    const c = new StreamCoalescer({ windowMs: 50, now: clock.now });
    expect(c.push("a")).toEqual([]);
    clock.advance(20);
    expect(c.push("b")).toEqual([]);
    expect(c.dueAt()).toBe(1_050);
    expect(c.poll()).toEqual([]);
    clock.advance(30);
    expect(c.poll()).toEqual(["ab"]);
    expect(c.pendingCount).toBe(0);
    expect(c.dueAt()).toBeUndefined();
  });

  it("releases an expired batch before taking the next string", () => {
    const clock = manualClock();
    const c = new StreamCoalescer({ windowMs: 10, now: clock.now });
    c.push("a");
    clock.advance(10);
    expect(c.push("b")).toEqual(["a"]);
    expect(c.flush()).toEqual(["b"]);
  });

  it("flushes the batch before a non-string item, keeping order", () => {
    const c = new StreamCoalescer({ windowMs: 1_000, now: manualClock().now });
    c.push("x");
    c.push("y");
    expect(c.push({ done: true })).toEqual(["xy", { done: true }]);
    expect(c.push(Buffer.from("z"))).toEqual([Buffer.from("z")]);
  });

  it("keeps every merged string within maxItemBytes, counting JSON escapes", () => {
    const c = new StreamCoalescer({ windowMs: 1_000, maxItemBytes: 12, now: manualClock().now });
    // '"' costs 2 bytes escaped: 5 of them fill the 10 bytes left inside the quotes.
    const out = ['"', '"', '"', '"', '"', '"'].flatMap((s) => c.push(s));
    expect(out).toEqual(['"""""']);
    expect(Buffer.byteLength(JSON.stringify(out[0]))).toBe(12);
    expect(c.flush()).toEqual(['"']);
  });

  it("passes a string larger than the limit alone, after the batch", () => {
    const c = new StreamCoalescer({ windowMs: 1_000, maxItemBytes: 10, now: manualClock().now });
    c.push("ab");
    expect(c.push("0123456789")).toEqual(["ab", "0123456789"]);
    expect(c.flush()).toEqual([]);
  });

  it("keeps the concatenation of many tokens unchanged", () => {
    const clock = manualClock();
    const c = new StreamCoalescer({ windowMs: 5, maxItemBytes: 100, now: clock.now });
    const tokens = Array.from({ length: 1_000 }, (_, i) => `t${i} `);
    const out: unknown[] = [];
    for (const [i, token] of tokens.entries()) {
      if (i % 7 === 0) clock.advance(3);
      out.push(...c.push(token));
    }
    out.push(...c.flush());
    expect(out.join("")).toBe(tokens.join(""));
    expect(out.length).toBeLessThan(tokens.length / 5);
    for (const item of out) expect(Buffer.byteLength(JSON.stringify(item))).toBeLessThanOrEqual(100);
  });

  it("rejects a negative window with a message naming the option", () => {
    expect(() => new StreamCoalescer({ windowMs: -1 })).toThrow("windowMs must be a number ≥ 0, got -1");
  });
});
