import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { afterRestartWindow, REPO_ROOT, startCli } from "../support/run-cli.js";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-broken-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

const WAITING =
  "runlet dev: worker w1 did not start (code 1); its error is above. Save a fix in the handler's folder to try again; " +
  "a missing environment variable needs runlet dev restarted with it set (workers get runlet dev's environment)\n";

describe("runlet dev with a handler that does not load", () => {
  it("says once what to do (a fix, or a restart for a missing variable), starts no other worker meanwhile, and starts one after a fix", async () => {
    const handler = join(tmp, "handler.ts");
    await writeFile(handler, 'throw new Error("half-written");\n');
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp });
    try {
      await dev.waitFor(/did not start/, 60_000);
      const [, endpoint] = await dev.waitFor(/endpoint {2}(http:\/\/\S+)\n/);
      const [, key] = await dev.waitFor(/api key {3}(\S+)/);
      // Before, a new worker was started a second after each exit: none is starting past that.
      expect(await afterRestartWindow(endpoint!, key!)).toMatchObject({ initializing: 0 });
      const out = dev.output();
      expect(out.split(WAITING).length - 1, out).toBe(1);
      expect(out).toContain(
        `[w1] runlet start: ${handler} could not be imported: half-written (RUNLET_HANDLER_LOAD)\n`,
      );
      expect(out).not.toContain("[w2]");
      expect(out).not.toContain("starting another");

      await writeFile(
        handler,
        `import { defineHandler } from ${JSON.stringify(join(REPO_ROOT, "src/index.ts"))};\n` +
          "export default defineHandler({ handler: () => ({ fixed: true }) });\n",
      );
      await dev.waitFor(/\[w2\] INFO {2}worker started/, 60_000);
      expect(dev.output().split(WAITING).length - 1).toBe(1);
    } finally {
      expect(await dev.stop()).toBe(0);
    }
  }, 150_000);
});
