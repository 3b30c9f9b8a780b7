import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, posix } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import {
  APT_LEFTOVERS,
  CUDA_BASE_IMAGE,
  IMAGE_LAYOUT,
  NPM_CI_HINT,
  renderProjectDockerfile,
  WARM_COMPILE_CACHE_FLAG,
  WORKER_NODE_FLAGS,
} from "../../src/cli/dockerfile.js";
import { RUNLET_ROOT, TEMPLATE_NAMES } from "../../src/cli/paths.js";

interface Instruction {
  readonly op: string;
  readonly args: string;
}

// Docker's variable syntax (`${NAME}`) appears in plain strings below on purpose.
const FROM_BASE = "$" + "{BASE_IMAGE}";
const FROM_RUNLET_BASE = "$" + "{RUNLET_BASE_IMAGE}";
const NODE_MAJOR_CHECK = 'node --version | grep -q "^v$' + '{NODE_MAJOR}\\."';

/** Splits a Dockerfile into instructions (comments dropped, `\` continuations joined). */
function parseDockerfile(text: string): Instruction[] {
  const logical: string[] = [];
  let pending = "";
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (pending === "" && (line === "" || line.startsWith("#"))) continue;
    if (line.endsWith("\\")) {
      pending += `${line.slice(0, -1).trimEnd()} `;
      continue;
    }
    logical.push(pending + line);
    pending = "";
  }
  return logical.map((l) => {
    const space = l.indexOf(" ");
    return { op: l.slice(0, space).toUpperCase(), args: l.slice(space + 1).trim() };
  });
}

function only(instructions: Instruction[], op: string): string[] {
  return instructions.filter((i) => i.op === op).map((i) => i.args);
}

/** The value an `ARG NAME=default` declares. */
function argDefault(instructions: Instruction[], name: string): string | undefined {
  for (const a of only(instructions, "ARG")) {
    const [k, v] = a.split("=", 2);
    if (k === name) return v;
  }
  return undefined;
}

const base = parseDockerfile(readFileSync(join(RUNLET_ROOT, "Dockerfile.base"), "utf8"));

describe("Dockerfile.base", () => {
  it("starts from Node 22 on Debian slim unless BASE_IMAGE names another image", () => {
    expect(only(base, "FROM")).toEqual([FROM_BASE]);
    expect(argDefault(base, "BASE_IMAGE")).toBe("node:22-bookworm-slim");
    expect(argDefault(base, "NODE_MAJOR")).toBe("22");
  });

  it("installs Node only when the base image has none, and checks the major version", () => {
    const run = only(base, "RUN").join(" ");
    expect(run).toContain("if ! command -v node");
    expect(run).toContain("sha256sum -c -");
    expect(run).toContain(NODE_MAJOR_CHECK);
  });

  it("runs tini as PID 1 and the bundle as the non-root user in the workdir", () => {
    expect(only(base, "WORKDIR")).toEqual([IMAGE_LAYOUT.workdir]);
    expect(only(base, "USER")).toEqual([IMAGE_LAYOUT.user]);
    expect(only(base, "RUN").join(" ")).toContain(`--no-install-recommends tini`);
    expect(only(base, "RUN").join(" ")).toMatch(new RegExp(`useradd .* ${IMAGE_LAYOUT.user};`));
    expect(JSON.parse(only(base, "ENTRYPOINT")[0] ?? "null")).toEqual(IMAGE_LAYOUT.entrypoint);
    expect(JSON.parse(only(base, "CMD")[0] ?? "null")).toEqual(IMAGE_LAYOUT.cmd);
    expect(IMAGE_LAYOUT.cmd).toEqual(["node", ...WORKER_NODE_FLAGS, IMAGE_LAYOUT.bundlePath]);
  });

  it("sets production mode and source-mapped stack traces", () => {
    const env = only(base, "ENV").join(" ");
    expect(env).toContain("NODE_ENV=production");
    expect(env).toContain("NODE_OPTIONS=--enable-source-maps");
  });
});

