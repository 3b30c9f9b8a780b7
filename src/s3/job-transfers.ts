import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Readable } from "node:stream";
import type { Logger } from "pino";
import { durationProblem } from "../duration.js";
import { RunletError } from "../errors.js";
import { anySignal, onAbort } from "../linked-signal.js";
import { settle } from "../task-sink.js";
import type { Source } from "./download.js";
import type { DownloadOptions, DownloadResult } from "./types.js";

/** Default cap on a download. */
export const DEFAULT_MAX_DOWNLOAD_BYTES = 1_073_741_824; // 1 GiB
/** Default time a download may take, from its request to its last byte: a job's default time limit. */
export const DEFAULT_DOWNLOAD_TIMEOUT_MS = 600_000; // 10 min

/** What a job's transfers need from the worker: the part of JobS3Options that has nothing to do with a store. */
export interface JobTransfersOptions {
  readonly jobId: string;
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** Allow URL downloads from private and loopback addresses. @default false */
  readonly allowPrivateAddresses?: boolean | undefined;
  /** Parent folder for the job's temporary files. @default os.tmpdir() */
  readonly tmpRoot?: string | undefined;
}

/**
 * A job's downloads and uploads, with or without a store: what is in flight, the job's temporary
 * folder, and the end of both when the job ends. URL downloads live here, so `ctx.s3.download`
 * of an http(s) URL needs no store; this module loads neither the AWS SDK nor undici until a
 * download starts.
 */
export interface JobTransfers {
  /** Aborts when the job's signal does or {@link JobTransfers.end} runs: nothing may start after it. */
  readonly signal: AbortSignal;
  /** Counts `work` as in flight until it settles: `end()` waits for it. */
  track<T>(work: Promise<T>): Promise<T>;
  /**
   * Downloads what `open` opens (handed a signal that aborts at the job's end or at the download's
   * `timeoutMs`) to a file in the job's folder or to a capped stream; `name` names it in errors
   * until the source names itself.
   */
  download(
    name: string,
    open: (signal: AbortSignal) => Promise<Source>,
    options?: DownloadOptions,
  ): Promise<DownloadResult>;
  /** Downloads an http(s) URL, refusing private addresses unless allowed. */
  downloadUrl(url: string, options?: DownloadOptions): Promise<DownloadResult>;
  /** Aborts what is in flight, waits for it, removes the job's folder. Idempotent. */
  end(): Promise<void>;
}

/** The error a job's AbortSignal turns into: its reason when it is an error (timeout, stop), else an AbortError. */
export function abortReason(signal: AbortSignal): unknown {
  return signal.reason instanceof Error
    ? signal.reason
    : new DOMException("the job was aborted", "AbortError");
}

/** True for the URLs `ctx.s3.download` fetches over plain HTTP(S), store or none. */
export function isHttpUrl(urlOrKey: string): boolean {
  return /^https?:\/\//i.test(urlOrKey);
}

function checkDownloadOptions(opts: DownloadOptions): { maxBytes: number; timeoutMs: number } {
  const maxBytes = opts.maxBytes ?? DEFAULT_MAX_DOWNLOAD_BYTES;
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) {
    throw new RunletError("RUNLET_CONFIG_INVALID", `maxBytes must be an integer ≥ 0, got ${maxBytes}`, {
      details: { option: "maxBytes", value: maxBytes },
    });
  }
  const timeoutMs = opts.timeoutMs ?? DEFAULT_DOWNLOAD_TIMEOUT_MS;
  const problem = durationProblem(timeoutMs, 1);
  if (problem !== undefined) {
    throw new RunletError("RUNLET_CONFIG_INVALID", `timeoutMs must be ${problem}, got ${timeoutMs}`, {
      details: { option: "timeoutMs", value: timeoutMs },
    });
  }
  return { maxBytes, timeoutMs };
}

function timeoutError(name: string, timeoutMs: number): RunletError {
  return new RunletError(
    "RUNLET_S3_DOWNLOAD_TIMEOUT",
    `download of ${name} did not finish within its timeout of ${timeoutMs} ms: raise timeoutMs, or check the server`,
    { details: { name, timeoutMs } },
  );
}

/**
 * Binds a job's transfers: see {@link JobTransfers}.
 *
 * @example
 * const transfers = createJobTransfers({ jobId, signal, log, allowPrivateAddresses: false });
 * const { path } = await transfers.downloadUrl("https://example.com/a.png", { maxBytes: 16 << 20 });
 * await transfers.end();
 */
