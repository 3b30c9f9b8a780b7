import { existsSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { ROOT } from "../worker-process.js";

/** What `bench/cold-start.ts` (written with the CLI) gave, or why it was not run. */
export type ColdStartResult =
  | { readonly available: true; readonly export: string; readonly result: unknown }
  | { readonly available: false; readonly reason: string };

/**
 * Calls the async function `bench/cold-start.ts` exports (cold start, bundle size and idle RSS of
 * a built worker). The module belongs to the CLI; it is loaded by path at run time so the bench
 * still runs, and says so, when it is missing. Its result is recorded as it comes.
 */
export async function runColdStart(): Promise<ColdStartResult> {
  const file = join(ROOT, "bench", "cold-start.ts");
  if (!existsSync(file)) return { available: false, reason: "bench/cold-start.ts is not there yet" };
  const module = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
  const name = ["measureColdStart", "default", ...Object.keys(module)].find(
    (key) => typeof module[key] === "function",
  );
  if (name === undefined) return { available: false, reason: "bench/cold-start.ts exports no function" };
  const result: unknown = await (module[name] as () => Promise<unknown>)();
  return { available: true, export: name, result };
}

/** Numeric leaves of a result, as `path = value` rows for the table. */
export function numericLeaves(value: unknown, path = ""): Array<{ path: string; value: number }> {
  if (typeof value === "number") return [{ path, value }];
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([key, v]) => numericLeaves(v, path === "" ? key : `${path}.${key}`));
}
