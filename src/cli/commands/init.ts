import { mkdir, readdir, stat, writeFile } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { VERSION } from "../../version.js";
import { type Command, EXIT, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { renderProjectDockerfile } from "../dockerfile.js";
import { TEMPLATE_NAMES, TEMPLATES_DIR, type TemplateName } from "../paths.js";
import { fileSpec, installedFrom, runletFrom } from "../runlet-source.js";
import { copyTemplate, packageNameFor } from "../scaffold.js";

const HELP = `Usage: runlet init [dir] [--template basic|stream|s3|openai|batch] [--runlet-from PATH]

Creates a worker project from a starter: a TypeScript handler, package.json, tsconfig.json,
test_input.json, a vitest test using runlet/testing, the multi-stage Dockerfile,
.runpod/hub.json and .runpod/tests.json, and a README.

Arguments:
  dir                  where to create the project (created if missing; must be empty)
                       default: the current directory

Options:
  -t, --template NAME  the starter: basic (a JSON in, JSON out handler), stream (a generator
                       that streams tokens with metrics), s3 (a file through S3), openai
                       (an OpenAI-compatible chat/completions handler), batch (many
                       jobs, one call: a batch handler)
                       default: basic
  --runlet-from PATH   the project depends on this runlet tarball (npm pack) or folder
                       through a file: path, instead of the registry's runlet
                       default: the tarball or folder this runlet was installed from, if
                       any (npm's lockfile says); else ^${VERSION} from the registry
  -h, --help           show this help

Exit codes: 0 created, 1 could not write, 2 bad usage (unknown template, folder not empty).`;

/** Entries a fresh folder may already hold: \`git init\` before \`runlet init\` is common. */
const ALLOWED_EXISTING = new Set([".git"]);

async function ensureEmptyDir(dir: string): Promise<void> {
  const info = await stat(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return undefined;
    throw err;
  });
  if (info === undefined) {
    await mkdir(dir, { recursive: true });
    return;
  }
  if (!info.isDirectory()) throw usageError(`${dir} exists and is not a folder`);
  const entries = (await readdir(dir)).filter((e) => !ALLOWED_EXISTING.has(e));
  if (entries.length > 0) {
    const shown = entries.slice(0, 5).join(", ") + (entries.length > 5 ? ", …" : "");
    throw usageError(`${dir} is not empty (${shown}); choose a new or empty folder`);
  }
}

function isTemplateName(value: string): value is TemplateName {
  return (TEMPLATE_NAMES as readonly string[]).includes(value);
}

/** `runlet init`: copies a starter from templates/ into a new project folder. */
export const command: Command = {
  name: "init",
  summary: "create a worker project from a starter (basic, stream, s3, openai, batch)",
  help: HELP,
  async run(argv) {
    const parsed = parseCommandArgs(command, argv, {
      template: { type: "string", short: "t" },
      "runlet-from": { type: "string" },
    });
    if ("exitCode" in parsed) return parsed.exitCode;
    try {
      if (parsed.positionals.length > 1) throw usageError("expected at most one folder");
      const { template: named } = parsed.values;
      const template = typeof named === "string" ? named : "basic";
      if (!isTemplateName(template)) {
        throw usageError(`unknown template "${template}"; choose one of ${TEMPLATE_NAMES.join(", ")}`);
      }
      const fromFlag = parsed.values["runlet-from"];
      const from = typeof fromFlag === "string" ? await runletFrom(fromFlag) : await installedFrom();
      const dir = resolve(parsed.positionals[0] ?? ".");
      await ensureEmptyDir(dir);
      const name = packageNameFor(basename(dir));
      const runletDependency = from === undefined ? undefined : fileSpec(from, dir);
      const files = await copyTemplate(join(TEMPLATES_DIR, template), dir, {
        name,
        ...(runletDependency === undefined ? {} : { runletDependency }),
      });
      // The one Dockerfile `runlet build` also writes, rendered here rather than kept as a copy per starter.
      await writeFile(join(dir, "Dockerfile"), renderProjectDockerfile());
      files.push("Dockerfile");
      const shown = relative(process.cwd(), dir) || ".";
      const cd = shown === "." ? "" : `  cd ${shown}\n`;
      process.stdout.write(
        `Created ${name} from the ${template} starter in ${shown} (${files.length} files).\n` +
          (runletDependency === undefined ? "" : `Its runlet dependency is ${runletDependency}.\n`) +
          "\n" +
          `Next:\n${cd}  npm install\n  npm test            # the handler's tests\n` +
          "  npx runlet dev      # a local copy of the platform with your handler; prints a curl\n" +
          "  npx runlet build    # dist/worker.mjs for the Dockerfile\n",
      );
      return EXIT.ok;
    } catch (err) {
      return reportCliError("init", err);
    }
  },
};
