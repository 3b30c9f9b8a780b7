import { createWriteStream } from "node:fs";
import { mkdir, open, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import * as ort from "onnxruntime-node";
import { hfDownloadUrl, isHfSource, isRunletError, parseHfSource, resolveCachedModel } from "runlet";
import { tinyModel } from "./tiny-model.js";

/**
 * The model: one onnxruntime-node session, created once (in the handler's `setup`) and shared by
 * every job. This module knows nothing of runlet: `loadModel()` once, `infer(model, rows)` per
 * job, `model.release()` at the end.
 */

/** A loaded model and what its first input and output are. */
export interface Model {
  readonly session: ort.InferenceSession;
  /** The first input's name and its last dimension (the width of one row). */
  readonly input: { readonly name: string; readonly width: number | undefined };
  readonly output: { readonly name: string };
  /** Where it came from: a path, or "the built-in tiny model". */
  readonly source: string;
  release(): Promise<void>;
}

/** Options of {@link loadModel}. */
export interface LoadOptions {
  /**
   * An .onnx file, or a file of a Hugging Face repository as `hf:org/name[@revision]/file.onnx`:
   * taken from the platform's model cache when the endpoint caches that model, else downloaded
   * from the hub once. @default process.env.MODEL_PATH, else the built-in tiny model (src/tiny-model.ts)
   */
  readonly path?: string | undefined;
  /** ORT's threads per run (0: ORT's default, one per core). @default 0 */
  readonly threads?: number;
  /** The model cache an `hf:` source is looked up in. @default RUNLET_HF_CACHE, else /runpod-volume/huggingface-cache/hub */
  readonly cacheDir?: string | undefined;
  /** Where an `hf:` source the cache lacks is downloaded to. @default process.env.MODEL_DOWNLOAD_DIR, else <tmpdir>/onnx-models */
  readonly downloadDir?: string | undefined;
  /** The hub's address. @default process.env.HF_ENDPOINT, else https://huggingface.co */
  readonly hubUrl?: string | undefined;
  /**
   * The largest file an `hf:` download may give, in bytes: a bigger one stops the download. One
   * .onnx file is at most 2 GiB (protobuf's limit; larger weights live in external data files).
   * @default process.env.MODEL_MAX_BYTES, else 4294967296 (4 GiB)
   */
  readonly maxBytes?: number | undefined;
  /** Stops a download (the setup's signal). */
  readonly signal?: AbortSignal | undefined;
}

/** The default of {@link LoadOptions.maxBytes}: 4 GiB. */
const DEFAULT_MAX_BYTES = 4_294_967_296;

/** The download's byte limit: the option, else MODEL_MAX_BYTES (a whole number above 0), else 4 GiB. */
function maxBytesOf(options: LoadOptions): number {
  if (options.maxBytes !== undefined) return options.maxBytes;
  const text = process.env["MODEL_MAX_BYTES"];
  if (text === undefined || text === "") return DEFAULT_MAX_BYTES;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value <= 0) {
    throw new Error(`MODEL_MAX_BYTES must be a whole number of bytes above 0, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * Creates the session. A path goes to ORT as a path, not read into memory here: ORT maps the file
 * itself, so a model over 2 GiB loads, and so does one whose weights are in external data files
 * beside it (ORT finds them relative to the model's folder). The file is opened first, so a
 * missing or unreadable one fails here, in setup, with the path in the message (and the worker
 * reports itself unfit, taking no job).
 */
export async function loadModel(options: LoadOptions = {}): Promise<Model> {
  // onnxruntime 1.30 sends usage telemetry over HTTPS unless this is set; a worker has no
  // business phoning home. Set it to "0" beforehand to keep ORT's default.
  process.env["ORT_DISABLE_TELEMETRY"] ??= "1";
  const source = options.path ?? (process.env["MODEL_PATH"] || undefined);
  const found = source !== undefined && isHfSource(source) ? await fromHub(source, options) : undefined;
  const path = found?.path ?? source;
  const threads = options.threads ?? 0;
  const sessionOptions: ort.InferenceSession.SessionOptions = {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    ...(threads > 0 ? { intraOpNumThreads: threads } : {}),
  };
  let session: ort.InferenceSession;
  if (path === undefined) {
    session = await ort.InferenceSession.create(tinyModel(), sessionOptions);
  } else {
    await checkModelFile(path);
    try {
      session = await ort.InferenceSession.create(path, sessionOptions);
    } catch (err) {
      throw new Error(
        `the model ${path} could not be loaded: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
  const first = session.inputMetadata[0];
  const width = first?.isTensor === true ? first.shape.at(-1) : undefined;
  return {
    session,
    input: { name: session.inputNames[0] ?? "", width: typeof width === "number" ? width : undefined },
    output: { name: session.outputNames[0] ?? "" },
    source: found?.origin ?? path ?? "the built-in tiny model",
    release: () => session.release(),
  };
}

/**
 * An `hf:` source's file: from the model cache when the endpoint caches the model (the platform
 * puts it there before the worker starts, unbilled; docs/models.md in runlet, "Cached models"),
 * else downloaded from the hub once into `downloadDir` (HF_TOKEN, when set, for a gated model).
 * With HF_HUB_OFFLINE=1 a model the cache lacks is an error listing what the cache holds.
 */
async function fromHub(text: string, options: LoadOptions): Promise<{ path: string; origin: string }> {
  const source = parseHfSource(text);
  try {
    const cached = await resolveCachedModel(source.repo, {
      revision: source.revision,
      file: source.file,
      ...(options.cacheDir === undefined ? {} : { cacheDir: options.cacheDir }),
    });
    return { path: cached.path, origin: `${text} (cached snapshot ${cached.commit})` };
  } catch (err) {
    if (
      !isRunletError(err) ||
      err.code !== "RUNLET_MODEL_NOT_CACHED" ||
      process.env["HF_HUB_OFFLINE"] === "1"
    ) {
      throw err;
    }
  }
  const dir = options.downloadDir ?? (process.env["MODEL_DOWNLOAD_DIR"] || join(tmpdir(), "onnx-models"));
  const path = join(dir, source.repo.replace("/", "--"), source.revision, ...source.file.split("/"));
  if ((await stat(path).catch(() => undefined))?.isFile() === true)
    return { path, origin: `${text} (downloaded before)` };
  const maxBytes = maxBytesOf(options);
  const url = hfDownloadUrl(source, options.hubUrl ?? (process.env["HF_ENDPOINT"] || undefined));
  const token = process.env["HF_TOKEN"];
  let res: Response;
  try {
    res = await fetch(url, {
      ...(options.signal === undefined ? {} : { signal: options.signal }),
      ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
    });
  } catch (err) {
    if (options.signal?.aborted === true) throw err;
    // fetch says only "fetch failed"; what happened (a refused connection, a name not found) is its cause.
    const cause = (err as { cause?: unknown }).cause;
    const why = cause instanceof Error ? cause.message : err instanceof Error ? err.message : String(err);
    throw new Error(
      `the model ${text} is not in the model cache and its download from ${url} failed: ${why}`,
      {
        cause: err,
      },
    );
  }
  if (!res.ok || res.body === null) {
    await res.body?.cancel();
    throw new Error(
      `the model ${text} is not in the model cache and its download from ${url} answered ${res.status}`,
    );
  }
  const declared = Number(res.headers.get("content-length") ?? Number.NaN);
  if (declared > maxBytes) {
    await res.body.cancel();
    throw new Error(
      `the model ${text} is ${declared} bytes, over the limit of ${maxBytes} bytes (MODEL_MAX_BYTES)`,
    );
  }
  // Counted as they come too: a length the hub did not give, or one it gave wrong, is no bound.
  let bytes = 0;
  const count = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      bytes += chunk.length;
      if (bytes > maxBytes) {
        callback(new Error(`the model ${text} is over the limit of ${maxBytes} bytes (MODEL_MAX_BYTES)`));
        return;
      }
      callback(null, chunk);
    },
  });
  await mkdir(dirname(path), { recursive: true });
  // Written beside its place and renamed when whole: a start cut short leaves no half model behind.
  const partial = `${path}.partial`;
  await rm(partial, { force: true });
  try {
    await pipeline(
      Readable.fromWeb(res.body),
      count,
      createWriteStream(partial),
      options.signal ? { signal: options.signal } : {},
    );
    await rename(partial, path);
  } catch (err) {
    await rm(partial, { force: true });
    throw err;
  }
  return { path, origin: `${text} (downloaded from ${url})` };
}

