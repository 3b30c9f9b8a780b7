/**
 * Telling management paths from job-API paths. Both live under `/v2/`: the job API as
 * `/v2/<endpoint_id>/...` (docs/protocol.md, "Job API"), the management API as `/v2/<resource>...` (docs/protocol.md, "Management API").
 * The first segment after `/v2/` decides: the resource names below are reserved, and the
 * harness never gives an endpoint one of them as its id (its ids are random lowercase
 * letters and digits, 14 long, which none of these names are).
 */

/** First segments after `/v2/` that belong to the management API. */
export const MANAGEMENT_V2_SEGMENTS: ReadonlySet<string> = new Set([
  "pods",
  "serverless",
  "templates",
  "network-volumes",
  "registries",
  "clusters",
  "catalog",
  "billing",
  "openapi.json",
]);

/** Segments the harness serves in memory; the other reserved ones answer 501. */
export const EMULATED_V2_SEGMENTS: ReadonlySet<string> = new Set([
  "templates",
  "serverless",
  "network-volumes",
  "registries",
  "catalog",
]);

/** True for every path the management emulation answers (`/v1/...` and reserved `/v2/<resource>...`). */
export function isManagementPath(path: string): boolean {
  const [version, first] = path
    .split("?")[0]!
    .split("/")
    .filter((s) => s.length > 0);
  if (version === "v1") return true;
  return version === "v2" && first !== undefined && MANAGEMENT_V2_SEGMENTS.has(first);
}
