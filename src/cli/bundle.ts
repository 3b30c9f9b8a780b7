import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { basename, dirname, join, resolve, sep } from "node:path";
import type * as Esbuild from "esbuild";
import type { BuildOptions, Message, Plugin } from "esbuild";
import { RunletError } from "../errors.js";
import { nodeFloorCheckSource } from "../node-floor.js";
import { AWS_SDK_PEERS, importPeer } from "../optional-peers.js";
import { TELEMETRY_PEERS } from "../telemetry/index.js";
import { WARM_COMPILE_CACHE_FLAG } from "./dockerfile.js";
import { type External, findUnbundlable } from "./externals.js";
import { RUNLET_ROOT, runletExports } from "./paths.js";

/** Options of {@link bundleHandler}. */
export interface BundleOptions {
  /** Absolute path of the handler module (its default export is a `defineHandler(...)` result). */
  readonly handlerPath: string;
  /** Folder the bundle is written to. */
  readonly outDir: string;
  /**
   * Packages left out of the bundle (native addons; declared in package.json or named with
   * `--external`): `runlet build` copies them into `<outDir>/node_modules`. @default []
   */
  readonly externals?: readonly string[];
  /**
   * Also leave out, and report in `externals` of the result, every package found that cannot
   * be bundled: native binaries, or code that finds its own files through `__dirname` or
   * `import.meta.url` (src/cli/externals.ts). @default true
   */
  readonly findExternals?: boolean;
  /** Minify the bundle (stack traces stay readable through the source maps). @default true */
  readonly minify?: boolean;
  /**
   * Keep the source maps of every output file. By default only the files holding the project's
   * own code (and the small entry) keep theirs: with `--enable-source-maps` (the image sets it)
   * Node parses each map when its module loads, and the maps of runlet and the npm dependencies
   * cost a start ~30 ms and ~18 MiB. @default false
   */
  readonly allSourceMaps?: boolean;
}

/** What {@link bundleHandler} wrote. */
export interface BundleResult {
  readonly bundlePath: string;
  readonly mapPath: string;
  /** Bytes Node reads before the first job: the entry and the chunks it imports statically. */
  readonly bundleBytes: number;
  /** Bytes of the chunks loaded only when a job needs them (the S3 SDK, for `ctx.s3` and offloads). */
  readonly lazyBytes: number;
  /** Bytes of the source maps kept. */
  readonly mapBytes: number;
  /** esbuild's warnings, formatted for a terminal. */
  readonly warnings: readonly string[];
  /** Every package left out of the bundle, each with why (the ones asked for, then the ones found). */
  readonly externals: readonly External[];
}

/** The file name of the bundle; the image's CMD runs it as /app/worker.mjs. */
export const BUNDLE_FILE = "worker.mjs";

/** The heartbeat thread's own file, beside the bundle (the entry passes it as `heartbeatEntry`). */
export const HEARTBEAT_BUNDLE_FILE = "heartbeat-thread.mjs";

/** The name esbuild gives the generated entry module (in maps and messages). */
const ENTRY_SOURCE = "runlet-worker-entry.ts";

/** The folder (beside the bundle) of the chunks it shares with the parts it loads on demand. */
export const CHUNK_DIR = "chunks";

/**
 * ESM has no `require`, but CommonJS dependencies bundled into an ESM file still call it (for
 * Node built-ins, mostly); this banner gives them one bound to the bundle's own location.
 */
const CJS_BANNER = [
  'import { createRequire as __runletCreateRequire } from "node:module";',
  "const require = __runletCreateRequire(import.meta.url);",
].join("\n");

/**
 * The specifier the entry imports `serveHandler` by: internal (not in the package's exports),
 * resolved by {@link runletResolver} to this copy's `worker/serve` module.
 */
const INTERNAL_SERVE = "runlet/internal/serve";

/** The `worker/serve` module beside the root export's file, so the bundle takes all of runlet from one copy (dist/). */
function serveModulePath(): string {
  const root = runletExports().get("runlet");
  if (root === undefined)
    throw new RunletError("RUNLET_CLI_UNEXPECTED", "runlet's package.json has no root export");
  return join(dirname(root), "worker", "serve.js");
}

/**
 * The bundle's entry: it imports the handler and hands it to runlet's `serveHandler`, which runs
 * the worker loop on the main thread and, when this same file is started again as an
 * `isolation: "thread"` runner thread, serves jobs there instead (docs/worker.md, "Thread entry").
 * The handler is imported inside the `try` so that a handler which fails to load, or a missing
 * platform variable, ends the process with one readable line and exit code 1, not an uncaught
 * stack trace.
 */