/** Opens `path` for reading and checks it is a file: the error names the path and the reason. */
async function checkModelFile(path: string): Promise<void> {
  let file: Awaited<ReturnType<typeof open>> | undefined;
  try {
    file = await open(path, "r");
    if (!(await file.stat()).isFile()) throw new Error("not a file");
  } catch (err) {
    const reason = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
    throw new Error(`the model file ${path} (MODEL_PATH) cannot be opened: ${reason}`);
  } finally {
    await file?.close();
  }
}

/** Rows the caller gave that the model cannot take (the wrong width): the caller's input is at fault. */
export class BadInputError extends Error {
  override readonly name = "BadInputError";
}

/** Runs the model on `rows` (float32, one row per batch item) and returns its first output, row by row. */
export async function infer(model: Model, rows: readonly (readonly number[])[]): Promise<number[][]> {
  const width = model.input.width ?? rows[0]?.length ?? 0;
  const bad = rows.findIndex((r) => r.length !== width);
  if (bad >= 0)
    throw new BadInputError(`row ${bad} has ${rows[bad]?.length} values; the model takes ${width}`);
  const input = new ort.Tensor("float32", Float32Array.from(rows.flat()), [rows.length, width]);
  const results = await model.session.run({ [model.input.name]: input });
  const output = results[model.output.name];
  if (output === undefined) throw new Error(`the model gave no output named ${model.output.name}`);
  try {
    const data = output.data as Float32Array;
    const cols = data.length / rows.length;
    return rows.map((_, i) => Array.from(data.subarray(i * cols, (i + 1) * cols)));
  } finally {
    input.dispose();
    for (const t of Object.values(results)) t.dispose();
  }
}
