import { mkdir, readdir, stat, writeFile } from "node:fs/promises";
import { basename, join, relative, resolve } from "node:path";
import { VERSION } from "../../version.js";
import { type Command, EXIT, parseCommandArgs, reportCliError, usageError } from "../command.js";
import { dockerfileOptionsFor, renderProjectDockerfile } from "../dockerfile.js";
import { TEMPLATE_NAMES, TEMPLATES_DIR, type TemplateName } from "../paths.js";
import { defaultSource, runletFrom } from "../runlet-source.js";
import { copyTemplate, packageNameFor } from "../scaffold.js";
import { VENDOR_DIR, vendorRunlet } from "../vendor-runlet.js";

const HELP = `Usage: runlet init [dir] [--template ${TEMPLATE_NAMES.join("|")}] [--runlet-from PATH]

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
                       jobs, one call: a batch handler), ocr (PaddleOCR
                       on onnxruntime-node: a real model, loaded once), onnx
                       (a blank onnxruntime-node starter: a session made in
                       setup, tensors in and out, a tiny built-in model),
                       llm (a GGUF model on llama.cpp, OpenAI-compatible,
                       batched on one context)
                       default: basic
  --runlet-from PATH   a runlet tarball (npm pack) or folder: copied (a folder: packed)
                       into the project's ${VENDOR_DIR}/, which the project depends on
                       default: the tarball this runlet was installed from (npm's
                       lockfile says), likewise copied into ${VENDOR_DIR}/; ^${VERSION} when
                       it came from a registry; else this runlet itself, packed
  -h, --help           show this help

Exit codes: 0 created, 1 could not write or pack, 2 bad usage (unknown template, folder not empty).`;

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

/** `text` as one POSIX shell word: as is when it holds only safe characters, else single-quoted. */
export function shellQuote(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", "'\\''")}'`;
}

function isTemplateName(value: string): value is TemplateName {
  return (TEMPLATE_NAMES as readonly string[]).includes(value);
}

/** `runlet init`: copies a starter from templates/ into a new project folder. */
export const command: Command = {
  name: "init",
  summary: `create a worker project from a starter (${TEMPLATE_NAMES.join(", ")})`,
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
      const source = typeof fromFlag === "string" ? await runletFrom(fromFlag) : await defaultSource();
      const dir = resolve(parsed.positionals[0] ?? ".");
      await ensureEmptyDir(dir);
      const name = packageNameFor(basename(dir));
      const runlet = await vendorRunlet(source, dir);
      const files = await copyTemplate(join(TEMPLATES_DIR, template), dir, {
        name,
        runletDependency: runlet.dependency,
      });
      if (runlet.file !== undefined) files.push(runlet.file);
      // The one Dockerfile `runlet build` also writes, rendered here rather than kept as a copy per starter.
      await writeFile(join(dir, "Dockerfile"), renderProjectDockerfile(await dockerfileOptionsFor(dir)));
      files.push("Dockerfile");
      files.sort();
      const shown = relative(process.cwd(), dir) || ".";
      const cd = shown === "." ? "" : `  cd ${shellQuote(shown)}\n`;
      process.stdout.write(
        `Created ${name} from the ${template} starter in ${shown} (${files.length} files).\n` +
          `Its runlet dependency is ${runlet.dependency} (${runlet.origin})` +
          (runlet.file === undefined
            ? ".\n"
            : `; commit ${VENDOR_DIR}/ with the project: npm install and the Dockerfile install runlet from it.\n`) +
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
