import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, delimiter, dirname, join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { packStaged } from "../../scripts/pack-staged.mjs";
import { childEnv, REPO_ROOT } from "../support/run-cli.js";
import { NPM_CLI } from "./npm-run.js";

// runlet the way a user gets it: `npm pack`, the tarball installed into a fresh project, and
// only what that install holds (plain Node, tsc, node_modules/.bin/runlet). One install serves
// every check below. npm fetches third-party packages as `npm ci` does (from its cache first).

/** The commands `runlet --help` lists, in order. */
const COMMANDS = ["init", "dev", "test", "build", "start", "harness", "deploy"];

/** What a finished process printed and how it exited. */
interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** The environment of every child: the test's, without platform variables and npm's script context. */
function env(): NodeJS.ProcessEnv {
  const out = childEnv();
  for (const key of Object.keys(out)) {
    // These describe the `npm test` that runs this file; an npm started inside a temporary
    // project must find that project, not this repository.
    if (/^(npm_package_|npm_lifecycle_|npm_config_local_prefix$|INIT_CWD$)/.test(key)) delete out[key];
  }
  // The `#!/usr/bin/env node` of node_modules/.bin/runlet finds the Node running the tests.
  out["PATH"] = `${dirname(process.execPath)}${delimiter}${out["PATH"] ?? ""}`;
  return out;
}

/** Runs `file args...` in `cwd` to completion; killed after `timeoutMs` (the test then fails on the code). */
function exec(file: string, args: readonly string[], cwd: string, timeoutMs = 240_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, [...args], { cwd, env: env(), stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      stdout += d;
    });
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

function npm(args: readonly string[], cwd: string): Promise<Run> {
  return exec(process.execPath, [NPM_CLI, ...args], cwd);
}

const QUICK_INSTALL = ["--no-audit", "--no-fund", "--prefer-offline"];

/** The version of a package this repository has installed, so npm's cache already holds it. */
async function installedVersion(name: string): Promise<string> {
  const manifest = JSON.parse(await readFile(join(REPO_ROOT, "node_modules", name, "package.json"), "utf8"));
  return (manifest as { version: string }).version;
}

let tmp: string;
let tarball: string;
/** The fresh project runlet's tarball is installed into. */
let app: string;
/** node_modules/.bin/runlet of that install. */
let runlet: string;
let version: string;

beforeAll(async () => {
  tmp = await mkdtemp(join(tmpdir(), "runlet-consumer-"));
  version = (JSON.parse(await readFile(join(REPO_ROOT, "package.json"), "utf8")) as { version: string })
    .version;
  // The tarball `npm pack` makes (npm's file list, the package's README and package.json), packed
  // from a copy so the checkout never changes under the tests that read it; dist/ is already
  // fresh (the suite's setup). test/package/pack-manifest.process.test.ts runs the real prepack hooks.
  tarball = packStaged(tmp).tarball;

  app = join(tmp, "app");
  await mkdir(app);
  await writeFile(join(app, "package.json"), JSON.stringify({ name: "app", private: true, type: "module" }));
  const deps = await Promise.all(
    ["typescript", "@types/node", "zod"].map(async (name) => `${name}@${await installedVersion(name)}`),
  );
  const install = await npm(["install", ...QUICK_INSTALL, tarball, ...deps], app);
  expect(install.code, install.stderr).toBe(0);
  runlet = join(app, "node_modules", ".bin", "runlet");
}, 600_000);

afterAll(async () => {
  if (tmp === undefined) return;
  // npx keeps each package it ran in its cache's _npx/ folder: drop the ones made from this tarball.
  const cache = (await npm(["config", "get", "cache"], tmp)).stdout.trim();
  const npxDirs = await readdir(join(cache, "_npx")).catch(() => [] as string[]);
  for (const d of npxDirs) {
    const manifest = await readFile(join(cache, "_npx", d, "package.json"), "utf8").catch(() => "");
    if (manifest.includes(tmp)) await rm(join(cache, "_npx", d), { recursive: true, force: true });
  }
  await rm(tmp, { recursive: true, force: true });
});

