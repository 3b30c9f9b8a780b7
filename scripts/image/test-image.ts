/**
 * `npm run test:image`: builds runlet's images for real with buildah (no Docker engine needed)
 * and runs one against `runlet harness` until a job completes. Not part of `npm test`: it needs
 * root, buildah, debootstrap, Debian's apt mirror and the npm registry, and takes minutes.
 *
 * 1. A stand-in for `node:22-bookworm-slim` (the upstream image cannot be pulled here), built
 *    once and kept: see stand-in.ts.
 * 2. `Dockerfile.base` (runlet's base for the CUDA case), built on the stand-in.
 * 3. A project made as a user makes one: `npm pack` here, `npx --package <tarball> runlet init
 *    my-worker` (which puts the tarball into the project's vendor/), `npm install`; then built
 *    from its own Dockerfile with no other step: `npm ci` and `runlet build` inside the image
 *    build, nothing from the host.
 * 4. Checks: the image's user is not root (configured, and `id -u` inside), no npm or
 *    node_modules at run time, and the image's entrypoint and command, run with the platform's
 *    variables, take a job from `runlet harness` on loopback and complete it.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { BUILDAH_ENV, buildah, run } from "./buildah.js";
import { ensureStandIn, STAND_IN_NAME } from "./stand-in.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const WORK = join(ROOT, ".tmp", "image");
const BASE_TAG = "localhost/runlet-base:node22";
const PROJECT_TAG = "localhost/runlet-image-check:latest";
const ENDPOINT = "image-check";

const t0 = performance.now();
function step(text: string): void {
  const s = ((performance.now() - t0) / 1000).toFixed(1).padStart(6);
  process.stdout.write(`[test:image ${s}s] ${text}\n`);
}

/** Common `buildah bud` flags: no daemon, chroot isolation, never pull (the stand-in is local). */
function bud(args: readonly string[]): Promise<string> {
  return buildah(["bud", "--isolation", "chroot", "--pull=never", "--layers=false", ...args]);
}

/**
 * When this machine reaches the registry through a proxy that re-signs TLS (its Node is given
 * the proxy's CA through NODE_EXTRA_CA_CERTS), the build's npm needs that CA too: mounted
 * read-only into the build and named through the Dockerfile's NODE_EXTRA_CA_CERTS argument.
 */
function extraCaArgs(): string[] {
  const ca = process.env["NODE_EXTRA_CA_CERTS"];
  if (ca === undefined || ca === "") return [];
  step("passing this machine's NODE_EXTRA_CA_CERTS into the build (a TLS-re-signing proxy)");
  const inside = "/run/runlet-extra-ca.crt";
  return ["--volume", `${ca}:${inside}:ro`, "--build-arg", `NODE_EXTRA_CA_CERTS=${inside}`];
}

/**
 * A project made from this checkout the way its users make one, with no other step: `npm pack`
 * in the checkout, `npx --package <tarball> runlet init my-worker` (init copies the tarball
 * into the project's vendor/ and depends on it there), `npm install` in the project.
 */
async function makeProject(dir: string): Promise<string> {
  const packed = (
    await run("npm", ["pack", "--silent", "--pack-destination", dir], { cwd: ROOT, echo: false })
  )
    .trim()
    .split("\n")
    .at(-1);
  if (packed === undefined || !packed.endsWith(".tgz"))
    throw new Error(`npm pack printed no tarball: ${packed}`);
  const tarball = join(dir, packed);
  step(`npm pack → ${packed}`);
  const init = await run("npx", ["--yes", "--package", tarball, "runlet", "init", "my-worker"], {
    env: process.env,
    cwd: dir,
    echo: false,
  });
  step(`npx --package ${packed} runlet init my-worker:\n${init.trimEnd().replace(/^/gm, "    ")}`);
  const project = join(dir, "my-worker");
  await run("npm", ["install", "--no-audit", "--no-fund"], { env: process.env, cwd: project, echo: false });
  const pkg = JSON.parse(await readFile(join(project, "package.json"), "utf8")) as {
    dependencies: Record<string, string>;
  };
  check(
    pkg.dependencies["runlet"] === `file:vendor/${packed}` &&
      (await readdir(join(project, "vendor"))).includes(packed),
    `the project depends on runlet through vendor/${packed}, inside the build context`,
  );
  step("npm install in the project (package-lock.json written, as a user commits it)");
  return project;
}

