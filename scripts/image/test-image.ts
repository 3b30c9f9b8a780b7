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
 * 5. The starters from init to image, the same way (`--only ocr|onnx|llm`): the LLM starter's
 *    image is driven with the official `openai` client, streaming and two completions at once.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { IMAGE_RECORD_PATH, sizeToMB, writeOcrImageRecord } from "../../bench/image-record.js";
import { BUILDAH_ENV, buildah, run } from "./buildah.js";
import { ensureStandIn, STAND_IN_NAME } from "./stand-in.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const WORK = join(ROOT, ".tmp", "image");
const BASE_TAG = "localhost/runlet-base:node22";
const PROJECT_TAG = "localhost/runlet-image-check:latest";
const OCR_TAG = "localhost/runlet-image-ocr:latest";
const ONNX_TAG = "localhost/runlet-image-onnx:latest";
const LLM_TAG = "localhost/runlet-image-llm:latest";
const ENDPOINT = "image-check";

/** `npm run test:image -- --only basic|ocr|onnx|llm` runs one of the projects; all by default. */
const ONLY = ((): "basic" | "ocr" | "onnx" | "llm" | undefined => {
  const at = process.argv.indexOf("--only");
  const value = at < 0 ? undefined : process.argv[at + 1];
  if (value === undefined || value === "basic" || value === "ocr" || value === "onnx" || value === "llm")
    return value;
  throw new Error(`--only takes basic, ocr, onnx or llm, got ${value}`);
})();

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
async function makeProject(dir: string, name = "my-worker", template = "basic"): Promise<string> {
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
  const init = await run(
    "npx",
    ["--yes", "--package", tarball, "runlet", "init", name, "--template", template],
    {
      env: process.env,
      cwd: dir,
      echo: false,
    },
  );
  step(
    `npx --package ${packed} runlet init ${name} --template ${template}:\n${init.trimEnd().replace(/^/gm, "    ")}`,
  );
  const project = join(dir, name);
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

/**
 * Starts `runlet harness`, runs the image's entrypoint and command in container `ctr` with the
 * variables it prints, sends `inputFile`'s job through /runsync and checks its output with
 * `expected`; then SIGTERM to tini, and the worker must exit 0.
 */
async function serveOneJob(
  tag: string,
  ctr: string,
  inputFile: string,
  expected: (output: unknown) => boolean,
  state: { harness?: ChildProcess; worker?: ChildProcess },
): Promise<void> {
  await serveImage(tag, ctr, {}, state, async (h) => {
    const input = JSON.parse(await readFile(inputFile, "utf8")) as unknown;
    const res = await fetch(`${h.url}/v2/${ENDPOINT}/runsync?wait=90000`, {
      method: "POST",
      headers: { authorization: `Bearer ${h.key}`, "content-type": "application/json" },
      body: JSON.stringify(input),
      signal: AbortSignal.timeout(120_000),
    });
    const body = (await res.json()) as { status?: string; output?: unknown };
    step(`POST /runsync ${JSON.stringify(input).slice(0, 120)} → HTTP ${res.status} ${JSON.stringify(body)}`);
    check(
      res.status === 200 && body.status === "COMPLETED" && expected(body.output),
      `the image's worker took the job from the harness and completed it (${tag})`,
    );
  });
}

/**
 * Starts `runlet harness`, runs the image's entrypoint and command in container `ctr` with the
 * variables it prints (and `extraEnv`), hands the harness to `drive`; then SIGTERM to tini, and
 * the worker must exit 0.
 */
async function serveImage(
  tag: string,
  ctr: string,
  extraEnv: Record<string, string>,
  state: { harness?: ChildProcess; worker?: ChildProcess },
  drive: (h: { url: string; key: string }) => Promise<void>,
): Promise<void> {
  const config = await imageConfig(tag);
  try {
    const h = await startHarnessCli();
    state.harness = h.child;
    step(`runlet harness on ${h.url}, endpoint ${ENDPOINT}`);
    const envArgs = Object.entries({
      ...h.env,
      RUNPOD_ENDPOINT_ID: ENDPOINT,
      // The platform's network check dials a public DNS server: a check run has no use for it.
      RUNPOD_NETWORK_CHECK_TARGET: "off",
      ...extraEnv,
    }).flatMap(([k, v]) => ["--env", `${k}=${v}`]);
    const command = [...(config.Entrypoint ?? []), ...(config.Cmd ?? [])];
    step(`running the image's command: ${command.join(" ")}`);
    const worker = spawn("buildah", ["run", "--isolation", "chroot", ...envArgs, ctr, "--", ...command], {
      env: BUILDAH_ENV,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let workerLog = "";
    const collect = (d: Buffer) => {
      workerLog += d.toString();
    };
    worker.stdout?.on("data", collect);
    worker.stderr?.on("data", collect);

    state.worker = worker;
    try {
      await drive(h);
    } catch (err) {
      step(`the worker's output so far:\n${workerLog.trimEnd().replace(/^/gm, "    ")}`);
      throw err;
    }
    // SIGTERM to tini, as a container runtime sends it to PID 1: tini passes it to node, the
    // worker shuts down gracefully and exits 0, and so do tini and buildah run.
    const tini = worker.pid === undefined ? undefined : await descendantNamed(worker.pid, "tini");
    if (tini === undefined) throw new Error(`no tini process under buildah run:\n${workerLog}`);
    const exited = new Promise<number | null>((resolve) => worker.once("close", (c) => resolve(c)));
    process.kill(tini, "SIGTERM");
    const code = await Promise.race([
      exited,
      new Promise<"timeout">((r) => setTimeout(() => r("timeout"), 30_000)),
    ]);
    step(
      `SIGTERM to tini (pid ${tini}): buildah run exited ${code}; the worker's output:\n${workerLog.trimEnd().replace(/^/gm, "    ")}`,
    );
    check(code === 0, "the worker shut down gracefully on SIGTERM through tini (exit 0)");
  } finally {
    if (state.worker !== undefined) await stop(state.worker, 5_000);
    if (state.harness !== undefined) await stop(state.harness, 5_000);
    delete state.worker;
    delete state.harness;
  }
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
  const state: { harness?: ChildProcess; worker?: ChildProcess } = {};
  try {
    if (ONLY === "ocr") {
      await ocrImage(dir, containers, state);
      step("PASS");
      return;
    }
    if (ONLY === "onnx") {
      await onnxImage(dir, containers, state);
      step("PASS");
      return;
    }
    if (ONLY === "llm") {
      await llmImage(dir, containers, state);
      step("PASS");
      return;
    }
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

    await serveOneJob(
      PROJECT_TAG,
      ctr,
      join(project, "test_input.json"),
      (output) => JSON.stringify(output) === '{"message":"Hello, Ada!"}',
      state,
    );
    if (ONLY !== "basic") {
      await ocrImage(dir, containers, state);
      await onnxImage(dir, containers, state);
      await llmImage(dir, containers, state);
    }
    step("PASS");
  } finally {
    if (state.worker !== undefined) await stop(state.worker, 5_000);
    if (state.harness !== undefined) await stop(state.harness, 5_000);
    for (const c of containers) await buildah(["rm", c], { echo: false }).catch(() => undefined);
    await dropNpxCopies(dir);
    await rm(dir, { recursive: true, force: true });
  }
}

/** Bytes of a folder or file on this machine. */
async function bytesOf(path: string): Promise<number> {
  return Number((await run("du", ["-sb", path], { echo: false })).split("\t")[0]);
}

const mib = (bytes: number) => `${(bytes / 1_048_576).toFixed(1)} MiB`;

/**
 * The OCR starter from init to image: `runlet init ocr-app --template ocr`, `npm install` (no
 * variable set: the starter's .npmrc skips ORT's CUDA download), its own `npm test` (the real
 * model), `npx runlet build` with no flag, the project's own Dockerfile built with buildah, and
 * the image answering an OCR job through `runlet harness` with the text of test_input.json's
 * picture; the image holds this platform's ORT binaries only.
 */
async function ocrImage(
  dir: string,
  containers: string[],
  state: { harness?: ChildProcess; worker?: ChildProcess },
): Promise<void> {
  const clean = { ...process.env };
  for (const k of Object.keys(clean)) if (/^(npm_config_)?onnxruntime_node_install/i.test(k)) delete clean[k];
  const project = await makeProject(dir, "ocr-app", "ocr");
  step("npm test in ocr-app (the real model on pictures its tests render)");
  await run("npm", ["test"], { env: clean, cwd: project, echo: false });
  step("ok: the ocr starter's own tests pass");
  const built = await run("npx", ["runlet", "build"], { env: clean, cwd: project, echo: false });
  step(`npx runlet build:\n${built.trimEnd().replace(/^/gm, "    ")}`);
  check(
    /^external: onnxruntime-node {2}declared in package\.json/m.test(built) &&
      /^external: sharp {2}declared/m.test(built),
    "runlet build kept the declared externals out of the bundle, with no flag",
  );
  const ortAll = await bytesOf(join(project, "node_modules", "onnxruntime-node"));
  const ortDist = await bytesOf(join(project, "dist", "node_modules", "onnxruntime-node"));
  step(
    `onnxruntime-node: ${mib(ortAll)} in node_modules (every platform), ${mib(ortDist)} in dist/node_modules`,
  );

  step("building the ocr project's image from its own Dockerfile");
  const t = performance.now();
  await bud(["-t", OCR_TAG, ...extraCaArgs(), project]);
  const buildSeconds = Math.round((performance.now() - t) / 1000);
  step(`image built in ${buildSeconds} s`);
  const ctr = (await buildah(["from", "--pull=never", OCR_TAG], { echo: false })).trim();
  containers.push(ctr);
  const inside = (cmd: string) =>
    buildah(["run", "--isolation", "chroot", ctr, "--", "sh", "-c", cmd], { echo: false }).then((o) =>
      o.trim(),
    );
  const arch = await inside("node -p process.arch");
  const binaries = (
    await inside(
      "find /app/node_modules -name '*.node' -o -name '*.so*' -o -name '*.dll' -o -name '*.dylib' | sort",
    )
  )
    .split("\n")
    .filter((l) => l !== "");
  step(`native files in the image:\n${binaries.map((b) => `    ${b}`).join("\n")}`);
  check(
    binaries.some((b) =>
      b.endsWith(`/onnxruntime-node/bin/napi-v6/linux/${arch}/onnxruntime_binding.node`),
    ) &&
      binaries
        .filter((b) => b.includes("/onnxruntime-node/"))
        .every((b) => b.includes(`/bin/napi-v6/linux/${arch}/`)),
    `the image holds onnxruntime-node's linux/${arch} binaries and no other platform's`,
  );
  const ortImage = Number((await inside("du -sb /app/node_modules/onnxruntime-node")).split("\t")[0]);
  const appBytes = Number((await inside("du -sb /app")).split("\t")[0]);
  const size = (
    await buildah(["images", "--noheading", "--format", "{{.Size}}", OCR_TAG], { echo: false })
  ).trim();
  step(
    `image ${OCR_TAG}: ${size}; /app ${mib(appBytes)}, onnxruntime-node in it ${mib(ortImage)} (${mib(ortAll)} as npm installs it)`,
  );
  // The bench prints these (npm run bench, "OCR"): it cannot build an image itself.
  await writeOcrImageRecord({
    measuredAt: new Date().toISOString(),
    imageSize: size,
    imageMB: sizeToMB(size),
    base: `${STAND_IN_NAME} (test:image's stand-in, scripts/image/stand-in.ts)`,
    appBytes,
    ortImageBytes: ortImage,
    ortInstalledBytes: ortAll,
    buildSeconds,
  });
  step(`written to ${IMAGE_RECORD_PATH}`);
  const uid = await inside("id -u");
  check(uid !== "" && uid !== "0", `the ocr image runs as uid ${uid}, not root`);
  await serveOneJob(
    OCR_TAG,
    ctr,
    join(project, "test_input.json"),
    (output) => {
      const lines = (output as { lines?: { text?: string }[] } | undefined)?.lines ?? [];
      return lines.length === 1 && lines[0]?.text === "Hello runlet";
    },
    state,
  );
}

/**
 * The blank ONNX starter from init to image (issue 45): `runlet init onnx-app --template onnx`,
 * `npm install` with no variable set, its own `npm test` (the tiny model it writes), `npx runlet
 * build` with no flag (its verify step must run), the project's own Dockerfile built with
 * buildah (the verify step runs again in the build stage; the tini layer leaves no apt lists or
 * caches), and the image answering test_input.json's job through `runlet harness`.
 */
async function onnxImage(
  dir: string,
  containers: string[],
  state: { harness?: ChildProcess; worker?: ChildProcess },
): Promise<void> {
  const clean = { ...process.env };
  for (const k of Object.keys(clean)) if (/^(npm_config_)?onnxruntime_node_install/i.test(k)) delete clean[k];
  const project = await makeProject(dir, "onnx-app", "onnx");
  const tested = await run("npm", ["test"], { env: clean, cwd: project, echo: false });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: vitest's colour codes
  const plain = tested.replace(/\x1b\[[0-9;]*m/g, "");
  check(/Tests\s+\d+ passed/.test(plain), "the onnx starter's own npm test passes (its tiny model)");
  const built = await run("npx", ["runlet", "build"], { env: clean, cwd: project, echo: false });
  step(`npx runlet build:\n${built.trimEnd().replace(/^/gm, "    ")}`);
  check(
    /^external: onnxruntime-node {2}declared in package\.json/m.test(built) &&
      /^Verified dist\/ alone in an empty folder: .*test_input\.json's job COMPLETED/m.test(built),
    "runlet build (no flag) kept onnxruntime-node out and its verify step ran test_input.json's job from dist/ alone",
  );
  step("building the onnx project's image from its own Dockerfile");
  const t = performance.now();
  const log = await bud(["-t", ONNX_TAG, ...extraCaArgs(), project]);
  step(`image built in ${Math.round((performance.now() - t) / 1000)} s`);
  check(
    /Verified dist\/ alone in an empty folder/.test(log),
    "the image's build stage ran the verify step (npm run build)",
  );
  const ctr = (await buildah(["from", "--pull=never", ONNX_TAG], { echo: false })).trim();
  containers.push(ctr);
  const inside = (cmd: string) =>
    buildah(["run", "--isolation", "chroot", ctr, "--", "sh", "-c", cmd], { echo: false }).then((o) =>
      o.trim(),
    );
  const apt = await inside(
    "du -sc /var/lib/apt/lists /var/cache/apt /var/log/apt 2>/dev/null | tail -n 1 | cut -f1; ls /var/lib/apt/lists | grep -vc '^partial$' || true",
  );
  step(`apt leftovers in the image (KiB, then list files): ${apt.replace(/\n/g, ", ")}`);
  check(apt.split("\n").at(-1) === "0", "the image keeps no apt package lists");
  const size = (
    await buildah(["images", "--noheading", "--format", "{{.Size}}", ONNX_TAG], { echo: false })
  ).trim();
  step(`image ${ONNX_TAG}: ${size}`);
  const expected = JSON.parse(await readFile(join(project, "test_input.json"), "utf8")) as {
    input: { rows: number[][] };
  };
  // y = x·W + b with the starter's weights (templates/onnx/src/tiny-model.ts).
  const w = [
    [1, 0, 0.5],
    [0, 1, 0.5],
    [-1, 0, 0.5],
    [0, -1, 0.5],
  ];
  const b = [0.1, 0.2, 0.3];
  const want = expected.input.rows.map((row) =>
    b.map((bias, j) => row.reduce((sum, v, i) => sum + v * (w[i]?.[j] ?? 0), bias)),
  );
  await serveOneJob(
    ONNX_TAG,
    ctr,
    join(project, "test_input.json"),
    (output) => {
      const rows = (output as { rows?: number[][] } | undefined)?.rows ?? [];
      return (
        rows.length === want.length &&
        rows.every((row, i) => row.every((v, j) => Math.abs(v - (want[i]?.[j] ?? Number.NaN)) < 1e-5))
      );
    },
    state,
  );
}

/**
 * The LLM starter from init to image (issue 45): `runlet init llm-app --template llm`, `npm
 * install` with no variable set, its own `npm test` (the tiny model it writes, streamed),
 * `npx runlet build` with no flag (node-llama-cpp kept out, the verify step run), then the
 * project's own Dockerfile built with buildah. That Dockerfile's final stage defaults to CUDA
 * 12's runtime image, which cannot be pulled here: the documented CPU build argument,
 * `RUNLET_BASE_IMAGE=node:22-bookworm-slim`, names the stand-in instead. Then the image, run
 * against `runlet harness`, is driven with the official `openai` client: one streaming chat
 * completion (several deltas, a finish_reason, usage), and two streaming completions sent at
 * once that must both be in flight together (each one's first chunk came before the other's
 * last: shown by when the chunks arrived, not by how fast).
 */
async function llmImage(
  dir: string,
  containers: string[],
  state: { harness?: ChildProcess; worker?: ChildProcess },
): Promise<void> {
  const project = await makeProject(dir, "llm-app", "llm");
  step("npm test in llm-app (the tiny model it writes, through the openai client)");
  const tested = await run("npm", ["test"], { env: process.env, cwd: project, echo: false });
  // biome-ignore lint/suspicious/noControlCharactersInRegex: vitest's colour codes
  const plain = tested.replace(/\x1b\[[0-9;]*m/g, "");
  check(/Tests\s+\d+ passed/.test(plain), "the llm starter's own npm test passes (its tiny model)");
  const built = await run("npx", ["runlet", "build"], { env: process.env, cwd: project, echo: false });
  step(`npx runlet build:\n${built.trimEnd().replace(/^/gm, "    ")}`);
  check(
    /^external: node-llama-cpp\b/m.test(built) &&
      /^Verified dist\/ alone in an empty folder: .*test_input\.json's job COMPLETED/m.test(built),
    "runlet build (no flag) kept node-llama-cpp out and its verify step ran test_input.json's job from dist/ alone",
  );
  // The CPU base the project's Dockerfile documents; here it resolves to the stand-in.
  const cpuBase = "node:22-bookworm-slim";
  step(
    `building the llm project's image from its own Dockerfile, RUNLET_BASE_IMAGE=${cpuBase} (the stand-in)`,
  );
  const t = performance.now();
  const log = await bud([
    "-t",
    LLM_TAG,
    "--build-arg",
    `RUNLET_BASE_IMAGE=${cpuBase}`,
    ...extraCaArgs(),
    project,
  ]);
  const buildSeconds = Math.round((performance.now() - t) / 1000);
  step(`image built in ${buildSeconds} s`);
  check(
    /Verified dist\/ alone in an empty folder/.test(log),
    "the image's build stage ran the verify step (npm run build)",
  );
  const ctr = (await buildah(["from", "--pull=never", LLM_TAG], { echo: false })).trim();
  containers.push(ctr);
  const inside = (cmd: string) =>
    buildah(["run", "--isolation", "chroot", ctr, "--", "sh", "-c", cmd], { echo: false }).then((o) =>
      o.trim(),
    );
  const arch = await inside("node -p process.arch");
  const llamaPkgs = (await inside("ls /app/node_modules/@node-llama-cpp"))
    .split("\n")
    .filter((l) => l !== "");
  step(`@node-llama-cpp/* in the image: ${llamaPkgs.join(", ")}`);
  check(
    llamaPkgs.includes(`linux-${arch}`) && llamaPkgs.every((p) => p.startsWith(`linux-${arch}`)),
    `the image holds node-llama-cpp's linux-${arch} builds and no other platform's`,
  );
  const uid = await inside("id -u");
  check(uid !== "" && uid !== "0", `the llm image runs as uid ${uid}, not root`);
  const size = (
    await buildah(["images", "--noheading", "--format", "{{.Size}}", LLM_TAG], { echo: false })
  ).trim();
  step(`image ${LLM_TAG}: ${size}`);

  const { default: OpenAI } = await import("openai");
  // One llama.cpp thread: llama.cpp's threads spin while they wait for each other, and this
  // machine's cores are shared (the starter's README, "Threads").
  await serveImage(LLM_TAG, ctr, { LLM_THREADS: "1", LLM_PARALLEL: "2" }, state, async (h) => {
    const client = new OpenAI({
      apiKey: h.key,
      baseURL: `${h.url}/v2/${ENDPOINT}/openai/v1`,
      maxRetries: 0,
      timeout: 180_000,
    });
    const messages = [{ role: "user" as const, content: "tell me a story" }];
    /** One streaming completion: its deltas, finish_reason, usage, and when its chunks came. */
    const streamOne = async (maxTokens: number) => {
      const sent = performance.now();
      const stream = await client.chat.completions.create({
        model: "tiny-llama",
        messages,
        max_tokens: maxTokens,
        temperature: 0,
        stream: true,
        stream_options: { include_usage: true },
      });
      const deltas: string[] = [];
      let finish: string | null | undefined;
      let usage: { prompt_tokens: number; completion_tokens: number } | null | undefined;
      let first: number | undefined;
      let last = 0;
      for await (const chunk of stream) {
        const now = performance.now();
        const text = chunk.choices[0]?.delta.content;
        if (text) {
          first ??= now;
          last = now;
          deltas.push(text);
        }
        finish = chunk.choices[0]?.finish_reason ?? finish;
        usage = chunk.usage ?? usage;
      }
      return { sent, first: first ?? Number.NaN, last, deltas, finish, usage };
    };
    const start = performance.now();
    const rel = (ms: number) => `${Math.round(ms - start)} ms`;
    const one = await streamOne(32);
    step(
      `streaming chat completion: ${one.deltas.length} deltas ${JSON.stringify(one.deltas.join(""))}, finish_reason ${one.finish}, usage ${JSON.stringify(one.usage)}; first token ${rel(one.first)}, last ${rel(one.last)}`,
    );
    check(
      one.deltas.length > 5 &&
        one.finish === "length" &&
        one.usage?.completion_tokens === 32 &&
        (one.usage?.prompt_tokens ?? 0) > 0,
      "the image streamed a chat completion through runlet harness: several deltas, finish_reason length, usage counted",
    );
    const [a, b] = await Promise.all([streamOne(96), streamOne(96)]);
    for (const [name, r] of [
      ["A", a],
      ["B", b],
    ] as const) {
      step(
        `concurrent ${name}: sent ${rel(r.sent)}, first chunk ${rel(r.first)}, last ${rel(r.last)}, ${r.deltas.length} deltas, finish_reason ${r.finish}, usage ${JSON.stringify(r.usage)}`,
      );
    }
    check(
      [a, b].every((r) => r.deltas.length > 5 && r.finish === "length" && r.usage?.completion_tokens === 96),
      "both concurrent completions streamed to max_tokens with usage",
    );
    check(
      a.first < b.last && b.first < a.last,
      "the two completions were in flight at once: each one's first chunk came before the other's last",
    );
  });
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
