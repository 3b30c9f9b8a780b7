import { RunletError } from "../errors.js";

/**
 * `hf:` model sources (docs/models.md, "Cached models"): `hf:org/name/path/in/repo.onnx`, or
 * `hf:org/name@revision/path/in/repo.onnx`. A starter resolves one in the platform's model cache
 * first and downloads it from the hub only when the cache has none.
 */

/** A parsed `hf:` source. */
export interface HfSource {
  /** The repository id, `org/name`. */
  readonly repo: string;
  /** The revision (`main` when the source names none). */
  readonly revision: string;
  /** The file inside the repository. */
  readonly file: string;
}

/** The hub's address when HF_ENDPOINT is not set. */
export const HF_HUB_URL = "https://huggingface.co";

/** Whether `text` is an `hf:` source. */
export function isHfSource(text: string): boolean {
  return text.startsWith("hf:");
}

/**
 * Parses `hf:org/name[@revision]/file`. A malformed one throws RUNLET_CONFIG_INVALID with the
 * expected shape.
 *
 * @example
 * parseHfSource("hf:onnx-community/all-MiniLM-L6-v2/onnx/model.onnx")
 * // { repo: "onnx-community/all-MiniLM-L6-v2", revision: "main", file: "onnx/model.onnx" }
 */
export function parseHfSource(text: string): HfSource {
  const m = /^hf:([\w.-]+)\/([\w.-]+)(?:@([\w.-]+))?\/(.+)$/.exec(text);
  const file = m?.[4] ?? "";
  if (m === null || file.split("/").some((p) => p === "" || p === "." || p === "..")) {
    throw new RunletError(
      "RUNLET_CONFIG_INVALID",
      `a model source "hf:..." is hf:<org>/<name>[@<revision>]/<file in the repository>, such as hf:onnx-community/all-MiniLM-L6-v2/onnx/model.onnx; got ${JSON.stringify(text.slice(0, 200))}`,
    );
  }
  return { repo: `${m[1]}/${m[2]}`, revision: m[3] ?? "main", file };
}

/** The hub's download URL of a source's file (`<hub>/<repo>/resolve/<revision>/<file>`). */
export function hfDownloadUrl(source: HfSource, hubUrl: string = HF_HUB_URL): string {
  const path = source.file.split("/").map(encodeURIComponent).join("/");
  return `${hubUrl.replace(/\/+$/, "")}/${source.repo}/resolve/${encodeURIComponent(source.revision)}/${path}`;
}
