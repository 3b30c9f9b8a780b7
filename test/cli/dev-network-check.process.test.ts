import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { childEnv, REPO_ROOT, startCli } from "../support/run-cli.js";

// runlet dev skips the network fitness check unless a target is set (issue 45): its workers
// otherwise connect to 8.8.8.8:53. The other built-in checks still run. The suite turns the
// built-in checks off for the workers it starts (vitest.config.ts); these tests turn them on.

const RUNLET = JSON.stringify(join(REPO_ROOT, "src/index.ts"));
let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-dev-network-"));
  await writeFile(join(tmp, "package.json"), '{"type": "module"}\n');
  await writeFile(
    join(tmp, "handler.ts"),
    `import { defineHandler } from ${RUNLET};\nexport default defineHandler({ handler: () => 1 });\n`,
  );
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/** runlet dev's environment with the built-in checks on and thresholds any machine meets. */
function checksOn(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = childEnv({ RUNPOD_MIN_MEMORY_GB: "0", RUNPOD_MIN_DISK_PERCENT: "0", ...extra });
  delete env["RUNPOD_SKIP_AUTO_SYSTEM_CHECKS"];
  return env;
}

describe("runlet dev and the network fitness check", () => {
  it("skips it when no target is set, and still runs the other checks", async () => {
    const dev = startCli(["dev", "handler.ts", "--port", "0"], { cwd: tmp, env: checksOn() });
    try {
      await dev.waitFor(/runlet dev: worker w1 ready in/, 60_000);
      expect(dev.output()).toContain("fitness network: skipped, RUNPOD_NETWORK_CHECK_TARGET=off");
      expect(dev.output()).toMatch(/fitness memory: [\d.]+ GB available/);
      expect(dev.output()).not.toContain("8.8.8.8");
    } finally {
      await dev.stop();
    }
  }, 90_000);

  it("runs it against the target the shell sets", async () => {
    const server = createServer((socket) => socket.end());
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    const target = `127.0.0.1:${(server.address() as AddressInfo).port}`;
    const dev = startCli(["dev", "handler.ts", "--port", "0"], {
      cwd: tmp,
      env: checksOn({ RUNPOD_NETWORK_CHECK_TARGET: target }),
    });
    try {
      await dev.waitFor(/runlet dev: worker w1 ready in/, 60_000);
      expect(dev.output()).toContain(`fitness network: connected to ${target} in`);
    } finally {
      await dev.stop();
      server.close();
    }
  }, 90_000);
});
