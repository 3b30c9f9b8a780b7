import { readFile, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { RunletError } from "../../errors.js";
import { bundleHandler } from "../bundle.js";
import { type Command, EXIT, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { dockerfileOptionsFor, IMAGE_LAYOUT, renderProjectDockerfile } from "../dockerfile.js";
import { copyExternals, declaredExternals, EXTERNALS_KEY } from "../externals.js";
import { DEFAULT_HANDLER_PATHS, resolveHandlerPath } from "../handler-path.js";
import { declaredFileRules } from "../prune-externals.js";
import { declaredVerifyMode, VERIFY_KEY, verifyBundle } from "../verify-bundle.js";

const HELP = `Usage: runlet build [handler] [--external PKG]... [--no-minify] [--all-source-maps] [--no-prune] [--no-verify] [--verify-timeout S]

Bundles the handler, runlet and every npm dependency it can hold for Node 22 into dist/:
worker.mjs, the chunks/ it loads (the S3 SDK only when a job uses S3) and source maps. Packages
that cannot be bundled (native binaries; code that finds its own files through __dirname or
import.meta.url) are found, named with the reason, and copied with their dependencies into
dist/node_modules, without other platforms' binaries, source maps, docs, tests and browser
builds (package.json's "runlet": {"externalFiles": {"include": [...], "exclude": [...]}} keeps
or drops more, "<package>/<glob>" each), with the size each adds: the image needs dist/ alone.
Writes the project's multi-stage Dockerfile when there is none. Run it in the project's folder.

Arguments:
  handler             the handler module
                      default: the first of ${DEFAULT_HANDLER_PATHS.join(", ")}

Options:
  --external PKG      also leave PKG out of the bundle; repeatable. Better: list it in
                      package.json as "runlet": {"externals": ["PKG"]}, which every build reads
  --no-minify         keep the bundle readable (it is minified by default; frames in the
                      project's own code stay readable through the source maps either way)
  --minify            accepted for older scripts: minifying is the default
  --no-verify         skip the verify step (a setup that needs a GPU, secrets or a network the
                      build has not); the image's build stage runs it too, unless its build
                      script says --no-verify
  --verify-timeout S  longest the verify step may take, seconds. default: 300
                      package.json's "runlet": {"verify": "setup"} stops it after setup (a
                      job that needs an S3 store or a GPU); "off" skips it in every build
  --no-prune          copy the externals whole but for other platforms' binaries (source maps,
                      docs, tests and browser builds included)
  --all-source-maps   keep the source maps of runlet and the dependencies too; by default only
                      the files with the project's own code keep theirs (each map costs
                      start-up time and memory under the image's --enable-source-maps)
  -h, --help          show this help

Exit codes: 0 built (and verified), 1 esbuild failed, the verify step failed or the Dockerfile cannot carry dist/node_modules, 2 bad usage (unknown flag, missing handler file).`;

function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(2)} MiB`;
}

/** Longest the verify step takes by default, seconds. */
const DEFAULT_VERIFY_TIMEOUT_S = 300;

/**
 * What an existing Dockerfile must change to carry `dist/node_modules` into the image, or
 * `undefined` when it does: a COPY of the whole dist/ folder, and no step of runlet's older
 * Dockerfile that installed externals apart (with npm, from the registry, without the project's
 * .npmrc and lockfile).
 */
export function dockerfileProblem(text: string, names: readonly string[]): string | undefined {
  const { buildDir, workdir } = IMAGE_LAYOUT;
  const lines = text.split(/\r?\n/).map((l) => l.trim());
  const wanted = `COPY --from=build ${buildDir}/dist/ ${workdir}/`;
  const fix = ` (or delete the Dockerfile and run runlet build to write a new one; docs/images.md, "What cannot be bundled")`;
  if (lines.some((l) => /^RUN\b.*\/externals\b/.test(l))) {
    return (
      `the Dockerfile installs externals in /externals with npm, which runlet build now copies into dist/node_modules (${names.join(", ")}): ` +
      `remove its "RUN mkdir /externals ..." step and its "COPY --from=build /externals/node_modules ..." line${fix}`
    );
  }
  const copiesDist = lines.some(
    (l) => /^COPY\b.*\sdist\/?\s+\S+$/.test(l) || /^COPY\b.*\/dist\/?\s+\S+$/.test(l),
  );
  if (!copiesDist) {
    return `the Dockerfile does not copy the whole dist/ folder into the image, so the externals in dist/node_modules (${names.join(", ")}) would be missing: give its final stage the line "${wanted}"${fix}`;
  }
  return undefined;
}

/**
 * The note `runlet build` prints when this machine sets NODE_EXTRA_CA_CERTS: likely a proxy that
 * re-signs TLS, which the image build's npm must trust too, or it fails after minutes with
 * "Exit handler never called!" (docs/images.md, "Behind a proxy that re-signs TLS").
 */
export function proxyCaNote(caPath: string): string {
  return (
    `note: this machine sets NODE_EXTRA_CA_CERTS=${caPath} (a proxy that re-signs TLS?): the image build's npm needs that CA too, or npm ci fails ("Exit handler never called!"). Pass it to the build:\n` +
    `  STORAGE_DRIVER=vfs buildah bud --isolation chroot --volume ${caPath}:/run/proxy-ca.pem:ro --build-arg NODE_EXTRA_CA_CERTS=/run/proxy-ca.pem -t my-worker .\n` +
    `  (with docker: a build image that carries the CA, docs/images.md, "Behind a proxy that re-signs TLS")\n`
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
      "no-verify": { type: "boolean" },
      "no-prune": { type: "boolean" },
      "verify-timeout": { type: "string" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      const cwd = process.cwd();
      if (parsed.positionals.length > 1) throw usageError("expected at most one handler");
      const handlerPath = await resolveHandlerPath(parsed.positionals[0], cwd);
      const { external, "no-minify": noMinify, "all-source-maps": allSourceMaps } = parsed.values;
      const timeoutText = parsed.values["verify-timeout"];
      const verifyTimeoutS = timeoutText === undefined ? DEFAULT_VERIFY_TIMEOUT_S : Number(timeoutText);
      if (!Number.isInteger(verifyTimeoutS) || verifyTimeoutS < 1 || verifyTimeoutS > 3_600) {
        throw usageError(`--verify-timeout takes whole seconds from 1 to 3600, got ${String(timeoutText)}`);
      }
      const flagged = Array.isArray(external) ? external.map(String) : [];
      const declared = await declaredExternals(cwd);
      const fileRules = await declaredFileRules(cwd);
      const mode = await declaredVerifyMode(cwd);
      const result = await bundleHandler({
        handlerPath,
        outDir: join(cwd, "dist"),
        externals: [...new Set([...declared, ...flagged])],
        minify: noMinify !== true,
        allSourceMaps: allSourceMaps === true,
      });
      for (const warning of result.warnings) process.stderr.write(`warning: ${warning}\n`);
      const rel = (p: string) => relative(cwd, p);
      const names = result.externals.map((e) => e.name);
      // Found from the handler's folder, as its imports are.
      const copied = await copyExternals(names, dirname(handlerPath), join(cwd, "dist"), {
        rules: fileRules,
        prune: parsed.values["no-prune"] !== true,
      });
      const added = new Map(copied.sizes.map((s) => [s.name, s]));
      process.stdout.write(
        `Built ${rel(result.bundlePath)}  ${formatBytes(result.bundleBytes)} loaded at start` +
          `, ${formatBytes(result.lazyBytes)} on demand  (source maps ${formatBytes(result.mapBytes)})\n`,
      );
      for (const e of result.externals) {
        const why = declared.includes(e.name)
          ? `declared in package.json (${EXTERNALS_KEY})`
          : flagged.includes(e.name)
            ? "--external"
            : e.reason;
        const size = added.get(e.name);
        const adds =
          size === undefined
            ? ""
            : `  +${formatBytes(size.bytes)}${size.packages > 1 ? ` (${size.packages} packages)` : ""}`;
        process.stdout.write(`external: ${e.name}  ${why}${adds}\n`);
      }
      if (names.length > 0) {
        process.stdout.write(
          `Copied ${copied.packages} package${copied.packages === 1 ? "" : "s"} into dist/node_modules  ${formatBytes(copied.bytes)}` +
            (copied.prunedBytes > 0
              ? ` (left out ${formatBytes(copied.prunedBytes)}: ${copied.pruned.map((p) => `${p.reason} ${formatBytes(p.bytes)}`).join(", ")})`
              : "") +
            "\n",
        );
        const undeclared = result.externals.filter((e) => !declared.includes(e.name)).map((e) => e.name);
        if (undeclared.length > 0) {
          process.stdout.write(
            `note: list them in package.json to make the build's choice explicit: "runlet": {"externals": ${JSON.stringify([...declared, ...undeclared])}}\n`,
          );
        }
      }
      const proxyCa = process.env["NODE_EXTRA_CA_CERTS"]?.trim();
      if (proxyCa !== undefined && proxyCa !== "") process.stdout.write(proxyCaNote(proxyCa));
      if (parsed.values["no-verify"] === true || mode === "off") {
        process.stdout.write(
          `Verify step skipped (${mode === "off" ? `package.json: ${VERIFY_KEY} is "off"` : "--no-verify"})\n`,
        );
      } else {
        const report = await verifyBundle({
          projectDir: cwd,
          distDir: join(cwd, "dist"),
          declared,
          timeoutMs: verifyTimeoutS * 1_000,
          mode,
        });
        const jobs = report.hadInput
          ? `test_input.json's job${report.jobs.length === 1 ? "" : "s"} ${report.jobs.map((j) => `${j.status} in ${j.ms ?? "?"} ms`).join(", ")}`
          : mode === "setup"
            ? `no job (package.json: ${VERIFY_KEY} is "setup")`
            : "no job (the project has no test_input.json)";
        const hub =
          report.hubTests.length === 0
            ? ""
            : `, .runpod/tests.json's test${report.hubTests.length === 1 ? "" : "s"} ${report.hubTests.map((t) => `${t.name} ${t.status} in ${t.ms ?? "?"} ms`).join(", ")}`;
        process.stdout.write(
          `Verified dist/ alone in an empty folder: handler loaded, setup done (ready in ${Math.round(report.readyMs)} ms), ` +
            `${jobs}${hub}, stopped cleanly\n`,
        );
      }
      const dockerfile = join(cwd, "Dockerfile");
      const rendered = renderProjectDockerfile(await dockerfileOptionsFor(cwd));
      if (await writeDockerfileIfMissing(dockerfile, rendered)) {
        process.stdout.write(
          "Wrote Dockerfile (multi-stage, builds from the project's files; see docs/images.md)\n",
        );
      } else if (names.length > 0) {
        const problem = dockerfileProblem(await readFile(dockerfile, "utf8"), names);
        if (problem !== undefined) throw new RunletError("RUNLET_BUILD_FAILED", problem);
      }
      return EXIT.ok;
    } catch (err) {
      return reportCliError("build", err);
    }
  },
};
