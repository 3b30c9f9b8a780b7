import { type LookupAddress, type LookupOptions, lookup } from "node:dns";
import { BlockList, isIP } from "node:net";
import { RunletError } from "../errors.js";

/**
 * Addresses a download from a job's input must not reach unless allowed: a URL from a client
 * pointing at the worker's own network (metadata services, sidecars, the loopback) is the classic
 * server-side request forgery.
 */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ["0.0.0.0", 8], // "this" network
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8], // loopback
  ["169.254.0.0", 16], // link-local, cloud metadata services
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const) {
  PRIVATE.addSubnet(net, prefix, "ipv4");
}
for (const [net, prefix] of [
  ["::", 128], // unspecified
  ["::1", 128], // loopback
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
] as const) {
  PRIVATE.addSubnet(net, prefix, "ipv6");
}

/** The IPv4 address embedded in an IPv4-mapped IPv6 address (`::ffff:127.0.0.1`), if it is one. */
function mappedIPv4(address: string): string | undefined {
  const m = /^::ffff:(?:(\d+\.\d+\.\d+\.\d+)|([0-9a-f]{1,4}):([0-9a-f]{1,4}))$/i.exec(address);
  if (m === null) return undefined;
  if (m[1] !== undefined) return m[1];
  const hi = Number.parseInt(m[2] ?? "0", 16);
  const lo = Number.parseInt(m[3] ?? "0", 16);
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

/** True for loopback, private, link-local, unspecified, multicast and reserved addresses. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const family = isIP(bare);
  if (family === 4) return PRIVATE.check(bare, "ipv4");
  if (family === 6) {
    const v4 = mappedIPv4(bare);
    return v4 !== undefined ? PRIVATE.check(v4, "ipv4") : PRIVATE.check(bare, "ipv6");
  }
  return false;
}

/** The error for a refused address; `url` is shown without its query (presigned URLs carry signatures there). */
export function refusedError(url: URL, address: string): RunletError {
  const shown = `${url.origin}${url.pathname}`;
  return new RunletError(
    "RUNLET_S3_DOWNLOAD_REFUSED",
    `download of ${shown} refused: ${url.hostname} resolves to ${address}, a private, loopback or ` +
      "link-local address; use a public URL, or start the worker with allowPrivateAddresses: true " +
      "when this is intended (local tests)",
    { details: { url: shown, address } },
  );
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for sockets that fails when the host resolves to a private address. Checking at
 * connect time (not before the request) closes the window where DNS answers differently the
 * second time (DNS rebinding).
 */
export function guardedLookup(url: () => URL) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) {
        callback(err, "", 4);
        return;
      }
      const bad = addresses.find((a) => isPrivateAddress(a.address));
      if (bad !== undefined) {
        callback(refusedError(url(), bad.address) as unknown as NodeJS.ErrnoException, "", 4);
        return;
      }
      if (options.all === true) callback(null, addresses);
      else {
        const first = addresses[0];
        if (first === undefined)
          callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }), "", 4);
        else callback(null, first.address, first.family);
      }
    });
  };
}
