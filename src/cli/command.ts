import { type ParseArgsConfig, parseArgs } from "node:util";
import { isRunletError, RunletError } from "../errors.js";

/** One `runlet` command. `run` returns the exit code: 0 success, 1 failure, 2 bad usage. */
export interface Command {
  readonly name: string;
  /** One line for `runlet --help`. */
  readonly summary: string;
  /** The full text of `runlet <name> --help`. */
  readonly help: string;
  run(argv: readonly string[]): Promise<number>;
}

/** Exit codes of every command (docs/cli.md). */
export const EXIT = { ok: 0, failure: 1, usage: 2 } as const;

/**
 * Parses `argv` strictly (unknown flags are errors). Returns the values, or an exit code after
 * printing the problem (or the help, for `--help`).
 */
export function parseCommandArgs(
  command: Pick<Command, "name" | "help">,
  argv: readonly string[],
  options: NonNullable<ParseArgsConfig["options"]>,
):
  | { readonly exitCode: number }
  | {
      readonly values: Record<string, string | boolean | (string | boolean)[] | undefined>;
      readonly positionals: string[];
    } {
  try {
    const parsed = parseArgs({
      args: [...argv],
      options: { ...options, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
      strict: true,
    });
    const values = parsed.values as Record<string, string | boolean | (string | boolean)[] | undefined>;
    if (values["help"] === true) {
      process.stdout.write(command.help.endsWith("\n") ? command.help : `${command.help}\n`);
      return { exitCode: EXIT.ok } as const;
    }
    return { values, positionals: parsed.positionals } as const;
  } catch (err) {
    process.stderr.write(
      `runlet ${command.name}: ${err instanceof Error ? err.message : String(err)} (RUNLET_CLI_USAGE)\nRun \`runlet ${command.name} --help\` for usage.\n`,
    );
    return { exitCode: EXIT.usage } as const;
  }
}

/**
 * Prints an error for a human in the CLI's one form, `runlet <command>: <what went wrong> (CODE)`,
 * and returns its exit code. runlet's own errors never show a stack; any other error is
 * `RUNLET_CLI_UNEXPECTED`, its stack on the lines after.
 */
export function reportCliError(commandName: string, err: unknown): number {
  if (isRunletError(err)) {
    process.stderr.write(`runlet ${commandName}: ${err.message} (${err.code})\n`);
    return err.code === "RUNLET_CLI_USAGE" || err.code === "RUNLET_CLI_NO_PLATFORM"
      ? EXIT.usage
      : EXIT.failure;
  }
  const message = err instanceof Error ? err.message : String(err);
  const stack = err instanceof Error && err.stack !== undefined ? `${err.stack}\n` : "";
  process.stderr.write(`runlet ${commandName}: ${message} (RUNLET_CLI_UNEXPECTED)\n${stack}`);
  return EXIT.failure;
}

/** A usage error (exit code 2). */
export function usageError(message: string): RunletError {
  return new RunletError("RUNLET_CLI_USAGE", message);
}

/**
 * An integer flag's value: `fallback` when absent, else the flag's text as an integer in
 * [min, max]; anything else is a usage error naming the flag, the range and what came.
 */
export function integerFlag(
  name: string,
  value: unknown,
  fallback: number,
  min: number,
  max = Infinity,
): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (typeof value !== "string" || value.trim() === "" || !Number.isInteger(n) || n < min || n > max) {
    const range = max === Infinity ? `≥ ${min}` : `from ${min} to ${max}`;
    throw usageError(`--${name} must be an integer ${range}, got ${JSON.stringify(value)}`);
  }
  return n;
}

/**
 * The harness's `allowedHosts` from `--allowed-hosts`, else the RUNLET_ALLOWED_HOSTS variable:
 * comma-separated host names (`.example.com` for a domain and its subdomains), or `all` to answer
 * any Host (docs/harness.md, "Host names"); undefined when neither is set.
 */
export function allowedHostsFlag(
  value: unknown,
  env: Readonly<Record<string, string | undefined>> = process.env,
): readonly string[] | true | undefined {
  const from = typeof value === "string" ? "--allowed-hosts" : "RUNLET_ALLOWED_HOSTS";
  const text = typeof value === "string" ? value : env["RUNLET_ALLOWED_HOSTS"];
  if (text === undefined || text.trim() === "") return undefined;
  if (text.trim().toLowerCase() === "all") return true;
  const names = text
    .split(",")
    .map((n) => n.trim())
    .filter((n) => n !== "");
  const bad = names.find((n) => !/^\.?[A-Za-z0-9_.:[\]-]+$/.test(n));
  if (bad !== undefined) {
    throw usageError(`${from} must be comma-separated host names (or "all"), got ${JSON.stringify(bad)}`);
  }
  return names;
}

/**
 * The harness's `corsOrigins` from `--cors`: comma-separated origins (`http://localhost:5173`), or
 * `*` for any; undefined when not given (docs/openai.md, "Browsers (CORS)").
 */
export function corsFlag(value: unknown): readonly string[] | undefined {
  if (typeof value !== "string") return undefined;
  const origins = value
    .split(",")
    .map((o) => o.trim())
    .filter((o) => o !== "");
  for (const origin of origins) {
    if (origin === "*") continue;
    let parsed: URL | undefined;
    try {
      parsed = new URL(origin);
    } catch {
      parsed = undefined;
    }
    if (parsed === undefined || !/^https?:$/.test(parsed.protocol) || parsed.origin !== origin) {
      throw usageError(
        `--cors must be comma-separated origins such as http://localhost:5173 (scheme, host, port; no path or trailing slash) or "*", got ${JSON.stringify(origin)}`,
      );
    }
  }
  if (origins.length === 0) throw usageError("--cors needs at least one origin");
  return origins;
}

/** Resolves on the first SIGINT or SIGTERM (the long-running commands stop on it). */
export function interrupted(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals) => {
      process.off("SIGINT", on);
      process.off("SIGTERM", on);
      resolve(signal);
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}
