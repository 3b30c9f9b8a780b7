import { readFile } from "node:fs/promises";
import { expect, it } from "vitest";
import { USER_AGENT, VERSION } from "../../src/version.js";

it("reports the version package.json declares", async () => {
  const pkg = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8")) as {
    version: string;
  };
  expect(VERSION).toBe(pkg.version);
  expect(USER_AGENT.startsWith(`runlet/${pkg.version} (`)).toBe(true);
});
