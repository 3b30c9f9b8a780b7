import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importPeer, isMissingPackage, missingPeerError, s3LoadError } from "../../src/optional-peers.js";
import { REPO_ROOT, runNode } from "../support/run-cli.js";

let tmp: string;
beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-peers-"));
});
afterAll(async () => {
  await rm(tmp, { recursive: true, force: true });
});

/**
 * Imports `specifier` from a module in a folder with no node_modules, in a Node child process
 * (Node's own loader, as in a worker; vitest's runner reports such failures its own way), and
 * returns what runlet's built s3LoadError makes of the failure.
 */
async function mappedFailure(specifier: string): Promise<{ code: string; message: string; same: boolean }> {
  const file = join(tmp, `imports-${specifier.replace(/\W/g, "_")}.mjs`);
  await writeFile(file, `import ${JSON.stringify(specifier)};\n`);
  const script = `
    const { s3LoadError } = await import(${JSON.stringify(pathToFileURL(join(REPO_ROOT, "dist", "optional-peers.js")).href)});
    const err = await import(${JSON.stringify(pathToFileURL(file).href)}).then(() => undefined, (e) => e);
    const mapped = s3LoadError(err);
    process.stdout.write(JSON.stringify({ code: mapped.code, message: mapped.message, same: mapped === err }));`;
  const r = await runNode(["--input-type=module", "-e", script]);
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { code: string; message: string; same: boolean };
}

describe("optional peers", () => {
  it("turns a missing AWS SDK into RUNLET_MISSING_PEER naming all three packages and the install line", async () => {
    const mapped = await mappedFailure("@aws-sdk/client-s3");
    expect(mapped.code).toBe("RUNLET_MISSING_PEER");
    expect(mapped.message).toMatch(
      /needs @aws-sdk\/client-s3, @aws-sdk\/lib-storage, @aws-sdk\/s3-request-presigner, which are not installed \(optional for runlet\): npm install @aws-sdk\/client-s3@\^\S+ @aws-sdk\/lib-storage@\^\S+ @aws-sdk\/s3-request-presigner@\^\S+$/,
    );
  });

  it("passes any other failure through unchanged", async () => {
    const other = await mappedFailure("some-other-package-runlet-never-uses");
    expect(other).toMatchObject({ code: "ERR_MODULE_NOT_FOUND", same: true });
    const thrown = new TypeError("boom");
    expect(s3LoadError(thrown)).toBe(thrown);
    expect(isMissingPackage(thrown, ["@aws-sdk/client-s3"])).toBe(false);
  });

  it("importPeer loads an installed peer and names a CLI tool for devDependencies", async () => {
    const esbuild = await importPeer<{ version: string }>("esbuild", "esbuild", "runlet build");
    expect(typeof esbuild.version).toBe("string");
    expect(missingPeerError(["tsx"], "a TypeScript handler (x.ts)").message).toMatch(
      /^a TypeScript handler \(x\.ts\) needs the package tsx, which is not installed \(optional for runlet\): npm install --save-dev tsx@\^\S+$/,
    );
  });
});
