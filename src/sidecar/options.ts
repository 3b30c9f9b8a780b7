import { RunletError } from "../errors.js";
import { describeValue, durationProblem } from "../option-schema.js";

/**
 * The `sidecar` option of a handler definition: a model server (llama.cpp's server, vLLM, Ollama,
 * ComfyUI) that runlet starts beside the worker, waits for, logs, watches and stops
 * (docs/models.md, "Sidecars"). Checked once, when the handler is defined; nothing here starts a
 * process, so the handler API does not load `node:child_process`.
 */

/** How runlet knows a sidecar is ready. */
export type SidecarReady =
  /** Ready once a GET of `url` answers 2xx (a 503 while a model loads is "not yet"). */
  | { readonly url: string }
  /** Ready once a TCP connection to 127.0.0.1:`port` is accepted. */
  | { readonly port: number };

/** One sidecar, as a handler declares it. */
export interface SidecarOptions {
  /** Its name in log lines (`sidecar` field), `ctx.sidecars`, and reasons. Letters, digits, `-`, `_`. @default "sidecar" */
  readonly name?: string;
  /** The program and its arguments, run directly (no shell): `["llama-server", "-m", "model.gguf", "--port", "8080"]`. */
  readonly command: readonly string[];
  /** Variables added to the worker's environment for it. Values of names holding KEY, TOKEN, SECRET or PASSWORD are scrubbed from its log lines and its logged command. @default {} */
  readonly env?: Readonly<Record<string, string>>;
  /** Its working directory. @default the worker's */
  readonly cwd?: string;
  /** When it is ready: `{ url }` (a GET answers 2xx) or `{ port }` (a TCP connection is accepted). */
  readonly ready: SidecarReady;
  /** The base URL handlers get as `ctx.sidecar.url`. @default the origin of `ready.url`, or `http://127.0.0.1:<port>` */
  readonly url?: string;
  /** How long it may take to become ready, in ms; past it the worker is unfit (`check=sidecar`). @default 600_000 (10 min) */
  readonly readyTimeoutMs?: number;
  /** Pause between two readiness probes, in ms. @default 250 */
  readonly readyIntervalMs?: number;
  /** At shutdown, how long it may take to exit after SIGTERM before it (and its process group) gets SIGKILL, in ms. @default 10_000 */
  readonly stopGraceMs?: number;
}

/** A checked sidecar: every default applied, frozen; plain data (it crosses to `runlet dev` over IPC). */
export interface SidecarSettings {
  readonly name: string;
  readonly command: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly cwd: string | undefined;
  readonly ready: SidecarReady;
  readonly url: string;
  readonly readyTimeoutMs: number;
  readonly readyIntervalMs: number;
  readonly stopGraceMs: number;
}

/** What a handler gets of a sidecar (`ctx.sidecar`, `ctx.sidecars[name]`). */
export interface SidecarInfo {
  /** The name it was declared with. */
  readonly name: string;
  /** Its base URL, without a trailing slash: `${ctx.sidecar.url}/v1/chat/completions`. */
  readonly url: string;
}

export const SIDECAR_DEFAULTS = Object.freeze({
  name: "sidecar",
  readyTimeoutMs: 600_000, // 10 min: a large model's first load
  readyIntervalMs: 250,
  stopGraceMs: 10_000,
});

const NAME = /^[A-Za-z0-9_-]{1,64}$/;
/** Longest command (all arguments together) and env (names and values), in characters. */
const MAX_COMMAND_CHARS = 65_536;

function invalid(where: string, message: string): RunletError {
  return new RunletError("RUNLET_HANDLER_INVALID", `${where}: ${message}`);
}

function duration(where: string, option: string, value: unknown, min: number, fallback: number): number {
  if (value === undefined) return fallback;
  const problem = durationProblem(value, min);
  if (problem !== undefined)
    throw invalid(where, `${option} must be ${problem}, got ${describeValue(value)}`);
  return value as number;
}

function checkReady(where: string, ready: unknown): { ready: SidecarReady; url: string } {
  if (typeof ready !== "object" || ready === null) {
    throw invalid(
      where,
      `ready must be { url: "http://127.0.0.1:8080/health" } or { port: 8080 }, got ${describeValue(ready)}`,
    );
  }
  const r = ready as { url?: unknown; port?: unknown };
  if (r.url !== undefined && r.port !== undefined) throw invalid(where, "ready takes url or port, not both");
  if (r.port !== undefined) {
    if (typeof r.port !== "number" || !Number.isInteger(r.port) || r.port < 1 || r.port > 65_535) {
      throw invalid(where, `ready.port must be an integer from 1 to 65535, got ${describeValue(r.port)}`);
    }
    return { ready: { port: r.port }, url: `http://127.0.0.1:${r.port}` };
  }
  if (typeof r.url !== "string") {
    throw invalid(where, `ready must be { url } or { port }, got ${describeValue(ready)}`);
  }
  let parsed: URL;
  try {
    parsed = new URL(r.url);
  } catch {
    throw invalid(where, `ready.url must be an http:// URL, got ${JSON.stringify(r.url.slice(0, 200))}`);
  }
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
    throw invalid(where, `ready.url must be an http:// or https:// URL, got ${parsed.protocol}`);
  }
  return { ready: { url: r.url }, url: parsed.origin };
}