/** The harness CLI, and the worker variables it prints for `endpoint`. */
async function startHarnessCli(): Promise<{
  child: ChildProcess;
  env: Record<string, string>;
  url: string;
  key: string;
}> {
  const child = spawn(
    process.execPath,
    [join(ROOT, "bin", "runlet.mjs"), "harness", "--endpoint", ENDPOINT],
    {
      env: process.env,
      stdio: ["ignore", "pipe", "inherit"],
    },
  );
  let out = "";
  const printed = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`runlet harness printed no endpoint within 60 s:\n${out}`)),
      60_000,
    );
    child.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      // The exports end with a blank line.
      if (/export RUNPOD_[\s\S]*\n\n/.test(out)) {
        clearTimeout(timer);
        resolve(out);
      }
    });
    child.once("close", (code) => {
      clearTimeout(timer);
      reject(new Error(`runlet harness exited with ${code}:\n${out}`));
    });
  });
  const env: Record<string, string> = {};
  for (const m of printed.matchAll(/^\s*export (\w+)='((?:[^']|'\\'')*)'$/gm)) {
    env[m[1] as string] = (m[2] as string).replaceAll("'\\''", "'");
  }
  const url = /listening on (\S+)/.exec(printed)?.[1];
  const key = /api key\s+(\S+)/.exec(printed)?.[1];
  if (url === undefined || key === undefined || env["RUNPOD_WEBHOOK_GET_JOB"] === undefined) {
    throw new Error(`could not read runlet harness's output:\n${printed}`);
  }
  return { child, env, url, key };
}

async function stop(child: ChildProcess, graceMs: number): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const closed = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  const code = await closed;
  clearTimeout(timer);
  return code;
}

/** The first process named `comm` below `pid` (chroot isolation keeps the host's PID namespace). */
async function descendantNamed(pid: number, comm: string): Promise<number | undefined> {
  const children = new Map<number, number[]>();
  const names = new Map<number, string>();
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => undefined);
    // "pid (comm) state ppid ...": comm may hold spaces, so match up to the last ")".
    const m = stat === undefined ? null : /^(\d+) \((.*)\) \S+ (\d+)/s.exec(stat);
    if (m === null) continue;
    const [child, name, parent] = [Number(m[1]), m[2] as string, Number(m[3])];
    names.set(child, name);
    children.set(parent, [...(children.get(parent) ?? []), child]);
  }
  const queue = [...(children.get(pid) ?? [])];
  while (queue.length > 0) {
    const next = queue.shift() as number;
    if (names.get(next) === comm) return next;
    queue.push(...(children.get(next) ?? []));
  }
  return undefined;
}

/** Image config fields the checks read. */
interface ImageConfig {
  readonly User?: string;
  readonly Entrypoint?: string[];
  readonly Cmd?: string[];
  readonly Env?: string[];
}

async function imageConfig(image: string): Promise<ImageConfig> {
  const out = await buildah(["inspect", "--type", "image", image], { echo: false });
  return (JSON.parse(out) as { OCIv1: { config: ImageConfig } }).OCIv1.config;
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new Error(`check failed: ${what}`);
  step(`ok: ${what}`);
}

