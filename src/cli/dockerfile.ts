import { readFile } from "node:fs/promises";
import { join } from "node:path";

/**
 * What the build stage prints when `npm ci` fails: behind a proxy that re-signs TLS npm may say
 * no more than "Exit handler never called!" after minutes, so the line names that cause and the
 * documented fix (docs/images.md, "Behind a proxy that re-signs TLS"). Plain ASCII without quotes
 * or `$`: it goes into a shell's double-quoted string.
 */
export const NPM_CI_HINT =
  "runlet: npm ci failed. Behind a proxy that re-signs TLS (npm: Exit handler never called!, UNABLE_TO_GET_ISSUER_CERT_LOCALLY, SELF_SIGNED_CERT_IN_CHAIN), npm needs the proxy CA: build with --build-arg NODE_EXTRA_CA_CERTS=<path of the CA inside the build>, the file mounted or copied there (docs/images.md in runlet, Behind a proxy that re-signs TLS).";

/**
 * Node flags the image starts the worker with, before the bundle's path. Without them a worker's
 * resident memory grows by 40–70 MiB over its first 10 000 trivial jobs and stays there, though
 * the heap after a full collection does not grow: V8 lets the young generation grow from 2 × 1 MiB
 * to 2 × 16 MiB under load, and lets old space fill with promoted garbage up to about 4 × the live
 * heap before it collects. With them the growth is 11–19 MiB (docs/images.md, "Worker memory"):
 *
 * - `--max-semi-space-size=2`: the young generation stays at most 2 × 2 MiB;
 * - `--heap-growing-percent=50`: the next full collection comes when old space reaches 1.5 × the
 *   heap that survived the last one (V8 adds at least 8 MiB), instead of up to 4 ×.
 *
 * The price, measured: about +0.05 ms of CPU per trivial job (more, smaller collections), and
 * about 30 ms of CPU at start (with any such flag Node compiles its own modules again). Both are
 * V8 flags, which Node takes on its command line only; NODE_OPTIONS refuses the second.
 */
export const WORKER_NODE_FLAGS = ["--max-semi-space-size=2", "--heap-growing-percent=50"] as const;

/**
 * The layout shared by Dockerfile.base and the project Dockerfile `runlet build` and `runlet
 * init` write. A test (test/cli/dockerfile.process.test.ts) parses both files and checks them against
 * these values, so the bundle lands where the image's CMD looks for it, under the same user.
 */
export const IMAGE_LAYOUT = {
  /** The image a project's final stage starts from unless `RUNLET_BASE_IMAGE` names another. */
  baseImage: "node:22-bookworm-slim",
  /** The image the project's build stage (`npm ci`, `runlet build`) runs in unless `RUNLET_BUILD_IMAGE` says. */
  buildImage: "node:22-bookworm-slim",
  /** The tag the docs give the image built from Dockerfile.base (the CUDA case). */
  runletBaseTag: "runlet-base:node22",
  /** Where the build stage works: the project's files, node_modules and dist/. */
  buildDir: "/src",
  workdir: "/app",
  bundlePath: "/app/worker.mjs",
  /** Node's module compile cache, filled while the image is built (`--warm-compile-cache`). */
  compileCacheDir: "/app/.compile-cache",
  user: "runlet",
  uid: 10001,
  entrypoint: ["/usr/bin/tini", "--"],
  /** The worker's command: Node with {@link WORKER_NODE_FLAGS}, then the bundle. */
  cmd: ["node", ...WORKER_NODE_FLAGS, "/app/worker.mjs"],
} as const;

/**
 * The CUDA 12 runtime image a GPU project's final stage starts from (`cuda: true`): CUDA's
 * runtime libraries (cudart, cuBLAS) that llama.cpp's CUDA build loads, no Node (the final stage
 * copies the build stage's). Any CUDA 12 runtime image works (`--build-arg RUNLET_BASE_IMAGE=...`);
 * the host's driver must support CUDA 12 (docs/gpu.md).
 */
export const CUDA_BASE_IMAGE = "nvidia/cuda:12.8.1-runtime-ubuntu24.04";

/** Options of {@link renderProjectDockerfile}. */
export interface ProjectDockerfileOptions {
  /**
   * A GPU image: the final stage starts from {@link CUDA_BASE_IMAGE} and gets Node from the build
   * stage (the same build that ran `npm ci`), so nothing is fetched besides the two images.
   * `runlet build` and `runlet init` set it for a project that depends on node-llama-cpp, whose
   * CUDA binaries (`@node-llama-cpp/linux-x64-cuda`) need CUDA 12's runtime libraries.
   * @default false
   */
  readonly cuda?: boolean;
  /**
   * The project depends on onnxruntime-node: the build stage takes `ONNXRUNTIME_NODE_INSTALL`
   * as a build argument, so a GPU image can fetch ORT's CUDA provider (`cuda12`) while the
   * project's `.npmrc` skips it everywhere else (docs/gpu.md). @default false
   */
  readonly onnxruntime?: boolean;
}