function checkEnv(where: string, env: unknown): Readonly<Record<string, string>> {
  if (env === undefined) return Object.freeze({});
  if (typeof env !== "object" || env === null || Array.isArray(env)) {
    throw invalid(where, `env must be an object of strings, got ${describeValue(env)}`);
  }
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) {
    if (typeof v !== "string") throw invalid(where, `env.${k} must be a string, got ${describeValue(v)}`);
    if (k === "" || k.includes("=") || k.includes("\0") || v.includes("\0")) {
      throw invalid(
        where,
        `env.${k.slice(0, 64)} is not a valid environment variable (a name without = or NUL, a value without NUL)`,
      );
    }
    out[k] = v;
  }
  return Object.freeze(out);
}

function checkOne(raw: unknown, index: number | undefined, name: string): SidecarSettings {
  const where = `${name}: sidecar${index === undefined ? "" : `[${index}]`}`;
  if (typeof raw !== "object" || raw === null) {
    throw invalid(where, `expected { command, ready }, got ${describeValue(raw)}`);
  }
  const o = raw as Record<keyof SidecarOptions, unknown>;
  const sidecarName = o.name === undefined ? SIDECAR_DEFAULTS.name : o.name;
  if (typeof sidecarName !== "string" || !NAME.test(sidecarName)) {
    throw invalid(where, `name must be 1 to 64 letters, digits, - or _, got ${describeValue(o.name)}`);
  }
  const command = o.command;
  if (
    !Array.isArray(command) ||
    command.length === 0 ||
    !command.every((part) => typeof part === "string" && !part.includes("\0")) ||
    command[0] === ""
  ) {
    throw invalid(
      where,
      `command must be a non-empty array of strings (the program, then its arguments; no shell), got ${describeValue(command)}`,
    );
  }
  const chars = (command as string[]).reduce((n, part) => n + part.length, 0);
  if (chars > MAX_COMMAND_CHARS) {
    throw invalid(where, `command is ${chars} characters long; the limit is ${MAX_COMMAND_CHARS}`);
  }
  if (o.cwd !== undefined && (typeof o.cwd !== "string" || o.cwd === "")) {
    throw invalid(where, `cwd must be a non-empty string, got ${describeValue(o.cwd)}`);
  }
  const { ready, url: readyOrigin } = checkReady(where, o.ready);
  let url = readyOrigin;
  if (o.url !== undefined) {
    if (typeof o.url !== "string" || !URL.canParse(o.url)) {
      throw invalid(where, `url must be an absolute URL, got ${describeValue(o.url)}`);
    }
    url = o.url.replace(/\/+$/, "");
  }
  return Object.freeze({
    name: sidecarName,
    command: Object.freeze([...(command as string[])]),
    env: checkEnv(where, o.env),
    cwd: o.cwd as string | undefined,
    ready: Object.freeze(ready),
    url,
    readyTimeoutMs: duration(where, "readyTimeoutMs", o.readyTimeoutMs, 1, SIDECAR_DEFAULTS.readyTimeoutMs),
    readyIntervalMs: duration(
      where,
      "readyIntervalMs",
      o.readyIntervalMs,
      1,
      SIDECAR_DEFAULTS.readyIntervalMs,
    ),
    stopGraceMs: duration(where, "stopGraceMs", o.stopGraceMs, 0, SIDECAR_DEFAULTS.stopGraceMs),
  });
}

/**
 * The checked sidecars of a handler's `sidecar` option (one, or an array of them with distinct
 * names); empty when it has none. RUNLET_HANDLER_INVALID names the bad field.
 */
export function checkSidecars(value: unknown, name = "defineHandler"): readonly SidecarSettings[] {
  if (value === undefined) return Object.freeze([]);
  const list = Array.isArray(value)
    ? value.map((v, i) => checkOne(v, i, name))
    : [checkOne(value, undefined, name)];
  const seen = new Set<string>();
  for (const s of list) {
    if (seen.has(s.name)) {
      throw invalid(`${name}: sidecar`, `two sidecars are named "${s.name}"; give each a distinct name`);
    }
    seen.add(s.name);
  }
  return Object.freeze(list);
}

/** What `ctx.sidecar` and `ctx.sidecars` hold for a definition's sidecars. */
export interface SidecarContext {
  readonly sidecar: SidecarInfo;
  readonly sidecars: Readonly<Record<string, SidecarInfo>>;
}

/**
 * The handler's view of its sidecars: `sidecar` is the first (or only) one; `sidecars` by name.
 * Reading `sidecar` in a handler that declared none throws RUNLET_HANDLER_INVALID, saying so.
 */
export function sidecarContext(settings: readonly SidecarSettings[]): SidecarContext {
  const byName: Record<string, SidecarInfo> = {};
  for (const s of settings) byName[s.name] = Object.freeze({ name: s.name, url: s.url });
  const first = settings[0] === undefined ? undefined : byName[settings[0].name];
  const sidecars = Object.freeze(byName);
  return {
    get sidecar(): SidecarInfo {
      if (first === undefined) {
        throw new RunletError(
          "RUNLET_HANDLER_INVALID",
          'ctx.sidecar was read (in the handler or setup), but this handler declares no sidecar option (docs/models.md, "Sidecars")',
        );
      }
      return first;
    },
    sidecars,
  };
}

/** Each definition's sidecar context, made once (definitions are frozen; the list is its key). */
const sidecarContexts = new WeakMap<object, SidecarContext>();

/** {@link sidecarContext} of a definition's (frozen) list, made once and shared by setup and every job. */
export function sidecarContextOf(list: readonly SidecarSettings[]): SidecarContext {
  let context = sidecarContexts.get(list);
  if (context === undefined) {
    context = sidecarContext(list);
    sidecarContexts.set(list, context);
  }
  return context;
}
