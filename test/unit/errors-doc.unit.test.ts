import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { ERROR_CODES, isRunletError, JobError, RunletError } from "../../src/errors.js";

describe("error codes", () => {
  it("lists every code of src/errors.ts in docs/errors.md, and no other", async () => {
    const doc = await readFile(new URL("../../docs/errors.md", import.meta.url), "utf8");
    const documented = [...doc.matchAll(/^\| *`(RUNLET_[A-Z0-9_]+)` *\|/gm)].map((m) => m[1]);
    expect(documented.sort()).toEqual(Object.keys(ERROR_CODES).sort());
  });

  it("recognises runlet errors by code, not by class", () => {
    const foreign = Object.assign(new Error("x"), { code: "RUNLET_JOB_FAILED" });
    expect(isRunletError(foreign)).toBe(true);
    expect(isRunletError(Object.assign(new Error("x"), { code: "ENOENT" }))).toBe(false);
    const err = new JobError("bad url", { refreshWorker: true, cause: new Error("root") });
    expect(err).toBeInstanceOf(RunletError);
    expect(err.code).toBe("RUNLET_JOB_FAILED");
    expect(err.refreshWorker).toBe(true);
    expect((err.cause as Error).message).toBe("root");
  });
});