/** The stages of a multi-stage Dockerfile: each FROM and the instructions after it. */
function stages(instructions: Instruction[]): { from: string; body: Instruction[] }[] {
  const out: { from: string; body: Instruction[] }[] = [];
  for (const i of instructions) {
    if (i.op === "FROM") out.push({ from: i.args, body: [] });
    else out.at(-1)?.body.push(i);
  }
  return out;
}

const FROM_BUILD = "$" + "{RUNLET_BUILD_IMAGE}";

/**
 * Allocates objects that live a little while (as a job's do) and prints the largest young
 * generation V8 gave itself meanwhile, MiB.
 */
const YOUNG_GENERATION_PROBE = `
const v8 = require("node:v8");
const keep = new Array(4096);
let max = 0;
for (let i = 0; i < 300000; i++) {
  keep[i % 4096] = { i, s: "x".repeat(64) + i };
  if (i % 1000 === 0) {
    const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === "new_space");
    max = Math.max(max, young.space_size);
  }
}
process.stdout.write(String(max / 1048576));
`;

describe("the Node flags the image runs the worker with", () => {
  const youngMiB = async (flags: readonly string[]) =>
    Number((await promisify(execFile)(process.execPath, [...flags, "-e", YOUNG_GENERATION_PROBE])).stdout);

  it("are accepted by this Node and keep the young generation within 2 × 2 MiB, where it grows larger without", async () => {
    // Node refuses an unknown flag (exit 9), so a flag V8 dropped fails here, not in a container.
    const capped = await youngMiB(WORKER_NODE_FLAGS);
    expect(capped).toBeGreaterThan(0);
    expect(capped).toBeLessThanOrEqual(4);
    // V8's own limit depends on the machine's memory (2 × 16 MiB on 16 GiB and more).
    expect(await youngMiB([])).toBeGreaterThan(capped);
  });
});