export function createJobTransfers(options: JobTransfersOptions): JobTransfers {
  const { jobId } = options;
  // Aborted by the job's signal and by end(): the job's end ends its transfers, and nothing (no
  // folder, no file) can start after it.
  const ended = new AbortController();
  const unlink = onAbort(options.signal, () => ended.abort(options.signal.reason));
  if (options.signal.aborted) ended.abort(options.signal.reason);
  const inFlight = new Set<Promise<unknown>>();
  const log = options.log.child({ component: "s3" });
  let tmpDir: Promise<string> | undefined;
  let fileCount = 0;
  let ending: Promise<void> | undefined;

  function track<T>(work: Promise<T>): Promise<T> {
    inFlight.add(work);
    const done = () => inFlight.delete(work);
    // Out of the set however it settles; the caller owns its outcome (it is returned).
    settle(work.then(done), done);
    return work;
  }

  async function jobFolder(): Promise<string> {
    // Never a folder after the job's end: end() would not see it.
    if (ended.signal.aborted) throw abortReason(ended.signal);
    // node:fs/promises on first use: it brings node:readline and more with it, which the worker's
    // start would otherwise load (and, under the image's flags, compile) for a job that may never
    // download (docs/benchmarks.md, "Cold start").
    tmpDir ??= import("node:fs/promises").then(({ mkdtemp }) =>
      mkdtemp(join(options.tmpRoot ?? tmpdir(), `runlet-${jobId.replace(/[^A-Za-z0-9_-]/g, "_")}-`)),
    );
    return tmpDir;
  }

  async function download(
    what: string,
    open: (signal: AbortSignal) => Promise<Source>,
    opts: DownloadOptions = {},
  ): Promise<DownloadResult> {
    ended.signal.throwIfAborted();
    const { maxBytes, timeoutMs } = checkDownloadOptions(opts);
    const { toFile, toStream, fileNameFor } = await import("./download.js");
    // This download's own signal: the job's end, or its time running out.
    const linked = anySignal([ended.signal]);
    let name = what;
    let stream: Readable | undefined;
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      const err = timeoutError(name, timeoutMs);
      // A stream handed out already errors with the timeout, not with the abort behind it.
      stream?.destroy(err);
      linked.abort(err);
    }, timeoutMs);
    const release = () => {
      clearTimeout(timer);
      linked.unlink();
    };
    /** The error to throw for `err`: the timeout, the job's end, or `err` itself. */
    const reason = (err: unknown): unknown => {
      if (timedOut) return timeoutError(name, timeoutMs);
      if (ended.signal.aborted) return abortReason(ended.signal);
      return err;
    };
    let source: Source;
    try {
      source = await open(linked.signal);
    } catch (err) {
      release();
      throw reason(err);
    }
    name = source.name;
    if ((opts.to ?? "file") === "stream") {
      try {
        const got = toStream(source, maxBytes, linked.signal);
        stream = got.stream;
        stream.once("close", release);
        return got;
      } catch (err) {
        release();
        throw err;
      }
    }
    try {
      const path = join(await jobFolder(), fileNameFor(source.name, ++fileCount));
      const result = await toFile(source, path, maxBytes, linked.signal);
      log.debug({ from: source.name, bytes: result.bytes }, "downloaded an object");
      return result;
    } catch (err) {
      // The source is not read when the folder could not be made: close its connection.
      source.stream.on("error", () => undefined);
      source.stream.destroy();
      throw reason(err);
    } finally {
      release();
    }
  }

  async function downloadUrl(url: string, opts: DownloadOptions = {}): Promise<DownloadResult> {
    const { openUrl } = await import("./download.js");
    const parsed = new URL(url);
    // Shown without its query: presigned URLs carry signatures there.
    return download(
      `${parsed.origin}${parsed.pathname}`,
      (signal) => openUrl(parsed, { allowPrivate: options.allowPrivateAddresses === true, signal }),
      opts,
    );
  }

  async function runEnd(): Promise<void> {
    // The job's end aborts what is still downloading or uploading (a download the handler left
    // running, a stream it never read) and waits for it, so no file is written after the folder goes.
    ended.abort(new DOMException(`job ${jobId} ended`, "AbortError"));
    unlink();
    await Promise.allSettled([...inFlight]);
    if (tmpDir !== undefined) {
      const dir = await tmpDir.catch(() => undefined);
      if (dir !== undefined) {
        const { rm } = await import("node:fs/promises");
        await rm(dir, { recursive: true, force: true }).catch((err: unknown) =>
          log.warn({ err }, "removing the job's temporary folder failed"),
        );
      }
    }
  }

  return Object.freeze({
    signal: ended.signal,
    track,
    download: (what: string, open: (signal: AbortSignal) => Promise<Source>, opts?: DownloadOptions) =>
      track(download(what, open, opts)),
    downloadUrl: (url: string, opts?: DownloadOptions) => track(downloadUrl(url, opts)),
    end: () => {
      ending ??= runEnd();
      return ending;
    },
  });
}
