import { access, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CreateBucketCommand, ListMultipartUploadsCommand, S3Client } from "@aws-sdk/client-s3";
import S3rver, { type KoaContext } from "s3rver";

/**
 * A real S3-protocol server (s3rver) on 127.0.0.1, port 0, storing into a fresh temporary folder.
 *
 * s3rver 3.7 answers NotImplemented to ListMultipartUploads and MethodNotAllowed to
 * AbortMultipartUpload. Both are needed to prove that an aborted upload leaves nothing behind, so
 * this helper adds them in front of s3rver's router, over s3rver's own on-disk layout
 * (`<bucket>/._S3rver_uploads/<uploadId>/`), and makes UploadPart to an aborted upload fail with
 * NoSuchUpload as S3 does. These two added routes skip signature checks.
 */
export interface S3rverHandle extends AsyncDisposable {
  /** `http://127.0.0.1:<port>` */
  readonly endpoint: string;
  /** s3rver's built-in credentials. */
  readonly accessKeyId: "S3RVER";
  readonly secretAccessKey: "S3RVER";
  /** S3 operations the server received, in order (`CreateMultipartUpload bucket/key`, ...); clear it at will. */
  readonly operations: string[];
  /** An S3 client for the test's own checks (path-style, s3rver's credentials). */
  readonly client: S3Client;
  createBucket(name: string): Promise<void>;
  /** Open multipart uploads of a bucket, through ListMultipartUploads. */
  listMultipartUploads(bucket: string): Promise<{ key: string; uploadId: string }[]>;
  close(): Promise<void>;
}

const require = createRequire(import.meta.url);
const S3Error = require("s3rver/lib/models/error") as new (code: string, message?: string) => Error;
const UPLOADS = "._S3rver_uploads";

function xmlEscape(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Names the S3 operation of a request, for assertions on what a client actually sent. */
function operationName(ctx: KoaContext): string {
  const q = ctx.query;
  const segs = ctx.path.split("/").filter((x) => x !== "");
  const onObject = segs.length > 1;
  if (ctx.method === "POST" && "uploads" in q) return "CreateMultipartUpload";
  if (ctx.method === "POST" && "uploadId" in q) return "CompleteMultipartUpload";
  if (ctx.method === "PUT" && "uploadId" in q) return "UploadPart";
  if (ctx.method === "DELETE" && "uploadId" in q) return "AbortMultipartUpload";
  if (ctx.method === "GET" && !onObject && "uploads" in q) return "ListMultipartUploads";
  if (ctx.method === "PUT") return onObject ? "PutObject" : "CreateBucket";
  if (ctx.method === "GET") return onObject ? "GetObject" : "ListObjects";
  if (ctx.method === "HEAD") return onObject ? "HeadObject" : "HeadBucket";
  if (ctx.method === "DELETE") return onObject ? "DeleteObject" : "DeleteBucket";
  return ctx.method;
}

function multipartRoutes(root: string) {
  return async (ctx: KoaContext, next: () => Promise<void>): Promise<void> => {
    const parts = ctx.path
      .split("/")
      .filter((s) => s !== "")
      .map((s) => decodeURIComponent(s));
    const bucket = parts[0];
    const key = parts.slice(1).join("/");
    const { uploadId: rawUploadId } = ctx.query;
    const uploadId = typeof rawUploadId === "string" ? rawUploadId : undefined;
    if (bucket === undefined) return next();
    const uploadsDir = join(root, bucket, UPLOADS);
    if (ctx.method === "GET" && key === "" && "uploads" in ctx.query) {
      const ids = (await exists(uploadsDir)) ? await readdir(uploadsDir) : [];
      const uploads = await Promise.all(
        ids.map(async (id) => ({ id, key: (await readFile(join(uploadsDir, id, "key"))).toString() })),
      );
      ctx.type = "application/xml";
      ctx.body =
        '<?xml version="1.0" encoding="UTF-8"?>\n<ListMultipartUploadsResult><Bucket>' +
        xmlEscape(bucket) +
        "</Bucket><IsTruncated>false</IsTruncated>" +
        uploads
          .map(
            (u) => `<Upload><Key>${xmlEscape(u.key)}</Key><UploadId>${xmlEscape(u.id)}</UploadId></Upload>`,
          )
          .join("") +
        "</ListMultipartUploadsResult>";
      return;
    }
    if (uploadId !== undefined && key !== "" && /^[0-9a-f]+$/.test(uploadId)) {
      const dir = join(uploadsDir, uploadId);
      if (ctx.method === "DELETE") {
        if (!(await exists(dir))) throw new S3Error("NoSuchUpload", "The specified upload does not exist.");
        await rm(dir, { recursive: true, force: true });
        ctx.status = 204;
        ctx.body = "";
        return;
      }
      if ((ctx.method === "PUT" || ctx.method === "POST") && !(await exists(dir))) {
        throw new S3Error("NoSuchUpload", "The specified upload does not exist.");
      }
    }
    return next();
  };
}

/** Starts s3rver for one test file; close it (or `await using`) when done. */
export async function startS3rver(): Promise<S3rverHandle> {
  const directory = await mkdtemp(join(tmpdir(), "runlet-s3rver-"));
  const server = new S3rver({ address: "127.0.0.1", port: 0, silent: true, directory });
  // Before s3rver's router (the last middleware), after its logging, XML and vhost handling.
  server.middleware.splice(server.middleware.length - 1, 0, multipartRoutes(directory));
  const operations: string[] = [];
  server.middleware.unshift((ctx, next) => {
    const path = ctx.path
      .split("/")
      .filter((x) => x !== "")
      .map((x) => decodeURIComponent(x))
      .join("/");
    operations.push(`${operationName(ctx)} ${path}`);
    return next();
  });
  const address = await server.run();
  const endpoint = `http://127.0.0.1:${address.port}`;
  const client = new S3Client({
    endpoint,
    region: "us-east-1",
    forcePathStyle: true,
    credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  let closing: Promise<void> | undefined;
  const close = () => {
    closing ??= (async () => {
      client.destroy();
      try {
        await server.close();
      } finally {
        await rm(directory, { recursive: true, force: true });
      }
    })();
    return closing;
  };
  return {
    endpoint,
    accessKeyId: "S3RVER",
    secretAccessKey: "S3RVER",
    operations,
    client,
    async createBucket(name) {
      await client.send(new CreateBucketCommand({ Bucket: name }));
    },
    async listMultipartUploads(bucket) {
      const res = await client.send(new ListMultipartUploadsCommand({ Bucket: bucket }));
      return (res.Uploads ?? []).map((u) => ({ key: u.Key ?? "", uploadId: u.UploadId ?? "" }));
    },
    close,
    [Symbol.asyncDispose]: close,
  };
}
