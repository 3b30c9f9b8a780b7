import { mkdir, writeFile } from "node:fs/promises";
import { dirname } from "node:path";

/** Writes `text` at `path`, making its folders first: how the build tests lay out a project. */
export async function put(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, text);
}
