// s3rver ships no types; this declares the part runlet's tests use.
declare module "s3rver" {
  import type { AddressInfo } from "node:net";

  interface S3rverOptions {
    address?: string;
    port?: number;
    silent?: boolean;
    directory?: string;
    resetOnClose?: boolean;
    allowMismatchedSignatures?: boolean;
    vhostBuckets?: boolean;
    configureBuckets?: { name: string; configs?: (string | Buffer)[] }[];
  }

  export interface KoaContext {
    method: string;
    path: string;
    query: Record<string, string | string[] | undefined>;
    status: number;
    type: string;
    body: unknown;
  }

  type Middleware = (ctx: KoaContext, next: () => Promise<void>) => Promise<void> | void;

  class S3rver {
    constructor(options?: S3rverOptions);
    middleware: Middleware[];
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
  export default S3rver;
}