async function main(): Promise<void> {
  await mkdir(WORK, { recursive: true });
  step(`stand-in for node:22-bookworm-slim (${STAND_IN_NAME})`);
  const standIn = await ensureStandIn(WORK);
  step(`stand-in: ${standIn === "cached" ? "cached from an earlier run" : "built"} — NOT the upstream image`);

  step("building Dockerfile.base on the stand-in");
  const empty = await mkdtemp(join(tmpdir(), "runlet-image-ctx-"));
  try {
    await bud(["-f", join(ROOT, "Dockerfile.base"), "-t", BASE_TAG, empty]);
  } finally {
    await rm(empty, { recursive: true, force: true });
  }
  const base = await imageConfig(BASE_TAG);
  check(base.User === "runlet", `${BASE_TAG} runs as user "runlet" (config User=${base.User})`);

  const dir = await mkdtemp(join(tmpdir(), "runlet-image-project-"));
  const containers: string[] = [];
  let harness: ChildProcess | undefined;
  let worker: ChildProcess | undefined;
  try {
    const project = await makeProject(dir);
    step("building the project's image from its own Dockerfile (npm ci + runlet build inside)");
    await bud(["-t", PROJECT_TAG, ...extraCaArgs(), project]);
    const config = await imageConfig(PROJECT_TAG);
    check(config.User === "runlet", `the project image's configured user is "runlet" (User=${config.User})`);
    step(`entrypoint ${JSON.stringify(config.Entrypoint)} cmd ${JSON.stringify(config.Cmd)}`);

    const ctr = (await buildah(["from", "--pull=never", PROJECT_TAG], { echo: false })).trim();
    containers.push(ctr);
    const inside = (cmd: string) =>
      buildah(["run", "--isolation", "chroot", ctr, "--", "sh", "-c", cmd], { echo: false }).then((o) =>
        o.trim(),
      );
    const uid = await inside("id -u");
    check(
      uid !== "" && uid !== "0",
      `a process in the image runs as uid ${uid} (${await inside("id -un")}), not root`,
    );
    check(
      (await inside("command -v npm npx yarn corepack || true")) === "",
      "no npm, npx, yarn or corepack in the image",
    );
    const app = await inside("cd /app && find . -maxdepth 2 | sort | tr '\\n' ' '");
    check(
      !app.includes("node_modules") && app.includes("./worker.mjs"),
      `/app holds the bundle only: ${app}`,
    );
    step(
      `image: ${await inside("node --version")}, tini ${await inside("test -x /usr/bin/tini && echo present")}`,
    );

    const h = await startHarnessCli();
    harness = h.child;
    step(`runlet harness on ${h.url}, endpoint ${ENDPOINT}`);
    const envArgs = Object.entries({ ...h.env, RUNPOD_ENDPOINT_ID: ENDPOINT }).flatMap(([k, v]) => [
      "--env",
      `${k}=${v}`,
    ]);
    const command = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
    step(`running the image's command: ${command.join(" ")}`);
    worker = spawn("buildah", ["run", "--isolation", "chroot", ...envArgs, ctr, "--", ...command], {
      env: BUILDAH_ENV,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let workerLog = "";
    const collect = (d: Buffer) => {
      workerLog += d.toString();
    };
    worker.stdout?.on("data", collect);
    worker.stderr?.on("data", collect);

    const input = JSON.parse(await readFile(join(project, "test_input.json"), "utf8")) as unknown;
    const res = await fetch(`${h.url}/v2/${ENDPOINT}/runsync?wait=90000`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.key}`, "content-type": "application/json" },
      body: JSON.stringify(input),
      signal: AbortSignal.timeout(120_000),
    });
    const body = (await res.json()) as { status?: string; output?: unknown };
    step(`POST /runsync ${JSON.stringify(input)} → HTTP ${res.status} ${JSON.stringify(body)}`);
    check(
      res.status === 200 &&
        body.status === "COMPLETED" &&
        JSON.stringify(body.output) === '{"message":"Hello, Ada!"}',
      "the image's worker took the job from the harness and completed it",
    );
    // SIGTERM to tini, as a container runtime sends it to PID 1: tini passes it to node, the
    // worker shuts down gracefully and exits 0, and so do tini and buildah run.
    const tini = worker.pid === undefined ? undefined : await descendantNamed(worker.pid, "tini");
    if (tini === undefined) throw new Error(`no tini process under buildah run:\n${workerLog}`);
    const exited = new Promise<number | null>((resolve) => worker?.once("close", (c) => resolve(c)));
    process.kill(tini, "SIGTERM");
    const code = await Promise.race([
      exited,
      new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 30_000)),
    ]);
    step(
      `SIGTERM to tini (pid ${tini}): buildah run exited ${code}; the worker's output:\n${workerLog.trimEnd().replace(/^/gm, "    ")}`,
    );
    check(code === 0, "the worker shut down gracefully on SIGTERM through tini (exit 0)");
    step("PASS");
  } finally {
    if (worker !== undefined) await stop(worker, 5_000);
    if (harness !== undefined) await stop(harness, 5_000);
    for (const c of containers) await buildah(["rm", c], { echo: false }).catch(() => undefined);
    await dropNpxCopies(dir);
    await rm(dir, { recursive: true, force: true });
  }
}

/** npx keeps each package it ran in its cache's _npx/ folder: drop the ones made from `dir`'s tarball. */
async function dropNpxCopies(dir: string): Promise<void> {
  const cache = (await run("npm", ["config", "get", "cache"], { env: process.env, echo: false })).trim();
  const entries = await readdir(join(cache, "_npx")).catch(() => [] as string[]);
  for (const entry of entries) {
    const manifest = await readFile(join(cache, "_npx", entry, "package.json"), "utf8").catch(() => "");
    if (manifest.includes(dir)) await rm(join(cache, "_npx", entry), { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  step(`FAIL: ${err instanceof Error ? err.message : String(err)}`);
  process.exitCode = 1;
});
