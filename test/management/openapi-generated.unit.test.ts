import { readFile } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { generate } from "../../openapi/generate.js";

describe("the files generated from the v2 OpenAPI document", () => {
  it("are what openapi/generate.ts (openapi-typescript and the schema copy) makes of the committed document", async () => {
    const files = await generate();
    expect(Object.keys(files).length).toBe(2);
    for (const [path, text] of Object.entries(files)) {
      const committed = await readFile(new URL(`../../${path}`, import.meta.url), "utf8");
      // On a mismatch: `npm run openapi:generate` and commit the result.
      expect(committed === text, `${path} is stale: run npm run openapi:generate`).toBe(true);
    }
  }, 60_000);
});