export function renderEntry(handlerPath: string): string {
  return [
    'import { isHandlerDefinition, isRunletError, RunletError } from "runlet";',
    `import { serveHandler } from "${INTERNAL_SERVE}";`,
    "",
    "try {",
    `  const { default: definition } = await import(${JSON.stringify(handlerPath)}).catch((err) => {`,
    `    throw new RunletError("RUNLET_HANDLER_LOAD", ${JSON.stringify(`${basename(handlerPath)} could not be imported: `)} + (err?.message ?? String(err)), { cause: err });`,
    "  });",
    "  if (!isHandlerDefinition(definition)) {",
    `    throw new RunletError("RUNLET_HANDLER_LOAD", ${JSON.stringify(`${basename(handlerPath)} must \`export default defineHandler({...})\``)});`,
    "  }",
    // The image build runs the bundle once with this flag: everything a start loads is now
    // compiled, and Node writes its compile cache (NODE_COMPILE_CACHE) on the way out.
    `  if (process.argv[2] === ${JSON.stringify(WARM_COMPILE_CACHE_FLAG)}) {`,
    "    process.exitCode = 0;",
    "  } else {",
    `    process.exitCode = await serveHandler(definition, { env: process.env, threadEntry: import.meta.url, heartbeatEntry: new URL(${JSON.stringify(`./${HEARTBEAT_BUNDLE_FILE}`)}, import.meta.url).href });`,
    "  }",
    "} catch (err) {",
    "  process.stderr.write(",
    "    isRunletError(err)",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: generated code holds its own template literal
    "      ? `runlet start: ${err.message} (${err.code})\\n`",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: generated code holds its own template literal
    '      : `runlet start: ${err?.message ?? String(err)} (RUNLET_CLI_UNEXPECTED)\\n${err?.stack ?? ""}\\n`,',
    "  );",
    "  process.exitCode = 1;",
    "}",
    "",
  ].join("\n");
}

/**
 * Resolves `runlet` and `runlet/<subpath>` to this copy's files (dist/), so a bundle holds exactly one
 * runlet (the one whose CLI built it) even when the handler's folder has no node_modules/runlet,
 * as in runlet's own examples.
 */
function runletResolver(): Plugin {
  return {
    name: "runlet-self",
    setup(b) {
      b.onResolve({ filter: /^runlet(\/.*)?$/ }, (args) => {
        if (args.path === INTERNAL_SERVE) return { path: serveModulePath() };
        const path = runletExports().get(args.path);
        if (path === undefined) {
          return { errors: [{ text: `runlet does not export "${args.path}"` }] };
        }
        return { path };
      });
    },
  };
}

/**
 * The run-time optional peers runlet cannot resolve (the AWS SDK for S3, tar-stream for the warm
 * cache): left out of the bundle, so a project without them still builds, and a job that needs S3
 * (or a worker with `warmCache`) gets an error that names them (RUNLET_MISSING_PEER) instead of
 * the build failing.
 */
function missingAwsSdk(): string[] {
  return missingFrom([...AWS_SDK_PEERS, "tar-stream"], join("s3", "index.js"));
}

/** Likewise for telemetry's OpenTelemetry packages (docs/observability.md). */
function missingFrom(names: readonly string[], module: string): string[] {
  const from = createRequire(join(RUNLET_ROOT, "dist", module));
  return names.filter((name) => {
    try {
      from.resolve(name);
      return false;
    } catch {
      // Not installed where runlet's S3 module would import it from.
      return true;
    }
  });
}

function formatMessage(m: Message): string {
  const where = m.location === null ? "" : `${m.location.file}:${m.location.line}:${m.location.column}: `;
  return `${where}${m.text}`;
}

/** Whether a metafile input is the project's own code: not runlet's, not a package's, not esbuild's. */
function isProjectInput(input: string): boolean {
  if (input.startsWith("<") || basename(input) === ENTRY_SOURCE) return false;
  const abs = resolve(input);
  // runlet's own code comes from its dist/ (the package's exports) or, in runlet's repository, src/.
  const inRunlet = ["dist", "src"].some((dir) => abs.startsWith(join(RUNLET_ROOT, dir) + sep));
  return !abs.includes(`${sep}node_modules${sep}`) && !inRunlet;
}

/**
 * Removes the source maps (and the comments naming them) of output files that hold none of the
 * project's code, so Node under `--enable-source-maps` parses only the maps that map a
 * handler's frames. The entry keeps its map.
 */
async function dropLibraryMaps(
  outputs: Record<string, { inputs: Record<string, unknown> }>,
  bundlePath: string,
): Promise<void> {
  for (const [path, out] of Object.entries(outputs)) {
    const file = resolve(path);
    if (!file.endsWith(".mjs") || file === bundlePath) continue;
    if (Object.keys(out.inputs).some(isProjectInput)) continue;
    const text = await readFile(file, "utf8");
    await writeFile(file, text.replace(/\n\/\/# sourceMappingURL=[^\n]*\n?$/, "\n"));
    await rm(`${file}.map`, { force: true });
  }
}

/** Deletes the files under `<outDir>/chunks/` this build did not write. */
async function dropStaleChunks(outDir: string, outputs: Record<string, unknown>): Promise<void> {
  const written = new Set(Object.keys(outputs).map((path) => resolve(path)));
  const dir = join(outDir, CHUNK_DIR);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch {
    return; // No chunks folder: nothing stale.
  }
  await Promise.all(
    names
      .map((name) => join(dir, name))
      .filter((path) => !written.has(path))
      .map((path) => rm(path, { force: true })),
  );
}

/**
 * The heartbeat thread's module as its own small file beside the bundle (the entry names it as
 * `heartbeatEntry`): the thread loads only it, not the handler and its dependencies, because
 * every thread has its own heap.
 */
async function bundleHeartbeatThread(outDir: string, minify: boolean, sourceMap: boolean): Promise<void> {
  const { build } = await import("esbuild");
  try {
    await build({
      entryPoints: [join(dirname(serveModulePath()), "platform", "heartbeat-thread.js")],
      outfile: join(outDir, HEARTBEAT_BUNDLE_FILE),
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node22",
      minify,
      // It holds none of the project's code: a map only when every file's is asked for.
      sourcemap: sourceMap ? "linked" : false,
      sourcesContent: false,
      legalComments: "none",
      logLevel: "silent",
    });
  } catch (err) {
    throw new RunletError(
      "RUNLET_BUILD_FAILED",
      `esbuild could not bundle the heartbeat thread: ${String(err)}`,
      {
        cause: err,
      },
    );
  }
}

/** What esbuild says when it meets a file it has no loader for, such as a native addon. */
const NO_LOADER = /No loader is configured for "\.(\w+)" files/;

/** Runs esbuild; a failure becomes RUNLET_BUILD_FAILED with esbuild's messages and what to do. */
async function runEsbuild(
  options: BuildOptions & { metafile: true },
): Promise<Esbuild.BuildResult<BuildOptions & { metafile: true }>> {
  // Loaded here, not at the top: only `runlet build` needs esbuild (an optional peer), and
  // `runlet --help` loads this module.
  const { build } = await importPeer<typeof Esbuild>("esbuild", "esbuild", "runlet build");
  try {
    return await build(options);
  } catch (err) {
    const errors = (err as { errors?: Message[] }).errors;
    const detail = errors === undefined ? String(err) : errors.map(formatMessage).join("\n");
    const ext = NO_LOADER.exec(detail)?.[1];
    const hint =
      ext === undefined
        ? ""
        : `\nA .${ext} file cannot go into a bundle. If it belongs to a package, name the package in package.json as "runlet": {"externals": ["<package>"]} (runlet build then copies it into dist/node_modules); if it is the project's own, load it at run time from a path outside the bundle.`;
    throw new RunletError("RUNLET_BUILD_FAILED", `esbuild could not bundle the handler:\n${detail}${hint}`, {
      cause: err,
    });
  }
}

