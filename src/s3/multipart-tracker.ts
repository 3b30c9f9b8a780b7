import { AbortMultipartUploadCommand, type S3Client } from "@aws-sdk/client-s3";
import type { Logger } from "pino";
import { settle } from "../task-sink.js";

interface OpenUpload {
  readonly bucket: string;
  readonly key: string;
}

/** How long to wait for in-flight part uploads before aborting their multipart upload regardless. */
const SETTLE_TIMEOUT_MS = 30_000;

/**
 * Remembers every multipart upload a job's client opened and has not completed or aborted, and
 * every request still in flight per object.
 *
 * Why: `Upload.done()` from lib-storage rejects as soon as it is aborted, while its part uploads
 * and its own AbortMultipartUpload are still running, and it never aborts an upload whose
 * CreateMultipartUpload answer arrives after the abort. Waiting for the object's requests to
 * settle and then aborting what is still open guarantees no orphaned multipart upload (which a
 * store bills for until a lifecycle rule removes it).
 */
export class MultipartTracker {
  readonly #open = new Map<string, OpenUpload>(); // upload id → object
  readonly #inFlight = new Map<string, Set<Promise<unknown>>>(); // "bucket/key" → requests

  /** Installs the bookkeeping middleware on `client`. */
  attach(client: S3Client): void {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const input = args.input as { Bucket?: unknown; Key?: unknown; UploadId?: unknown };
        const command = context.commandName ?? "";
        if (typeof input.Bucket !== "string" || typeof input.Key !== "string") return next(args);
        const bucket = input.Bucket;
        const key = input.Key;
        const id = `${bucket}/${key}`;
        const request = next(args);
        let set = this.#inFlight.get(id);
        if (set === undefined) {
          set = new Set();
          this.#inFlight.set(id, set);
        }
        const tracked = request.then(
          (result) => {
            const output = result.output as { UploadId?: unknown };
            if (command === "CreateMultipartUploadCommand" && typeof output.UploadId === "string") {
              this.#open.set(output.UploadId, { bucket, key });
            }
            if (
              (command === "CompleteMultipartUploadCommand" || command === "AbortMultipartUploadCommand") &&
              typeof input.UploadId === "string"
            ) {
              this.#open.delete(input.UploadId);
            }
          },
          () => undefined, // the caller sees the rejection through `request`
        );
        set.add(tracked);
        // `tracked` never rejects (its rejection is the caller's, through `request`): this is its clean-up.
        settle(
          tracked.finally(() => {
            set.delete(tracked);
            if (set.size === 0 && this.#inFlight.get(id) === set) this.#inFlight.delete(id);
          }),
          () => undefined,
        );
        return request;
      },
      { step: "initialize", name: "runletMultipartTracker" },
    );
  }

  /** True when a multipart upload of this object is still open. */
  hasOpen(bucket: string, key?: string): boolean {
    for (const u of this.#open.values())
      if (u.bucket === bucket && (key === undefined || u.key === key)) return true;
    return false;
  }

  /**
   * Waits (bounded) until no request for the object is in flight, then aborts its open multipart
   * uploads. With no key: every object. Failures are logged, not thrown: this runs on error paths.
   */
  async abortOpen(client: S3Client, log: Logger, only?: OpenUpload): Promise<void> {
    const matches = (id: string) => only === undefined || id === `${only.bucket}/${only.key}`;
    const deadline = Date.now() + SETTLE_TIMEOUT_MS;
    for (;;) {
      const pending = [...this.#inFlight.entries()].filter(([id]) => matches(id)).flatMap(([, s]) => [...s]);
      if (pending.length === 0 || Date.now() >= deadline) break;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise((resolve) => {
        timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
      });
      try {
        await Promise.race([Promise.allSettled(pending), timeout]);
      } finally {
        clearTimeout(timer);
      }
    }
    const targets = [...this.#open.entries()].filter(([, u]) => matches(`${u.bucket}/${u.key}`));
    await Promise.all(
      targets.map(async ([uploadId, u]) => {
        try {
          await client.send(
            new AbortMultipartUploadCommand({ Bucket: u.bucket, Key: u.key, UploadId: uploadId }),
          );
        } catch (err) {
          const name = (err as { name?: unknown }).name;
          // NoSuchUpload: lib-storage aborted it first, which is the outcome we want.
          if (name !== "NoSuchUpload") {
            log.warn({ err, bucket: u.bucket, key: u.key, uploadId }, "could not abort a multipart upload");
            return;
          }
        }
        this.#open.delete(uploadId);
      }),
    );
  }
}
