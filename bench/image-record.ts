import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

/**
 * What `npm run test:image` measured of the OCR starter's image, written by it
 * (scripts/image/test-image.ts) and read by the bench: an image is built only there (buildah,
 * root, minutes), so the bench prints the last build's figures with their date, never a number
 * typed by hand.
 */
export interface OcrImageRecord {
  /** When the image was measured, ISO 8601. */
  readonly measuredAt: string;
  /** The image's size as buildah reports it (decimal units, e.g. "427 MB"). */
  readonly imageSize: string;
  /** The same, in MB (10^6 bytes). */
  readonly imageMB: number;
  /** What the final stage started from (the stand-in for node:22-bookworm-slim in test:image). */
  readonly base: string;
  /** `du -sb /app` in the image, bytes. */
  readonly appBytes: number;
  /** onnxruntime-node in the image (this platform's binaries only), bytes. */
  readonly ortImageBytes: number;
  /** onnxruntime-node as npm installs it (every platform), bytes. */
  readonly ortInstalledBytes: number;
  /** Seconds `buildah bud` took for the project's Dockerfile. */
  readonly buildSeconds: number;
}

/** Where the record lives: committed, so a bench on a machine without buildah still prints it. */
export const IMAGE_RECORD_PATH = fileURLToPath(new URL("./image-sizes.json", import.meta.url));

/** Parses buildah's human size ("427 MB", "1.2 GB", "950 kB") into MB; NaN when it cannot. */
export function sizeToMB(text: string): number {
  const m = /^([\d.]+)\s*(B|kB|KB|MB|GB|TB)$/.exec(text.trim());
  if (m === null) return Number.NaN;
  const scale: Record<string, number> = { B: 1e-6, kB: 1e-3, KB: 1e-3, MB: 1, GB: 1e3, TB: 1e6 };
  return Number(m[1]) * (scale[m[2] ?? ""] ?? Number.NaN);
}

export async function writeOcrImageRecord(record: OcrImageRecord): Promise<void> {
  await writeFile(IMAGE_RECORD_PATH, `${JSON.stringify({ ocr: record }, null, 2)}\n`);
}

/** The last record, or undefined when test:image never wrote one (or it cannot be read). */
export async function readOcrImageRecord(): Promise<OcrImageRecord | undefined> {
  try {
    const parsed = JSON.parse(await readFile(IMAGE_RECORD_PATH, "utf8")) as { ocr?: OcrImageRecord };
    return parsed.ocr;
  } catch {
    return undefined;
  }
}