/**
 * Bundles a handler and runlet into `<outDir>/worker.mjs` with source maps: platform node,
 * target node22, minified, every npm dependency inlined except `externals`. Code reached only
 * through a dynamic `import()` (the S3 SDK, loaded on a job's first `ctx.s3` use or offload)
 * goes into chunks under `<outDir>/chunks/`, so a start reads and compiles only what it runs;
 * the folder is the unit to copy into an image. pino-pretty is never bundled: a bundle logs
 * JSON lines on the platform and falls back to them locally (docs/images.md).
 */
export async function bundleHandler(options: BundleOptions): Promise<BundleResult> {
  const outDir = resolve(options.outDir);
  const bundlePath = join(outDir, BUNDLE_FILE);
  const mapPath = `${bundlePath}.map`;
  const asked = [...new Set(options.externals ?? [])];
  const common: BuildOptions & { metafile: true } = {
    stdin: {
      contents: renderEntry(options.handlerPath),
      resolveDir: dirname(options.handlerPath),
      sourcefile: ENTRY_SOURCE,
      loader: "ts",
    },
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node22",
    outdir: outDir,
    entryNames: BUNDLE_FILE.replace(/\.mjs$/, ""),
    chunkNames: `${CHUNK_DIR}/[name]-[hash]`,
    outExtension: { ".js": ".mjs" },
    sourcemap: "linked",
    // The image runs with --enable-source-maps, which makes Node parse every map when its
    // module loads: without the sources' text the maps are a fraction of the size, and stack
    // traces still name the original files and lines.
    sourcesContent: false,
    // Then the floor check: below Node 22.19 the bundle says so and exits before runlet's code runs
    // (the banner's import is hoisted; only Node's own modules load before the check).
    banner: { js: `${CJS_BANNER}\n${nodeFloorCheckSource("runlet start")}` },
    plugins: [runletResolver()],
    minify: options.minify ?? true,
    legalComments: "none",
    logLevel: "silent",
    metafile: true,
  };
  const alwaysOut = [
    "pino-pretty",
    ...missingAwsSdk(),
    ...missingFrom(TELEMETRY_PEERS, join("telemetry", "otel.js")),
  ];
  // First pass in memory: its metafile lists what esbuild read, which tells the packages that
  // cannot be bundled. A `.node` file is read as empty there (esbuild has no loader for one, and
  // would stop at the first); a package holding one is then left out, and the second pass
  // writes. Without such packages, the first pass's files are the bundle.
  let result = await runEsbuild({
    ...common,
    external: [...asked, ...alwaysOut],
    write: false,
    loader: { ".node": "empty" },
  });
  const found =
    options.findExternals === false
      ? []
      : await findUnbundlable(Object.keys(result.metafile.inputs), process.cwd(), new Set(asked));
  if (found.length > 0) {
    result = await runEsbuild({
      ...common,
      external: [...asked, ...found.map((f) => f.name), ...alwaysOut],
      write: true,
    });
  } else {
    for (const file of result.outputFiles ?? []) {
      await mkdir(dirname(file.path), { recursive: true });
      await writeFile(file.path, file.contents);
    }
  }
  const warnings: Message[] = result.warnings;
  const outputs = result.metafile.outputs;
  const externals: External[] = [...asked.map((name) => ({ name, reason: "declared external" })), ...found];
  // esbuild writes nothing (not even the folder) when the build fails: a failed build leaves an
  // earlier dist/ as it was, and no empty one. Chunk names carry content hashes: an earlier
  // build's are dropped only now, or they would pile up in the image.
  await dropStaleChunks(outDir, outputs);
  await bundleHeartbeatThread(outDir, options.minify ?? true, options.allSourceMaps === true);
  if (options.allSourceMaps !== true) await dropLibraryMaps(outputs, bundlePath);
  // The metafile names outputs relative to the working directory; sizes by absolute path.
  const sizes = new Map<string, { bytes: number; imports: { path: string; kind: string }[] }>();
  for (const [path, out] of Object.entries(outputs)) sizes.set(resolve(path), out);
  // Eager: the entry, the handler it imports (dynamically, to report a load failure), and what
  // those import statically.
  const eager = new Set<string>();
  const visit = (path: string) => {
    if (eager.has(path)) return;
    eager.add(path);
    for (const i of sizes.get(path)?.imports ?? []) {
      if (i.kind === "import-statement" || path === bundlePath) visit(resolve(i.path));
    }
  };
  visit(bundlePath);
  let bundleBytes = 0;
  let lazyBytes = 0;
  let mapBytes = 0;
  for (const [path, out] of sizes) {
    if (path.endsWith(".map")) mapBytes += existsSync(path) ? out.bytes : 0;
    else if (eager.has(path)) bundleBytes += out.bytes;
    else lazyBytes += out.bytes;
  }
  await Promise.all([stat(bundlePath), stat(mapPath)]); // Both written, or esbuild changed its layout.
  return {
    bundlePath,
    mapPath,
    bundleBytes,
    lazyBytes,
    mapBytes,
    warnings: warnings.map(formatMessage),
    externals,
  };
}
