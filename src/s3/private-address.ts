import { type LookupAddress, type LookupOptions, lookup } from "node:dns";
import { BlockList, isIP } from "node:net";
import { RunletError } from "../errors.js";
import { ALLOW_PRIVATE_ADDRESSES_ENV } from "./private-address-switch.js";

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
  ["64:ff9b:1::", 48], // local-use NAT64 (RFC 8215)
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

/** NAT64's well-known prefix (RFC 6052): the IPv4 address a gateway reaches is in the last 32 bits. */
const NAT64 = new BlockList();
NAT64.addSubnet("64:ff9b::", 96, "ipv6");

/** The eight 16-bit groups of an IPv6 address (a trailing dotted IPv4 part counts as two). */
function groups(address: string): number[] | undefined {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const fill = tail === undefined ? 0 : 8 - left.length - right.length;
  const all = [...left, ...Array<string>(Math.max(0, fill)).fill("0"), ...right].map((g) =>
    Number.parseInt(g, 16),
  );
  return all.length === 8 && all.every((g) => Number.isInteger(g)) ? all : undefined;
}

/** The IPv4 address a NAT64 address (`64:ff9b::7f00:1`) stands for, if it is one. */
function nat64IPv4(address: string): string | undefined {
  if (!NAT64.check(address, "ipv6")) return undefined;
  const g = groups(address);
  if (g === undefined) return "0.0.0.0"; // unreadable: judged as the unspecified address, refused
  const hi = g[6] ?? 0;
  const lo = g[7] ?? 0;
  return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
}

export {
  ALLOW_PRIVATE_ADDRESSES_ENV,
  operatorAllowsPrivateAddresses,
  PRIVATE_ADDRESSES_WARNING,
} from "./private-address-switch.js";

/** True for loopback, private, link-local, unspecified, multicast and reserved addresses. */
export function isPrivateAddress(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, "").replace(/%.*$/, "");
  const family = isIP(bare);
  if (family === 4) return PRIVATE.check(bare, "ipv4");
  if (family === 6) {
    // IPv4-mapped and NAT64 addresses are judged by the IPv4 address they reach.
    const v4 = mappedIPv4(bare) ?? nat64IPv4(bare);
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
      "link-local address; use a public URL, or, where this is intended (tests against a server on this " +
      `machine or network), start the worker with ${ALLOW_PRIVATE_ADDRESSES_ENV}=1 in its environment (runlet dev, ` +
      "an image) or allowPrivateAddresses: true in code",
    { details: { url: shown, address } },
  );
}

/**
 * The error for a job's `s3Config.endpointUrl` on a refused address: the client who sends the job
 * chooses that host, so it is held to the rule of download URLs; the operator's BUCKET_ENDPOINT_URL
 * is not.
 */
export function endpointRefusedError(url: URL, address: string): RunletError {
  return new RunletError(
    "RUNLET_S3_ENDPOINT_REFUSED",
    `the job's s3Config.endpointUrl ${url.origin} was refused: ${url.hostname} resolves to ${address}, a private, ` +
      "loopback or link-local address; send a public store, set the endpoint's BUCKET_ENDPOINT_URL (the " +
      "operator's store is trusted), or, where this is intended (local tests, a store on the worker's own " +
      `network), start the worker with ${ALLOW_PRIVATE_ADDRESSES_ENV}=1 in its environment or allowPrivateAddresses: true in code`,
    { details: { endpoint: url.origin, address } },
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
export function guardedLookup(
  url: () => URL,
  refuse: (url: URL, address: string) => RunletError = refusedError,
) {
  return (hostname: string, options: LookupOptions, callback: LookupCallback): void => {
    lookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) {
        callback(err, "", 4);
        return;
      }
      const bad = addresses.find((a) => isPrivateAddress(a.address));
      if (bad !== undefined) {
        callback(refuse(url(), bad.address) as unknown as NodeJS.ErrnoException, "", 4);
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
