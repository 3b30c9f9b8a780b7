import { RunletError } from "./errors.js";

/**
 * runlet's optional peer dependencies, with the ranges package.json's `peerDependencies` declare
 * (test/unit/optional-peers.process.test.ts keeps the two equal). A project that only calls endpoints
 * through `runlet/client` installs none of them; the starters `runlet init` writes list the ones
 * they use (esbuild, tsx and pino-pretty in every one, the AWS SDK in s3 and ocr, tar-stream in
 * llm), so a worker project is `npm install` and go.
 */
export const OPTIONAL_PEERS = {
  "@opentelemetry/api": "^1.10.0",
  "@opentelemetry/context-async-hooks": "^3.1.0",
  "@opentelemetry/core": "^3.1.0",
  "@opentelemetry/exporter-metrics-otlp-http": "^0.301.0",
  "@opentelemetry/exporter-trace-otlp-http": "^0.301.0",
  "@opentelemetry/resources": "^3.1.0",
  "@opentelemetry/sdk-metrics": "^3.1.0",
  "@opentelemetry/sdk-trace": "^3.1.0",
  "@aws-sdk/client-s3": "^3.1169.0",
  "@aws-sdk/lib-storage": "^3.1169.0",
  "@aws-sdk/s3-request-presigner": "^3.1162.0",
  esbuild: "^0.28.2",
  "pino-pretty": "^13.2.0",
  tsx: "^4.23.15",
  "tar-stream": "^3.2.2",
} as const;

/** The name of an optional peer dependency. */
export type OptionalPeer = keyof typeof OPTIONAL_PEERS;

/** The three AWS SDK packages `ctx.s3` and output offloading load together. */
export const AWS_SDK_PEERS = [
  "@aws-sdk/client-s3",
  "@aws-sdk/lib-storage",
  "@aws-sdk/s3-request-presigner",
] as const satisfies readonly OptionalPeer[];

/** Whether `err` is Node failing to find one of `names` (ESM or CommonJS resolution). */
export function isMissingPackage(err: unknown, names: readonly string[]): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code !== "ERR_MODULE_NOT_FOUND" && code !== "MODULE_NOT_FOUND") return false;
  // Read as a field, not through instanceof: the error may come from another realm (a vm context).
  const message = (err as { message?: unknown }).message;
  if (typeof message !== "string") return false;
  return names.some((name) => message.includes(`'${name}'`) || message.includes(`'${name}/`));
}

/**
 * The error for optional packages that are missing: what needs them, and the `npm install` that
 * adds them at the ranges runlet supports. Tools the CLI runs go to devDependencies; packages a
 * worker loads at run time (the AWS SDK) to dependencies.
 */
export function missingPeerError(
  names: readonly OptionalPeer[],
  neededFor: string,
  cause?: unknown,
): RunletError {
  // Packages a worker loads at run time (the AWS SDK, tar-stream for the warm cache, OpenTelemetry) go to dependencies.
  const dev = names.every(
    (n) => !n.startsWith("@aws-sdk/") && n !== "tar-stream" && !n.startsWith("@opentelemetry/"),
  );
  const specs = names.map((n) => `${n}@${OPTIONAL_PEERS[n]}`).join(" ");
  const which = names.length === 1 ? `the package ${names[0]}, which is` : `${names.join(", ")}, which are`;
  return new RunletError(
    "RUNLET_MISSING_PEER",
    `${neededFor} needs ${which} not installed (optional for runlet): npm install ${dev ? "--save-dev " : ""}${specs}`,
    { cause, details: { packages: [...names] } },
  );
}

/**
 * Imports an optional peer by `specifier` (the package or one of its subpaths), turning "not
 * installed" into {@link missingPeerError}; any other failure passes through.
 */
export async function importPeer<T>(name: OptionalPeer, specifier: string, neededFor: string): Promise<T> {
  try {
    return (await import(specifier)) as T;
  } catch (err) {
    if (isMissingPackage(err, [name])) throw missingPeerError([name], neededFor, err);
    throw err;
  }
}

/**
 * For a failed load of runlet's S3 module: the missing-peer error when the AWS SDK is not
 * installed (or not in the bundle, which `runlet build` leaves it out of when it was not),
 * else the error itself.
 */
export function s3LoadError(err: unknown): Error {
  if (isMissingPackage(err, AWS_SDK_PEERS)) {
    return missingPeerError(
      AWS_SDK_PEERS,
      "S3 (ctx.s3, or offloading an output too large to post) — install it and run `runlet build` again;",
      err,
    );
  }
  return err instanceof Error ? err : new Error(String(err));
}