/** Imports each specifier in plain Node and records every module URL Node resolved meanwhile. */
const IMPORT_ALL = `
import { register } from "node:module";
import { MessageChannel } from "node:worker_threads";
const hooks = "let port; export function initialize(d) { port = d.port; }" +
  " export async function resolve(s, c, next) { const r = await next(s, c); port.postMessage(r.url); return r; }";
const { port1, port2 } = new MessageChannel();
register("data:text/javascript," + encodeURIComponent(hooks), { data: { port: port2 }, transferList: [port2] });
const resolved = [];
const last = "data:text/javascript,export default 0";
const seenAll = new Promise((done) => port1.on("message", (url) => (url === last ? done() : resolved.push(url))));
const exported = {};
for (const specifier of JSON.parse(process.argv[2])) exported[specifier] = Object.keys(await import(specifier)).sort();
await import(last);
await seenAll;
port1.close();
process.stdout.write(JSON.stringify({ exported, resolved }));
`;

describe("runlet installed from its tarball", () => {
  it("ships the build, the CLI entry, templates and docs, and no tests or sources", async () => {
    const listing = await exec("tar", ["-tzf", tarball], tmp);
    const files = listing.stdout.split("\n").filter((f) => f !== "");
    expect(files).toContain("package/dist/index.js");
    expect(files).toContain("package/dist/index.d.ts");
    expect(files).toContain("package/dist/index.js.map");
    expect(files).toContain("package/bin/runlet.mjs");
    expect(files).toContain("package/templates/basic/package.json");
    expect(files).toContain("package/Dockerfile.base");
    expect(files).toContain("package/README.md");
    // package.json says MIT: the licence text ships with it.
    expect(files).toContain("package/LICENSE");
    // The shipped package.json: no repository scripts (prepare and prepack would run files that
    // do not ship), no devDependencies; only what the client and the worker load as dependencies.
    const shipped = JSON.parse(
      (await exec("tar", ["-xzOf", tarball, "package/package.json"], tmp)).stdout,
    ) as Record<string, unknown>;
    expect(shipped["scripts"]).toBeUndefined();
    expect(shipped["devDependencies"]).toBeUndefined();
    expect(shipped["overrides"]).toBeUndefined();
    expect(Object.keys(shipped["dependencies"] as object).sort()).toEqual(["pino", "undici", "zod"]);
    const clutter = files.filter((f) =>
      /^package\/(src|test|bench|examples|scripts)\/|\.tsbuildinfo$|^package\/dist\/\.built$/.test(f),
    );
    expect(clutter).toEqual([]);
  });

  it("(a) imports every subpath in plain Node without loading tsx or esbuild", async () => {
    const manifest = JSON.parse(
      await readFile(join(app, "node_modules", "runlet", "package.json"), "utf8"),
    ) as {
      exports: Record<string, unknown>;
    };
    const specifiers = Object.keys(manifest.exports)
      .filter((s) => s !== "./package.json")
      .map((s) => (s === "." ? "runlet" : `runlet/${s.slice(2)}`));
    expect(specifiers).toEqual(
      expect.arrayContaining([
        "runlet",
        "runlet/client",
        "runlet/testing",
        "runlet/harness",
        "runlet/management",
      ]),
    );
    await writeFile(join(app, "import-all.mjs"), IMPORT_ALL);
    const r = await exec(process.execPath, ["import-all.mjs", JSON.stringify(specifiers)], app);
    expect(r.code, r.stderr).toBe(0);
    const { exported, resolved } = JSON.parse(r.stdout) as {
      exported: Record<string, string[]>;
      resolved: string[];
    };
    for (const s of specifiers) expect(exported[s]?.length, s).toBeGreaterThan(0);
    expect(exported["runlet"]).toContain("defineHandler");
    expect(exported["runlet/client"]).toContain("createClient");
    expect(exported["runlet/testing"]).toContain("createHarness");
    expect(exported["runlet/harness"]).toContain("startHarness");
    expect(exported["runlet/management"]).toContain("createManagementClient");
    // The hook sees the build and third-party packages (so the check below can fail)...
    expect(resolved.some((u) => u.includes("/node_modules/runlet/dist/"))).toBe(true);
    expect(resolved.some((u) => u.includes("/node_modules/zod/"))).toBe(true);
    // ...and neither of the CLI's heavy tools.
    expect(resolved.filter((u) => /\/node_modules\/(tsx|esbuild)\//.test(u))).toEqual([]);
    // A client-only project installs none of the optional peers: no bundler, no AWS SDK.
    const installed = [
      ...(await readdir(join(app, "node_modules"))),
      ...(await readdir(join(app, "node_modules", "@types"))),
    ];
    for (const heavy of ["esbuild", "tsx", "pino-pretty", "@aws-sdk", "@esbuild", "@smithy"]) {
      expect(installed, heavy).not.toContain(heavy);
    }
  }, 120_000);

  it("(b) type-checks a strict consumer (exactOptionalPropertyTypes, skipLibCheck: false)", async () => {
    await writeFile(
      join(app, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          target: "ES2023",
          lib: ["ES2023", "ESNext.Disposable"],
          module: "NodeNext",
          moduleResolution: "NodeNext",
          types: ["node"],
          strict: true,
          exactOptionalPropertyTypes: true,
          noUncheckedIndexedAccess: true,
          noPropertyAccessFromIndexSignature: true,
          verbatimModuleSyntax: true,
          skipLibCheck: false,
          noEmit: true,
        },
        files: ["consumer.ts"],
      }),
    );
    await writeFile(
      join(app, "consumer.ts"),
      `import { defineHandler, type HandlerContext, isRunletError, JobError, VERSION } from "runlet";
import { createClient, type JobRecord } from "runlet/client";
import { startHarness } from "runlet/harness";
import { createManagementClient } from "runlet/management";
import { createHarness } from "runlet/testing";
import { z } from "zod";

const handler = defineHandler({
  input: z.object({ text: z.string(), upper: z.boolean().default(false) }),
  async handler({ input, log }: HandlerContext<{ text: string; upper: boolean }>) {
    log.info({ upper: input.upper }, "echoing");
    if (input.text === "") throw new JobError("text is empty");
    return { echo: input.upper ? input.text.toUpperCase() : input.text };
  },
});

export async function roundTrip(): Promise<string> {
  await using h = await createHarness({ handler });
  const job = await h.endpoint.runsync({ input: { text: "hi" } });
  const client = createClient({ apiKey: h.apiKey, baseUrl: h.url, requestTimeoutMs: 5_000 });
  const record: JobRecord = await client.endpoint("local").status(job.id);
  return \`\${VERSION} \${record.status}\`;
}

export async function endpoints(): Promise<number> {
  const harness = await startHarness({ endpoints: [{ id: "local" }] });
  try {
    const management = createManagementClient({ apiKey: "key", baseUrl: harness.url });
    return (await management.serverless.list()).length;
  } catch (err) {
    if (isRunletError(err)) return -1;
    throw err;
  } finally {
    await harness.close();
  }
}
`,
    );
    const r = await exec(
      process.execPath,
      [join(app, "node_modules", "typescript", "bin", "tsc"), "-p", "."],
      app,
    );
    expect(`${r.stdout}${r.stderr}`).toBe("");
    expect(r.code).toBe(0);
  }, 240_000);

  it("(c) node_modules/.bin/runlet answers --help and --version", async () => {
    const help = await exec(runlet, ["--help"], app);
    expect(help.code, help.stderr).toBe(0);
    expect(help.stderr).toBe("");
    const shape =
      /^runlet (\S+): write, test and ship queue-based serverless workers\n\nUsage: runlet <command> \[options\]\n\nCommands:\n((?: {2}\w+ +\S[^\n]*\n)+)\nRun `runlet <command> --help` for a command's options\.\n$/;
    const m = shape.exec(help.stdout);
    expect(m, help.stdout).not.toBeNull();
    expect(m?.[1]).toBe(version);
    expect(
      m?.[2]
        ?.split("\n")
        .filter((l) => l !== "")
        .map((l) => l.trim().split(/ +/)[0]),
    ).toEqual(COMMANDS);

    const v = await exec(runlet, ["--version"], app);
    expect(v).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
  }, 120_000);

  it("(c) node_modules/.bin/runlet tests a .mjs handler and a .ts handler", async () => {
    await writeFile(
      join(app, "plain.mjs"),
      'import { defineHandler } from "runlet";\nexport default defineHandler({ handler: ({ input }) => ({ got: input }) });\n',
    );
    await writeFile(
      join(app, "typed.ts"),
      `import { defineHandler } from "runlet";
import { z } from "zod";

export default defineHandler({
  input: z.object({ n: z.number() }),
  handler: ({ input }): { doubled: number } => ({ doubled: input.n * 2 }),
});
`,
    );
    const [plain, typedWithoutTsx, buildWithoutEsbuild] = await Promise.all([
      exec(runlet, ["test", "plain.mjs", "--input", '{"input": {"a": 1}}'], app),
      exec(runlet, ["test", "typed.ts", "--input", '{"input": {"n": 21}}'], app),
      exec(runlet, ["build", "plain.mjs"], app),
    ]);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toBe('{\n  "got": {\n    "a": 1\n  }\n}\n');
    expect(plain.stderr).toMatch(/^runlet test: COMPLETED in \d+ ms$/m);
    // This project installed runlet alone: the tools some commands need are optional peers,
    // asked for by name with the install line.
    expect(typedWithoutTsx.code).toBe(1);
    expect(typedWithoutTsx.stderr).toContain(
      `runlet test: a TypeScript handler (${join(app, "typed.ts")}) needs the package tsx, which is not installed (optional for runlet): npm install --save-dev tsx@^`,
    );
    expect(typedWithoutTsx.stderr).toMatch(/ \(RUNLET_MISSING_PEER\)\n$/);
    expect(buildWithoutEsbuild.code).toBe(1);
    expect(buildWithoutEsbuild.stderr).toMatch(
      /^runlet build: runlet build needs the package esbuild, which is not installed \(optional for runlet\): npm install --save-dev esbuild@\^\S+ \(RUNLET_MISSING_PEER\)\n$/,
    );
    expect(existsSync(join(app, "dist"))).toBe(false);

    const tsx = await npm(
      ["install", ...QUICK_INSTALL, "--save-dev", `tsx@${await installedVersion("tsx")}`],
      app,
    );
    expect(tsx.code, tsx.stderr).toBe(0);
    const typed = await exec(runlet, ["test", "typed.ts", "--input", '{"input": {"n": 21}}'], app);
    expect(typed.code, typed.stderr).toBe(0);
    expect(typed.stdout).toBe('{\n  "doubled": 42\n}\n');
  }, 120_000);

  it("(d) a built OpenAI handler runs as a load-balancing worker: health 204 then 200, plain, streamed and OpenAI requests (issue 52)", async () => {
    // After (c): this project had no bundler until now. esbuild is the one tool `runlet build` needs.
    const esbuild = await npm(
      ["install", ...QUICK_INSTALL, "--save-dev", `esbuild@${await installedVersion("esbuild")}`],
      app,
    );
    expect(esbuild.code, esbuild.stderr).toBe(0);
    await writeFile(
      join(app, "openai-lb.mjs"),
      `import { setTimeout as sleep } from "node:timers/promises";
import { defineOpenAIHandler } from "runlet/openai";

const words = (text) => \`You said: \${text}\`.split(" ").map((w, i) => (i === 0 ? w : \` \${w}\`));

export default defineOpenAIHandler({
  models: ["echo-1"],
  concurrency: 2,
  // Health answers 204 while setup runs (long enough for a loaded machine to see it), then 200.
  async setup() {
    await sleep(3_000);
  },
  async *chat(request) {
    const last = request.messages.at(-1)?.content;
    yield* words(typeof last === "string" ? last : "");
  },
  async *handler({ input }) {
    yield* words(String(input.text));
  },
});
`,
    );
    const build = await exec(runlet, ["build", "openai-lb.mjs"], app);
    expect(build.code, `${build.stdout}\n${build.stderr}`).toBe(0);
    expect(build.stdout).toMatch(/^Built dist\/worker\.mjs /m);

    // PORT set and no queue variables (env() drops the platform's): the bundle serves HTTP.
    const worker = spawn(process.execPath, ["dist/worker.mjs"], {
      cwd: app,
      env: { ...env(), PORT: "0", RUNLET_LB_HOST: "127.0.0.1", RUNPOD_NETWORK_CHECK_TARGET: "off" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    worker.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    worker.stderr.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    const exited = new Promise<number | null>((resolve) => worker.once("close", resolve));
    try {
      let port: number | undefined;
      for (const until = Date.now() + 30_000; port === undefined; await sleep(10)) {
        if (worker.exitCode !== null || Date.now() > until) throw new Error(`no port bound:\n${out}`);
        const m = /listening on port (\d+)/.exec(out);
        if (m !== null) port = Number(m[1]);
      }
      const url = `http://127.0.0.1:${port}`;
      // Health from the moment the port is bound: 204 through setup, then 200, nothing else.
      const seen: number[] = [];
      for (const until = Date.now() + 30_000; seen.at(-1) !== 200; await sleep(50)) {
        if (Date.now() > until) throw new Error(`health never said 200 (${seen.join(" ")}):\n${out}`);
        seen.push((await fetch(`${url}/ping`)).status);
      }
      expect(seen[0]).toBe(204);
      expect(new Set(seen)).toEqual(new Set([204, 200]));
      expect(seen.indexOf(200)).toBe(seen.length - 1);

      const headers = { "content-type": "application/json" };
      const plain = await fetch(`${url}/runsync`, {
        method: "POST",
        headers,
        body: JSON.stringify({ input: { text: "plain words" } }),
      });
      expect(plain.status).toBe(200);
      expect(await plain.json()).toMatchObject({
        status: "COMPLETED",
        output: ["You", " said:", " plain", " words"],
      });

      const streamed = await fetch(`${url}/stream`, {
        method: "POST",
        headers,
        body: JSON.stringify({ input: { text: "streamed" } }),
      });
      expect(streamed.headers.get("content-type")).toMatch(/^text\/event-stream/);
      const events = (await streamed.text()).split("\n\n").filter((e) => e !== "");
      expect(events.slice(0, 3)).toEqual(['data: "You"', 'data: " said:"', 'data: " streamed"']);
      expect(events[3]).toMatch(/^event: done\ndata: \{.*"status":"COMPLETED"/);

      const client = new OpenAI({ apiKey: "unused-by-the-worker", baseURL: `${url}/v1`, maxRetries: 0 });
      const stream = await client.chat.completions.create({
        model: "echo-1",
        messages: [{ role: "user", content: "hello there" }],
        stream: true,
      });
      const deltas: string[] = [];
      let finish: string | null | undefined;
      for await (const chunk of stream) {
        const content = chunk.choices[0]?.delta.content;
        if (content) deltas.push(content);
        finish = chunk.choices[0]?.finish_reason ?? finish;
      }
      expect(deltas).toEqual(["You", " said:", " hello", " there"]);
      expect(finish).toBe("stop");

      worker.kill("SIGTERM");
      expect(await exited).toBe(0);
    } finally {
      if (worker.exitCode === null) worker.kill("SIGKILL");
    }
  }, 240_000);
});

/** Every starter runlet ships, whatever their number. */
const ALL_STARTERS = readdirSync(join(REPO_ROOT, "templates"), { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort();

/**
 * The starters taken from the tarball through install, npm test and build: `basic` in `npm test`
 * (one is what proves a packed runlet makes a project that works), every one with
 * `npm run test:starters` (RUNLET_TEST_STARTERS=all). In `npm test` every starter's own tests
 * and a type-check of all of them run against this checkout in test/cli/init-project.process.test.ts, and
 * test/cli/templates.unit.test.ts checks their files.
 */
const STARTERS = process.env["RUNLET_TEST_STARTERS"] === "all" ? ALL_STARTERS : ["basic"];

/**
 * Starters whose own `npm test` runs in `npm run test:image` instead (scripts/image/test-image.ts
 * takes the OCR starter from init through npm test to an image): here they install, type-check
 * and build. The OCR starter's tests load the real model (a minute on two loaded cores), and the
 * same handler and model code runs in test/examples/ocr.test.ts (examples/ocr re-exports the
 * starter's files; test/cli/templates.unit.test.ts keeps it so).
 */
const TESTED_IN_IMAGE_RUN = new Set(["ocr"]);

/** Runs at most `slots` of the functions given at once; the rest wait their turn, first come first served. */
function pool(slots: number): <T>(fn: () => Promise<T>) => Promise<T> {
  let free = slots;
  const waiting: Array<() => void> = [];
  return async (fn) => {
    if (free > 0) free--;
    else await new Promise<void>((resolve) => waiting.push(resolve));
    try {
      return await fn();
    } finally {
      // The slot passes straight to the next in line, or goes back.
      const next = waiting.shift();
      if (next !== undefined) next();
      else free++;
    }
  };
}

// The projects below are independent, so they run side by side, two at a time: an install waits
// on the disk and the npm cache about as much as on a core, so two overlap well on two cores
// (more only queue). `npx` inits run one at a time: they share one folder of npm's cache.
const heavy = pool(2);
const npxInit = pool(1);
/** A test's time counts from its start, its wait for a slot included. */
const PROJECT_TIMEOUT_MS = 900_000;

describe.concurrent("a new project, the way a user makes one from the tarball", () => {
  it.each(STARTERS)(
    "npx --package <tarball> runlet init --template %s, then npm install, npm test and npm run build",
    (template) =>
      heavy(async () => {
        const name = `starter-${template}`;
        const init = await npxInit(() =>
          npm(
            ["exec", "--yes", "--package", tarball, "--", "runlet", "init", name, "--template", template],
            tmp,
          ),
        );
        expect(init.code, init.stderr).toBe(0);
        const project = join(tmp, name);
        const vendored = `vendor/${basename(tarball)}`;
        expect(init.stdout).toContain(`\nIts runlet dependency is file:${vendored} (a copy of ${tarball});`);
        const pkg = JSON.parse(await readFile(join(project, "package.json"), "utf8")) as {
          dependencies: Record<string, string>;
        };
        expect(pkg.dependencies["runlet"]).toBe(`file:${vendored}`);
        // The copy inside the project is the tarball itself: the Dockerfile installs it from there.
        expect(await readFile(join(project, vendored))).toEqual(await readFile(tarball));

        const install = await npm(["install", ...QUICK_INSTALL], project);
        expect(install.code, install.stderr).toBe(0);
        if (TESTED_IN_IMAGE_RUN.has(template)) {
          // Its tests and handler still compile against the installed runlet.
          const tsc = await exec(
            process.execPath,
            [join(project, "node_modules", "typescript", "bin", "tsc"), "-p", "."],
            project,
          );
          expect(`${tsc.stdout}${tsc.stderr}`).toBe("");
          expect(tsc.code).toBe(0);
        } else {
          const test = await npm(["test"], project);
          expect(test.code, `${test.stdout}\n${test.stderr}`).toBe(0);
          expect(test.stdout).toMatch(/Tests\s+\d+ passed/);
        }
        const build = await npm(["run", "build"], project);
        expect(build.code, `${build.stdout}\n${build.stderr}`).toBe(0);
        expect(build.stdout).toMatch(/^Built dist\/worker\.mjs /m);
        expect(existsSync(join(project, "dist", "worker.mjs"))).toBe(true);
      }),
    PROJECT_TIMEOUT_MS,
  );

  it(
    "a global install's runlet init writes a project that installs: runlet packed into vendor/",
    () =>
      heavy(async () => {
        // A prefix of its own: never the machine's global folder.
        const prefix = join(tmp, "global");
        const global = await npm(["install", "--global", "--prefix", prefix, ...QUICK_INSTALL, tarball], tmp);
        expect(global.code, global.stderr).toBe(0);
        const installedAt = join(prefix, "lib", "node_modules", "runlet");
        const init = await exec(join(prefix, "bin", "runlet"), ["init", "gw"], tmp);
        expect(init.code, init.stderr).toBe(0);
        expect(init.stdout).toContain(
          `\nIts runlet dependency is file:vendor/${basename(tarball)} (packed from ${installedAt});`,
        );
        const project = join(tmp, "gw");
        // npm pack of the installed copy gives back what the tarball shipped, file for file.
        const listing = async (file: string) =>
          (await exec("tar", ["-tzf", file], tmp)).stdout
            .split("\n")
            .filter((f) => f !== "")
            .sort();
        expect(await listing(join(project, "vendor", basename(tarball)))).toEqual(await listing(tarball));

        // What this test is about is runlet, packed into vendor/, installing from there; the
        // starter's dev tools (TypeScript, vitest, esbuild, tsx) install in the basic starter's test.
        const install = await npm(["install", ...QUICK_INSTALL, "--omit=dev"], project);
        expect(install.code, install.stderr).toBe(0);
        const v = await exec(join(project, "node_modules", ".bin", "runlet"), ["--version"], project);
        expect(v).toEqual({ code: 0, stdout: `${version}\n`, stderr: "" });
      }),
    PROJECT_TIMEOUT_MS,
  );
});
