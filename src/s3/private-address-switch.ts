import { RunletError } from "../errors.js";

// Apart from private-address.ts so that the worker's configuration reads the switch without
// loading node:net and node:dns with it (test/worker/import-graph.unit.test.ts).

/**
 * The operator's switch (docs/s3.md, "Private addresses"): `RUNLET_ALLOW_PRIVATE_ADDRESSES=1` on a
 * worker lets its downloads and jobs' S3 endpoints reach private and loopback addresses, as the
 * `allowPrivateAddresses` option does in code: for a built bundle or an image tested against a
 * file server or an S3 store on the same machine, without changing the code.
 */
export const ALLOW_PRIVATE_ADDRESSES_ENV = "RUNLET_ALLOW_PRIVATE_ADDRESSES";

/** What a worker logs (a warning, at start) when the operator's switch is on. */
export const PRIVATE_ADDRESSES_WARNING =
  `${ALLOW_PRIVATE_ADDRESSES_ENV}=1: ctx.s3.download and jobs' s3Config endpoints may reach private, ` +
  "loopback and link-local addresses (the machine's own services, cloud metadata); meant for tests " +
  "against servers on this machine or network, not for a worker that takes URLs from untrusted clients";

/**
 * Reads the operator's switch: `true` for `1` or `true`, `undefined` when unset, empty, `0` or
 * `false` (the code's own setting then holds); any other value is RUNLET_CONFIG_INVALID naming it.
 */
export function operatorAllowsPrivateAddresses(
  env: Readonly<Record<string, string | undefined>>,
): true | undefined {
  const raw = env[ALLOW_PRIVATE_ADDRESSES_ENV];
  const value = raw?.trim().toLowerCase() ?? "";
  if (value === "1" || value === "true") return true;
  if (value === "" || value === "0" || value === "false") return undefined;
  throw new RunletError(
    "RUNLET_CONFIG_INVALID",
    `${ALLOW_PRIVATE_ADDRESSES_ENV} must be 1, true, 0 or false, got ${JSON.stringify(raw).slice(0, 100)}`,
  );
}