describe("the project Dockerfile runlet init and runlet build write", () => {
  const plain = parseDockerfile(renderProjectDockerfile());

  it("builds in Node 22 slim stages and runs on Node 22 slim unless build arguments name others", () => {
    expect(only(plain, "FROM")).toEqual([
      `${FROM_BUILD} AS manifests`,
      `${FROM_BUILD} AS build`,
      FROM_RUNLET_BASE,
    ]);
    expect(argDefault(plain, "RUNLET_BUILD_IMAGE")).toBe("node:22-bookworm-slim");
    expect(argDefault(plain, "RUNLET_BASE_IMAGE")).toBe("node:22-bookworm-slim");
    expect(IMAGE_LAYOUT.baseImage).toBe("node:22-bookworm-slim");
  });

  it("runs npm ci on the manifests alone, then the project's build script on all its files", () => {
    const [, build] = stages(plain);
    expect(build?.body).toEqual([
      { op: "ARG", args: "NODE_EXTRA_CA_CERTS" },
      { op: "WORKDIR", args: IMAGE_LAYOUT.buildDir },
      { op: "COPY", args: "--from=manifests /manifests/ ./" },
      {
        op: "RUN",
        args: `npm ci --no-audit --no-fund || { echo ${JSON.stringify(NPM_CI_HINT)} >&2; exit 1; }`,
      },
      { op: "COPY", args: ". ." },
      { op: "RUN", args: "npm run build" },
    ]);
  });

  it("points a failed npm ci at the proxy CA fix, and keeps its exit code failing", async () => {
    // The build stage's RUN line, run by sh as Docker runs it, with an npm that fails as npm does
    // behind a proxy that re-signs TLS.
    const run = only(stages(plain)[1]?.body ?? [], "RUN")[0] ?? "";
    const bin = await mkdtemp(join(tmpdir(), "runlet-npm-ci-"));
    try {
      await writeFile(
        join(bin, "npm"),
        '#!/bin/sh\necho "npm error Exit handler never called!" >&2\nexit 1\n',
        {
          mode: 0o755,
        },
      );
      const failed = await promisify(execFile)("/bin/sh", ["-c", run], {
        env: { PATH: `${bin}:/usr/bin:/bin` },
      }).catch((err: { code: number; stderr: string }) => err);
      expect("code" in failed ? failed.code : 0).toBe(1);
      expect(failed.stderr).toBe(`npm error Exit handler never called!\n${NPM_CI_HINT}\n`);
      expect(NPM_CI_HINT).toContain("--build-arg NODE_EXTRA_CA_CERTS=");
      expect(NPM_CI_HINT).toContain("Behind a proxy that re-signs TLS");
    } finally {
      await rm(bin, { recursive: true, force: true });
    }
  });

  it("picks package.json, the lock file, .npmrc and every local tarball outside node_modules for npm ci", async () => {
    const [manifests] = stages(plain);
    expect(manifests?.body.map((i) => i.op)).toEqual(["COPY", "RUN"]);
    expect(manifests?.body[0]?.args).toBe(". /ctx");
    const dir = await mkdtemp(join(tmpdir(), "runlet-manifests-"));
    try {
      const files: Record<string, string> = {
        "package.json": "{}",
        "package-lock.json": "{}",
        ".npmrc": "fund=false",
        "vendor/runlet-0.1.0.tgz": "tarball",
        "runlet-0.1.0.tgz": "tarball at the root",
        "src/handler.ts": "export default 1;",
        "node_modules/dep/old.tgz": "installed, not a manifest",
      };
      for (const [rel, text] of Object.entries(files)) {
        await mkdir(dirname(join(dir, "ctx", rel)), { recursive: true });
        await writeFile(join(dir, "ctx", rel), text);
      }
      // The stage's own script, run by sh with its two absolute folders moved under `dir`.
      const script = (manifests?.body[1]?.args ?? "")
        .replaceAll("/manifests", join(dir, "manifests"))
        .replaceAll("/ctx", join(dir, "ctx"));
      await promisify(execFile)("sh", ["-c", script]);
      const picked = (await readdir(join(dir, "manifests"), { recursive: true })).sort();
      expect(picked).toEqual([
        ".npmrc",
        "package-lock.json",
        "package.json",
        "runlet-0.1.0.tgz",
        "vendor",
        "vendor/runlet-0.1.0.tgz",
      ]);
      expect(await readFile(join(dir, "manifests", "vendor", "runlet-0.1.0.tgz"), "utf8")).toBe("tarball");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  for (const [label, options] of [
    ["a plain project", {}],
    ["a project on onnxruntime-node", { onnxruntime: true }],
  ] as const) {
    it(`puts the bundle where the image's CMD runs it, under tini, as the non-root user (${label})`, () => {
      const final = stages(parseDockerfile(renderProjectDockerfile(options))).at(-1);
      const body = final?.body ?? [];
      expect(final?.from).toBe(FROM_RUNLET_BASE);
      // Root for the set-up (the CUDA base ends as runlet), and the last USER is the worker's.
      expect(body[0]).toEqual({ op: "USER", args: "root" });
      expect(only(body, "USER").at(-1)).toBe(IMAGE_LAYOUT.user);
      const copies = only(body, "COPY");
      const bundleCopy = `--from=build ${IMAGE_LAYOUT.buildDir}/dist/ ${IMAGE_LAYOUT.workdir}/`;
      // dist/ whole: the bundle, and in dist/node_modules what it cannot hold.
      expect(copies).toEqual([bundleCopy]);
      expect(posix.join(IMAGE_LAYOUT.workdir, "worker.mjs")).toBe(IMAGE_LAYOUT.bundlePath);
      expect(only(body, "WORKDIR")).toEqual([IMAGE_LAYOUT.workdir]);
      expect(JSON.parse(only(body, "ENTRYPOINT")[0] ?? "null")).toEqual(IMAGE_LAYOUT.entrypoint);
      expect(JSON.parse(only(body, "CMD")[0] ?? "null")).toEqual(IMAGE_LAYOUT.cmd);
      const setup = only(body, "RUN")[0] ?? "";
      expect(setup).toContain("if ! [ -x /usr/bin/tini ]; then");
      expect(setup).toContain("apt-get install -y --no-install-recommends tini;");
      expect(setup).toContain(
        `id -u ${IMAGE_LAYOUT.user} >/dev/null 2>&1 || useradd --system --uid ${IMAGE_LAYOUT.uid} `,
      );
      // No package manager at run time.
      expect(setup).toContain("rm -rf /usr/local/lib/node_modules/npm ");
      const env = only(body, "ENV").join(" ");
      expect(env).toContain("NODE_ENV=production");
      expect(env).toContain("NODE_OPTIONS=--enable-source-maps");
      expect(env).toContain(`NODE_COMPILE_CACHE=${IMAGE_LAYOUT.compileCacheDir}`);
      expect(JSON.parse(only(body, "RUN")[1] ?? "null")).toEqual([
        ...IMAGE_LAYOUT.cmd,
        WARM_COMPILE_CACHE_FLAG,
      ]);
    });
  }

  it("takes onnxruntime-node's install switch as a build argument, and turns its telemetry off, only in a project that uses it", () => {
    const args = (options: { onnxruntime?: boolean }) =>
      only(stages(parseDockerfile(renderProjectDockerfile(options)))[1]?.body ?? [], "ARG");
    expect(args({ onnxruntime: true })).toEqual(["NODE_EXTRA_CA_CERTS", "ONNXRUNTIME_NODE_INSTALL"]);
    expect(args({})).toEqual(["NODE_EXTRA_CA_CERTS"]);
    const finalEnv = (options: { onnxruntime?: boolean }) =>
      only(stages(parseDockerfile(renderProjectDockerfile(options))).at(-1)?.body ?? [], "ENV").join(" ");
    expect(finalEnv({ onnxruntime: true })).toContain("ORT_DISABLE_TELEMETRY=1");
    expect(finalEnv({})).not.toContain("ORT_DISABLE_TELEMETRY");
    // The build stage installs nothing apart from npm ci: runlet build fills dist/node_modules.
    const runs = only(
      stages(parseDockerfile(renderProjectDockerfile({ onnxruntime: true })))[1]?.body ?? [],
      "RUN",
    );
    expect(runs).toEqual([
      `npm ci --no-audit --no-fund || { echo ${JSON.stringify(NPM_CI_HINT)} >&2; exit 1; }`,
      "npm run build",
    ]);
  });

  it("leaves none of apt's lists, caches or logs in the tini layer, nor in Dockerfile.base's", () => {
    const setup = only(stages(parseDockerfile(renderProjectDockerfile())).at(-1)?.body ?? [], "RUN")[0] ?? "";
    const baseRun = only(base, "RUN")[0] ?? "";
    for (const run of [setup, baseRun]) {
      expect(run).toContain("apt-get clean;");
      expect(run).toContain(`rm -rf ${APT_LEFTOVERS};`);
      // Cleaned in the same RUN as the install: a later layer cannot shrink an earlier one.
      expect(run.indexOf("apt-get clean")).toBeGreaterThan(run.indexOf("apt-get install"));
    }
    for (const path of ["/var/lib/apt/lists/*", "/var/cache/apt/*.bin", "/var/cache/apt/archives/*.deb"]) {
      expect(APT_LEFTOVERS.split(" "), path).toContain(path);
    }
  });

  it("starts a CUDA project's final stage from CUDA 12's runtime, with the build stage's Node", () => {
    const parsed = stages(parseDockerfile(renderProjectDockerfile({ cuda: true })));
    const text = renderProjectDockerfile({ cuda: true });
    expect(text).toContain(`ARG RUNLET_BASE_IMAGE=${CUDA_BASE_IMAGE}\n`);
    expect(CUDA_BASE_IMAGE).toMatch(/^nvidia\/cuda:12\.\d+\.\d+-runtime-/);
    const final = parsed.at(-1)?.body ?? [];
    expect(only(final, "COPY")).toEqual([
      "--from=build /usr/local/bin/node /usr/local/bin/node",
      `--from=build ${IMAGE_LAYOUT.buildDir}/dist/ ${IMAGE_LAYOUT.workdir}/`,
    ]);
    // The build stage stays Node's image: npm ci and runlet build need npm.
    expect(text).toContain(`ARG RUNLET_BUILD_IMAGE=${IMAGE_LAYOUT.buildImage}\n`);
    expect(renderProjectDockerfile()).not.toContain("nvidia/cuda");
  });

  it("is not kept as a copy in any starter template (runlet init renders it)", () => {
    for (const name of TEMPLATE_NAMES) {
      expect(existsSync(join(RUNLET_ROOT, "templates", name, "Dockerfile"))).toBe(false);
    }
  });
});
