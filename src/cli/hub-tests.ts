import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { RunletError } from "../errors.js";

/**
 * `.runpod/tests.json`: the platform's template hub runs its cases against a published endpoint
 * (`{"tests": [{"name", "input", "timeout"}], "config": {...}}`, as the starters ship it). Nothing
 * else reads it, so it went stale when a handler's input changed (issue 54, item 5); `runlet
 * build`'s verify step runs its cases beside test_input.json's job and names a stale one.
 */

/** Where the file lives in a project. */
export const HUB_TESTS_FILE = ".runpod/tests.json";

/** Most cases run from the file (the hub's own lists are short). */
export const MAX_HUB_TESTS = 50;

/** One case of the file. */
export interface HubTest {
  readonly name: string;
  readonly input: Record<string, unknown>;
  /** The case's time limit on the hub, ms, when it gives one. */
  readonly timeoutMs: number | undefined;
}

const bad = (what: string): RunletError =>
  new RunletError("RUNLET_BUILD_FAILED", `${HUB_TESTS_FILE}: ${what}`);

/**
 * The project's hub test cases: undefined when it has no `.runpod/tests.json`; a file that is not
 * JSON, or cases not shaped as the hub reads them, fail with RUNLET_BUILD_FAILED naming the place.
 */
export async function readHubTests(projectDir: string): Promise<HubTest[] | undefined> {
  let text: string;
  try {
    text = await readFile(join(projectDir, HUB_TESTS_FILE), "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw bad(`could not be read: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw bad(`is not valid JSON: ${(err as Error).message}`);
  }
  const tests = (parsed as { tests?: unknown } | null)?.tests;
  if (!Array.isArray(tests)) throw bad('must be an object with a "tests" list');
  if (tests.length > MAX_HUB_TESTS)
    throw bad(`holds ${tests.length} tests; the verify step runs at most ${MAX_HUB_TESTS}`);
  return tests.map((entry: unknown, i): HubTest => {
    const c = entry as { name?: unknown; input?: unknown; timeout?: unknown } | null;
    if (
      typeof c !== "object" ||
      c === null ||
      typeof c.name !== "string" ||
      c.name === "" ||
      typeof c.input !== "object" ||
      c.input === null ||
      Array.isArray(c.input)
    ) {
      throw bad(`tests[${i}] must be an object with a "name" string and an "input" object`);
    }
    if (
      c.timeout !== undefined &&
      !(typeof c.timeout === "number" && Number.isFinite(c.timeout) && c.timeout > 0)
    ) {
      throw bad(`tests[${i}] ("${c.name.slice(0, 100)}"): "timeout" must be a positive number of ms`);
    }
    return {
      name: c.name.slice(0, 200),
      input: c.input as Record<string, unknown>,
      timeoutMs: c.timeout as number | undefined,
    };
  });
}
