import { describe, expect, it } from "vitest";
import { within } from "../../src/cli/verify-bundle.js";

/**
 * The verify step's bounded wait on the worker's exit and its pipes' close: true once the promise
 * settles (a rejection too, owned here rather than left to reach the process), false at the bound.
 */
describe("verify-bundle's within", () => {
  it("is true once the promise resolves, or rejects; false when it has not settled by the bound", async () => {
    expect(await within(Promise.resolve(1), 1_000)).toBe(true);
    expect(await within(Promise.reject(new Error("the pipes broke")), 5_000)).toBe(true);
    expect(await within(new Promise(() => {}), 20)).toBe(false);
  });
});
