import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { RunletError } from "../errors.js";

/** The project folder runlet keeps its local state in; git-ignored (it holds a key). */
export const STATE_DIR = ".runlet";
/** The file under {@link STATE_DIR} holding `runlet dev`'s API key. */
const KEY_FILE = "dev-api-key";
/** Longest key read from the file, in characters. */
const MAX_KEY_CHARS = 256;

/** What a key must be: printable, without spaces, not too long (it goes into headers and a URL). */
export const API_KEY_RULE = `1 to ${MAX_KEY_CHARS} printable ASCII characters without spaces`;

/** True when `key` follows {@link API_KEY_RULE}. */
export function isApiKey(key: string): boolean {
  return key !== "" && key.length <= MAX_KEY_CHARS && /^[\x21-\x7e]+$/.test(key);
}

/**
 * `runlet dev`'s API key for the project in `cwd`: read from `.runlet/dev-api-key`, or made and
 * written there (mode 0600) on the first run, so the key, the printed curl and an open dashboard
 * tab stay valid across restarts. The folder gets its own `.gitignore` (`*`), so the key stays out
 * of git even where the project's own .gitignore does not name `.runlet/`.
 */
export async function projectApiKey(cwd: string): Promise<string> {
  const dir = join(cwd, STATE_DIR);
  const file = join(dir, KEY_FILE);
  let text: string | undefined;
  try {
    text = (await readFile(file, "utf8")).trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  if (text !== undefined) {
    if (isApiKey(text)) return text;
    throw new RunletError(
      "RUNLET_HARNESS_CONFIG",
      `${STATE_DIR}/${KEY_FILE} must hold ${API_KEY_RULE}; fix it, or delete it for a new key`,
    );
  }
  const key = `rl_${randomBytes(18).toString("base64url")}`;
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, ".gitignore"), "# runlet's local state (a dev API key): never committed\n*\n");
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return key;
}