/** The Dockerfile options a project's package.json calls for (onnxruntime-node: ORT's switch; node-llama-cpp: the CUDA base). */
export async function dockerfileOptionsFor(projectDir: string): Promise<ProjectDockerfileOptions> {
  let deps: Record<string, unknown> = {};
  try {
    const pkg = JSON.parse(await readFile(join(projectDir, "package.json"), "utf8")) as Record<
      string,
      Record<string, unknown> | undefined
    >;
    deps = { ...pkg["devDependencies"], ...pkg["optionalDependencies"], ...pkg["dependencies"] };
  } catch {
    // No package.json, or not JSON (the build says so elsewhere): the plain Dockerfile.
  }
  return { onnxruntime: "onnxruntime-node" in deps, cuda: "node-llama-cpp" in deps };
}

/** The argument of `runlet`'s bundle that fills Node's compile cache and exits (image build only). */
export const WARM_COMPILE_CACHE_FLAG = "--warm-compile-cache";

/** Where the Node images keep node; the CUDA variant copies it from the build stage to the same place. */
const NODE_BINARY = "/usr/local/bin/node";

/**
 * What apt leaves behind after an install: its package lists (`apt-get update`), its binary
 * caches and downloaded packages, and its logs (about 75 MB on Debian bookworm; issue 45).
 */
export const APT_LEFTOVERS =
  "/var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/* /var/log/apt/* /var/log/dpkg.log";

/** `["a", "b"]` as Dockerfile exec form: `["a", "b"]`. */
function execForm(args: readonly string[]): string {
  return JSON.stringify(args).replaceAll('","', '", "');
}

/**
 * The project Dockerfile. It builds from the project's files alone (what an image builder gets
 * from a git repository):
 *
 * - stage `manifests` picks out package.json, package-lock.json, .npmrc and every `*.tgz` (a
 *   `file:` dependency on a packed tarball, e.g. runlet's own before it is on the registry),
 *   so the `npm ci` layer below is reused until one of them changes;
 * - stage `build` runs `npm ci` and the project's `build` script (`runlet build`), which puts
 *   the packages that cannot be bundled into `dist/node_modules`, installed by that `npm ci`
 *   for the image's platform and pruned of other platforms' binaries;
 * - the final stage is Node 22 slim with tini, the non-root user and the bundle; npm, npx,
 *   corepack and yarn are removed (no build tools at run time). `RUNLET_BASE_IMAGE` picks
 *   another base, e.g. a CUDA image built from Dockerfile.base; tini and the user are added
 *   only when that base lacks them.
 */
