import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

// Issue 43, item 3: everything the worker sends goes through the one transport (src/http/). This
// finds HTTP sent any other way in src/: a value import of undici, a node:http(s) client (an
// import of it, or `getBuiltinModule` of it), or a call of the global `fetch`. Type-only imports
// are fine (a `Dispatcher` type in an option).

const SRC = fileURLToPath(new URL("../../src/", import.meta.url));

/** Where other HTTP is allowed, and why. */
const ALLOWED: ReadonlyArray<readonly [prefix: string, why: string]> = [
  ["http/", "the transport itself"],
  [
    "harness/",
    "the local platform: it serves HTTP, and its webhooks are the platform's sends, not the worker's",
  ],
  ["cli/", "developer commands (`runlet test` posts a job to the local harness), never the worker"],
  [
    "client/transport.ts",
    "the job API client's transport: undici, so a caller's own dispatcher (a proxy) works",
  ],
  ["management/transport.ts", "the management client's transport: undici, for the same reason"],
  [
    "worker/lb/",
    "the load-balancing worker serves HTTP (its front thread and request server); it sends none",
  ],
  [
    "client/lb-client.ts",
    "the load-balancer client (runlet/client): a user's process, not the worker; global fetch, whose SSE body it reads",
  ],
  ["s3/job-s3.ts", "the AWS SDK sends S3 requests itself; runlet only gives it keep-alive node:http agents"],
];

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? files(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );
}

/** Source text without comments, so a comment that names `fetch(` or node:http is no finding. */
function code(text: string): string {
  return text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`\\])\/\/.*$/gm, "$1");
}

/** What in `text` sends HTTP outside the transport. */
function findings(text: string): string[] {
  const src = code(text);
  const found: string[] = [];
  for (const m of src.matchAll(/^\s*import\s+(?!type\b)[^;]*?from\s+["'](undici|node:https?|https?)["']/gm)) {
    found.push(`import from ${m[1]}`);
  }
  for (const m of src.matchAll(/\b(?:import|require)\(\s*["'](undici[^"']*|node:https?|https?)["']\s*\)/g)) {
    found.push(`load of ${m[1]}`);
  }
  for (const m of src.matchAll(/getBuiltinModule\(\s*[^)]*?["'](node:https?)["']/g)) {
    found.push(`getBuiltinModule ${m[1]}`);
  }
  if (/(?<![.\w$])fetch\s*\(/.test(src)) found.push("fetch()");
  return found;
}

const all = files(SRC).map((f) => relative(SRC, f));

describe("the worker's HTTP goes through src/http/ (issue 43)", () => {
  it("finds no undici, node:http client or fetch outside the transport and the allowed places", () => {
    const outside = all
      .filter((f) => !ALLOWED.some(([prefix]) => f.startsWith(prefix)))
      .map((f) => [f, findings(readFileSync(join(SRC, f), "utf8"))] as const)
      .filter(([, found]) => found.length > 0);
    expect(outside).toEqual([]);
  });

  it("finds each kind where it is (so the check above can fail)", () => {
    const read = (f: string) => readFileSync(join(SRC, f), "utf8");
    expect(findings(read("harness/jobs/webhooks.ts"))).toContain("fetch()");
    expect(findings(read("client/transport.ts"))).toContain("import from undici");
    expect(findings(read("s3/job-s3.ts"))).toContain("import from node:http");
    expect(findings(read("http/node-client.ts")).some((f) => f.startsWith("getBuiltinModule"))).toBe(true);
    expect(findings(read("http/undici-client.ts"))).toContain("load of undici/lib/dispatcher/pool.js");
    // And nothing in comments, types or method names.
    expect(
      findings(
        '// fetch(x)\n/* import { request } from "undici" */\nimport type { Dispatcher } from "undici";\nobj.fetch(1);\nconst prefetch = 1;\n',
      ),
    ).toEqual([]);
  });
});
