import { VERSION } from "../version.js";
import type { Command } from "./command.js";

/** Every command, in the order `runlet --help` lists them; each lives in commands/<name>.ts. */
const COMMANDS: Record<string, () => Promise<{ command: Command }>> = {
  // Each command's module registers here: init, dev, test, build, start, harness, deploy.
  init: () => import("./commands/init.js"),
  dev: () => import("./commands/dev.js"),
  test: () => import("./commands/test.js"),
  build: () => import("./commands/build.js"),
  start: () => import("./commands/start.js"),
  harness: () => import("./commands/harness.js"),
  deploy: () => import("./commands/deploy.js"),
};

async function loadAll(): Promise<Command[]> {
  const loaded = await Promise.all(Object.values(COMMANDS).map((load) => load()));
  return loaded.map((m) => m.command);
}

async function printHelp(): Promise<void> {
  const commands = await loadAll();
  const width = Math.max(...commands.map((c) => c.name.length));
  const lines = commands.map((c) => `  ${c.name.padEnd(width)}  ${c.summary}`);
  process.stdout.write(
    `runlet ${VERSION}: write, test and ship queue-based serverless workers\n\n` +
      `Usage: runlet <command> [options]\n\nCommands:\n${lines.join("\n")}\n\n` +
      "Run `runlet <command> --help` for a command's options.\n",
  );
}

/** Runs the CLI with `argv` (without node and the script) and returns the exit code. */
export async function main(argv: readonly string[]): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    await printHelp();
    return name === undefined ? 2 : 0;
  }
  if (name === "--version" || name === "-v") {
    process.stdout.write(`${VERSION}\n`);
    return 0;
  }
  const load = COMMANDS[name];
  if (load === undefined) {
    process.stderr.write(`runlet: unknown command "${name}". Run \`runlet --help\` for the list.\n`);
    return 2;
  }
  const { command } = await load();
  return command.run(rest);
}

// Only when run as the CLI (bin/runlet.mjs imports this file, also through npm's .bin/runlet
// link), not when a test imports main().
if (/(?:runlet\.mjs|main\.ts|[/\\]runlet)$/.test(process.argv[1] ?? "")) {
  main(process.argv.slice(2)).then(
    (code) => {
      process.exitCode = code;
    },
    (err: unknown) => {
      process.stderr.write(`runlet: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exitCode = 1;
    },
  );
}