export function renderProjectDockerfile(options: ProjectDockerfileOptions = {}): string {
  const { baseImage, buildImage, runletBaseTag, buildDir, workdir, user, uid, entrypoint, cmd } =
    IMAGE_LAYOUT;
  const cuda = options.cuda === true;
  const lines = [
    "# syntax=docker/dockerfile:1",
    "#",
    "# The worker image, built from this project's files alone. Written by `runlet init` and by",
    "# `runlet build` when the project has no Dockerfile; edit it freely, runlet never overwrites it.",
    "#",
    "#   docker build -t my-worker .",
    "#",
    ...(cuda
      ? [
          `# A GPU image: the final stage starts from CUDA 12's runtime (${CUDA_BASE_IMAGE})`,
          "# with the build stage's Node. For a CPU-only image of the same project:",
          `#   docker build --build-arg RUNLET_BASE_IMAGE=${baseImage} -t my-worker .`,
        ]
      : [
          "# GPU workers: build runlet's CUDA base from Dockerfile.base once, then pass it in",
          `# (docs/images.md):  docker build --build-arg RUNLET_BASE_IMAGE=${runletBaseTag}-cuda -t my-worker .`,
        ]),
    "",
    `ARG RUNLET_BUILD_IMAGE=${buildImage}`,
    `ARG RUNLET_BASE_IMAGE=${cuda ? CUDA_BASE_IMAGE : baseImage}`,
    "",
    "# Only what `npm ci` reads, so its layer is reused until the dependencies change.",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Docker's own variable syntax
    "FROM ${RUNLET_BUILD_IMAGE} AS manifests",
    "COPY . /ctx",
    "RUN set -eu; mkdir /manifests; cd /ctx; \\",
    '    for f in package.json package-lock.json .npmrc; do if [ -f "$f" ]; then cp "$f" /manifests/; fi; done; \\',
    "    find . -path ./node_modules -prune -o -name '*.tgz' -type f -print \\",
    '      | while read -r f; do mkdir -p "/manifests/$(dirname "$f")"; cp "$f" "/manifests/$f"; done',
    "",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Docker's own variable syntax
    "FROM ${RUNLET_BUILD_IMAGE} AS build",
    "# Behind a proxy that re-signs TLS, npm needs its CA: pass a path to it inside the build",
    "# (--build-arg NODE_EXTRA_CA_CERTS=... with the file mounted or copied there). Unset: none.",
    "ARG NODE_EXTRA_CA_CERTS",
    ...(options.onnxruntime === true
      ? [
          "# onnxruntime-node: the project's .npmrc skips the download of ORT's CUDA provider; a GPU",
          "# image fetches it here with --build-arg ONNXRUNTIME_NODE_INSTALL=cuda12 (docs/gpu.md).",
          "ARG ONNXRUNTIME_NODE_INSTALL",
        ]
      : []),
    `WORKDIR ${buildDir}`,
    `COPY --from=manifests /manifests/ ./`,
    "# A failed install names the usual cause behind a proxy (npm's own words are often only",
    '# "Exit handler never called!") and the fix.',
    `RUN npm ci --no-audit --no-fund || { echo ${JSON.stringify(NPM_CI_HINT)} >&2; exit 1; }`,
    "COPY . .",
    "# The project's build script runs `runlet build`: dist/ gets the bundle, its source map, and",
    "# in dist/node_modules the packages it cannot hold, for this platform only; then its verify",
    "# step runs dist/ alone in an empty folder (handler, setup, test_input.json's job, teardown).",
    "RUN npm run build",
  ];
  lines.push(
    "",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Docker's own variable syntax
    "FROM ${RUNLET_BASE_IMAGE}",
    "# Root for the set-up below, also on a base whose last USER is another (runlet's CUDA base).",
    "USER root",
    ...(cuda
      ? [
          "# The CUDA base has no Node: the build stage's (the one that ran npm ci and runlet build).",
          `COPY --from=build ${NODE_BINARY} ${NODE_BINARY}`,
        ]
      : []),
    "# One layer: tini (PID 1 forwards SIGTERM to node, so the worker's graceful shutdown runs),",
    "# the non-root user, both only when the base lacks them; no package manager at run time, and",
    "# none of apt's lists, caches or logs left in the layer.",
    "RUN set -eux; \\",
    "    if ! [ -x /usr/bin/tini ]; then \\",
    "      export DEBIAN_FRONTEND=noninteractive; \\",
    "      apt-get update; apt-get install -y --no-install-recommends tini; \\",
    `      apt-get clean; rm -rf ${APT_LEFTOVERS}; \\`,
    "    fi; \\",
    `    id -u ${user} >/dev/null 2>&1 || useradd --system --uid ${uid} --user-group --no-create-home --shell /usr/sbin/nologin ${user}; \\`,
    "    rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /opt/yarn-* \\",
    "      /usr/local/bin/npm /usr/local/bin/npx /usr/local/bin/corepack /usr/local/bin/yarn /usr/local/bin/yarnpkg",
    "",
  );
  lines.push(
    "# The bundle carries runlet and every dependency it could hold; dist/node_modules, the ones it",
    "# could not (native addons, packages that read their own files), built in the stage above",
    "# on the same libc. The map makes stack traces readable.",
    "# Owned by root: the worker cannot rewrite its own code.",
    `COPY --from=build ${buildDir}/dist/ ${workdir}/`,
    "# NODE_ENV=production: libraries skip their development paths. --enable-source-maps: stack",
    "# traces point at the TypeScript sources. The compile cache, filled here, saves start-up time.",
    `ENV NODE_ENV=production NODE_OPTIONS=--enable-source-maps NODE_COMPILE_CACHE=${IMAGE_LAYOUT.compileCacheDir}`,
    ...(options.onnxruntime === true
      ? [
          "# onnxruntime-node 1.30 sends usage telemetry over HTTPS unless told not to.",
          "ENV ORT_DISABLE_TELEMETRY=1",
        ]
      : []),
    `RUN ${execForm([...cmd, WARM_COMPILE_CACHE_FLAG])}`,
    `WORKDIR ${workdir}`,
    `USER ${user}`,
    `ENTRYPOINT ${execForm(entrypoint)}`,
    `CMD ${execForm(cmd)}`,
    "",
  );
  return lines.join("\n");
}
