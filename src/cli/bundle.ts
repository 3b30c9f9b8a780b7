import { mkdir, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { build, type Message, type Plugin } from "esbuild";
import { RunletError } from "../errors.js";
import { runletExports } from "./paths.js";

/** Options of {@link bundleHandler}. */
export interface BundleOptions {
  /** Absolute path of the handler module (its default export is a `defineHandler(...)` result). */
  readonly handlerPath: string;
  /** Folder the bundle is written to. */
  readonly outDir: string;
  /** Packages left out of the bundle (native addons); the image must provide them. @default [] */
  readonly externals?: readonly string[];
  /** Minify the bundle. @default false */
  readonly minify?: boolean;
}

/** What {@link bundleHandler} wrote. */
export interface BundleResult {
  readonly bundlePath: string;
  readonly mapPath: string;
  readonly bundleBytes: number;
  readonly mapBytes: number;
  /** esbuild's warnings, formatted for a terminal. */
  readonly warnings: readonly string[];
}

/** The file name of the bundle; Dockerfile.base's CMD runs it as /app/worker.mjs. */
export const BUNDLE_FILE = "worker.mjs";

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

/** This copy's `worker/serve` module (`.ts` from sources, `.js` when built). */
function serveModulePath(): string {
  return fileURLToPath(
    new URL(import.meta.url.endsWith(".ts") ? "../worker/serve.ts" : "../worker/serve.js", import.meta.url),
  );
}

/**
 * The bundle's entry: it imports the handler and hands it to runlet's `serveHandler`, which runs
 * the worker loop on the main thread and, when this same file is started again as an
 * `isolation: "thread"` executor, serves jobs there instead (docs/worker.md, "Thread entry").
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
    `  const { default: definition } = await import(${JSON.stringify(handlerPath)});`,
    "  if (!isHandlerDefinition(definition)) {",
    `    throw new RunletError("RUNLET_HANDLER_LOAD", ${JSON.stringify(`${basename(handlerPath)} must \`export default defineHandler({...})\``)});`,
    "  }",
    "  process.exitCode = await serveHandler(definition, { env: process.env, threadEntry: import.meta.url });",
    "} catch (err) {",
    "  process.stderr.write(",
    // biome-ignore lint/suspicious/noTemplateCurlyInString: generated code holds its own template literal
    "    isRunletError(err) ? `runlet: ${err.message} (${err.code})\\n` : `runlet: ${err?.stack ?? String(err)}\\n`,",
    "  );",
    "  process.exitCode = 1;",
    "}",
    "",
  ].join("\n");
}

/**
 * Resolves `runlet` and `runlet/<subpath>` to this copy's sources, so a bundle holds exactly one
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

function formatMessage(m: Message): string {
  const where = m.location === null ? "" : `${m.location.file}:${m.location.line}:${m.location.column}: `;
  return `${where}${m.text}`;
}

/**
 * Bundles a handler and runlet into one ESM file (`<outDir>/worker.mjs`) with a source map:
 * platform node, target node22, every npm dependency inlined except `externals`.
 */
export async function bundleHandler(options: BundleOptions): Promise<BundleResult> {
  const bundlePath = join(options.outDir, BUNDLE_FILE);
  const mapPath = `${bundlePath}.map`;
  await mkdir(options.outDir, { recursive: true });
  let warnings: Message[];
  try {
    const result = await build({
      stdin: {
        contents: renderEntry(options.handlerPath),
        resolveDir: dirname(options.handlerPath),
        sourcefile: "runlet-worker-entry.ts",
        loader: "ts",
      },
      bundle: true,
      format: "esm",
      platform: "node",
      target: "node22",
      outfile: bundlePath,
      sourcemap: "linked",
      external: [...(options.externals ?? [])],
      banner: { js: CJS_BANNER },
      plugins: [runletResolver()],
      minify: options.minify ?? false,
      legalComments: "none",
      logLevel: "silent",
    });
    warnings = result.warnings;
  } catch (err) {
    const errors = (err as { errors?: Message[] }).errors;
    const detail = errors === undefined ? String(err) : errors.map(formatMessage).join("\n");
    throw new RunletError("RUNLET_BUILD_FAILED", `esbuild could not bundle the handler:\n${detail}`, {
      cause: err,
    });
  }
  const [bundleInfo, mapInfo] = await Promise.all([stat(bundlePath), stat(mapPath)]);
  return {
    bundlePath,
    mapPath,
    bundleBytes: bundleInfo.size,
    mapBytes: mapInfo.size,
    warnings: warnings.map(formatMessage),
  };
}
