import { readFile, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { bundleHandler } from "../bundle.js";
import { type Command, EXIT, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { type ExternalPackage, renderProjectDockerfile } from "../dockerfile.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";

const HELP = `Usage: runlet build [handler] [--external PKG]... [--no-minify] [--all-source-maps]

Bundles the handler, runlet and every npm dependency for Node 22 into dist/: worker.mjs, the
chunks/ it loads (the S3 SDK only when a job uses S3) and source maps; the image needs no
node_modules. Writes the project's multi-stage Dockerfile when there is none. Run it in the
project's folder.

Arguments:
  handler             the handler module
                      default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  --external PKG      leave PKG out of the bundle (a native addon); repeatable. The written
                      Dockerfile installs it into the image at the version in node_modules
  --no-minify         keep the bundle readable (it is minified by default; frames in the
                      project's own code stay readable through the source maps either way)
  --minify            accepted for older scripts: minifying is the default
  --all-source-maps   keep the source maps of runlet and the dependencies too; by default only
                      the files with the project's own code keep theirs (each map costs
                      start-up time and memory under the image's --enable-source-maps)
  -h, --help          show this help

Exit codes: 0 built, 1 esbuild failed, 2 bad usage (unknown flag, missing handler file).`;

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** The installed version of each external, so the image gets the same one the project tested with. */
async function describeExternals(names: readonly string[], cwd: string): Promise<ExternalPackage[]> {
  return Promise.all(
    names.map(async (name) => {
      try {
        const pkg = JSON.parse(await readFile(join(cwd, "node_modules", name, "package.json"), "utf8")) as {
          version?: string;
        };
        return { name, version: pkg.version };
      } catch {
        // Not installed locally: the Dockerfile then installs the latest; the build log says so.
        return { name, version: undefined };
      }
    }),
  );
}

/** Writes `Dockerfile` unless one exists (`wx` fails on an existing file instead of racing a check). */
async function writeDockerfileIfMissing(path: string, text: string): Promise<boolean> {
  try {
    await writeFile(path, text, { flag: "wx" });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  }
}

/** `runlet build`: bundles a handler with esbuild and writes the project's Dockerfile when missing. */
export const command: Command = {
  name: "build",
  summary: "bundle a handler into dist/worker.mjs and write a Dockerfile",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, {
      external: { type: "string", multiple: true },
      minify: { type: "boolean" },
      "no-minify": { type: "boolean" },
      "all-source-maps": { type: "boolean" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      const cwd = process.cwd();
      if (parsed.positionals.length > 1) throw usageError("expected at most one handler");
      const handlerPath = await resolveHandlerPath(parsed.positionals[0], cwd);
      const { external, "no-minify": noMinify, "all-source-maps": allSourceMaps } = parsed.values;
      const externals = Array.isArray(external) ? external.map(String) : [];
      const result = await bundleHandler({
        handlerPath,
        outDir: join(cwd, "dist"),
        externals,
        minify: noMinify !== true,
        allSourceMaps: allSourceMaps === true,
      });
      for (const warning of result.warnings) process.stderr.write(`warning: ${warning}\n`);
      const rel = (p: string) => relative(cwd, p);
      process.stdout.write(
        `Built ${rel(result.bundlePath)}  ${formatBytes(result.bundleBytes)} loaded at start` +
          `, ${formatBytes(result.lazyBytes)} on demand  (source maps ${formatBytes(result.mapBytes)})\n`,
      );
      const described = await describeExternals(externals, cwd);
      for (const e of described) {
        if (e.version === undefined) {
          process.stdout.write(
            `note: ${e.name} is external but not in node_modules; the image installs its latest\n`,
          );
        }
      }
      if (await writeDockerfileIfMissing(join(cwd, "Dockerfile"), renderProjectDockerfile(described))) {
        process.stdout.write(
          "Wrote Dockerfile (multi-stage, builds from the project's files; see docs/images.md)\n",
        );
      } else if (described.length > 0) {
        const specs = described.map((e) => (e.version === undefined ? e.name : `${e.name}@${e.version}`));
        process.stdout.write(
          `note: Dockerfile kept as it is; it must install ${specs.join(", ")} into /app\n`,
        );
      }
      return EXIT.ok;
    } catch (err) {
      return reportCliError("build", err);
    }
  },
};
