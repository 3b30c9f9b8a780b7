import { describe, expect, it } from "vitest";
import { addRecent } from "../../src/recent-set.js";

describe("addRecent", () => {
  it("keeps the latest `max` values, forgetting the oldest, and moves a re-added value to the newest place", () => {
    const set = new Set<string>();
    for (const v of ["a", "b", "c"]) addRecent(set, v, 3);
    addRecent(set, "a", 3);
    addRecent(set, "d", 3);
    expect([...set]).toEqual(["c", "a", "d"]);
  });
});
