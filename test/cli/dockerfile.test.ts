import { readFileSync } from "node:fs";
import { join, posix } from "node:path";
import { describe, expect, it } from "vitest";
import { IMAGE_LAYOUT, renderProjectDockerfile } from "../../src/cli/dockerfile.js";
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
    expect(IMAGE_LAYOUT.cmd[1]).toBe(IMAGE_LAYOUT.bundlePath);
  });

  it("sets production mode and source-mapped stack traces", () => {
    const env = only(base, "ENV").join(" ");
    expect(env).toContain("NODE_ENV=production");
    expect(env).toContain("NODE_OPTIONS=--enable-source-maps");
  });
});

describe("the project Dockerfile runlet build writes", () => {
  for (const [label, externals] of [
    ["without externals", []],
    ["with a native addon", [{ name: "sharp", version: "0.33.5" }]],
  ] as const) {
    it(`puts the bundle where the base image's CMD runs it, as the same user (${label})`, () => {
      const project = parseDockerfile(renderProjectDockerfile(externals));
      expect(only(project, "FROM")).toEqual([FROM_RUNLET_BASE]);
      expect(argDefault(project, "RUNLET_BASE_IMAGE")).toBe(IMAGE_LAYOUT.baseImage);
      expect(only(project, "WORKDIR")).toEqual([]);
      const copies = only(project, "COPY");
      expect(copies).toEqual([`dist/worker.mjs dist/worker.mjs.map ${IMAGE_LAYOUT.workdir}/`]);
      const dest = copies[0]?.split(" ").at(-1) ?? "";
      expect(posix.join(dest, "worker.mjs")).toBe(IMAGE_LAYOUT.bundlePath);
      // The last USER wins: the worker never runs as root, whatever ran before.
      expect(only(project, "USER").at(-1)).toBe(IMAGE_LAYOUT.user);
      expect(JSON.parse(only(project, "CMD").at(-1) ?? "null")).toEqual(IMAGE_LAYOUT.cmd);
    });
  }

  it("installs declared externals into the workdir at their installed version", () => {
    const project = parseDockerfile(renderProjectDockerfile([{ name: "sharp", version: "0.33.5" }]));
    expect(only(project, "RUN")).toEqual([
      `cd ${IMAGE_LAYOUT.workdir} && npm install --omit=dev --no-save --no-audit --no-fund sharp@0.33.5 && npm cache clean --force`,
    ]);
  });

  it("is the Dockerfile every starter template ships", () => {
    for (const name of TEMPLATE_NAMES) {
      expect(readFileSync(join(RUNLET_ROOT, "templates", name, "Dockerfile"), "utf8")).toBe(
        renderProjectDockerfile(),
      );
    }
  });
});
