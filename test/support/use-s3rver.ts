import { afterAll, beforeAll } from "vitest";
import { type S3rverHandle, startS3rver } from "./s3rver.js";

/**
 * The s3rver of a test file: started in `beforeAll` with `buckets` created, closed in `afterAll`.
 * Use the handle inside tests and hooks (before the file's `beforeAll` has run it throws).
 */
export function useS3rver(...buckets: string[]): S3rverHandle {
  let started: S3rverHandle | undefined;
  beforeAll(async () => {
    started = await startS3rver();
    for (const bucket of buckets) await started.createBucket(bucket);
  });
  afterAll(async () => {
    await started?.close();
  });
  const live = (): S3rverHandle => {
    if (started === undefined) throw new Error("s3rver is not started yet: use it inside a test or hook");
    return started;
  };
  return {
    get endpoint() {
      return live().endpoint;
    },
    accessKeyId: "S3RVER",
    secretAccessKey: "S3RVER",
    get operations() {
      return live().operations;
    },
    get client() {
      return live().client;
    },
    createBucket: (name) => live().createBucket(name),
    listMultipartUploads: (bucket) => live().listMultipartUploads(bucket),
    close: () => live().close(),
    [Symbol.asyncDispose]: () => live().close(),
  };
}
