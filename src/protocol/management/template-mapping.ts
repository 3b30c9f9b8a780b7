import type { TemplateV1, TemplateV2 } from "./template.js";

/**
 * Maps templates between v1 and v2 field names. The v2 names are the published v2 document's
 * (openapi/runpod-v2.json, `Template`); fields with no counterpart keep their names.
 */

type Loose = Record<string, unknown>;

/** v1 name → v2 name. */
const RENAMES = [
  ["imageName", "image"],
  ["containerDiskInGb", "disk"],
  ["isPublic", "public"],
  ["isServerless", "serverless"],
] as const;

/**
 * Turns a v1 template into v2 fields: `imageName`→`image`, `containerDiskInGb`→`disk`,
 * `isPublic`→`public`, `isServerless`→`serverless`, `containerRegistryAuthId`→`registry` (null when
 * empty), `volumeInGb` + `volumeMountPath`→`mounts.persistent` (none when the size is 0).
 *
 * @example
 * templateV1ToV2({ id: "t1", name: "echo", imageName: "me/echo:1", isPublic: false })
 * // → { id: "t1", name: "echo", image: "me/echo:1", public: false, registry: null, mounts: {} }
 */
export function templateV1ToV2(template: TemplateV1): TemplateV2 {
  const out: Loose = {};
  for (const [key, value] of Object.entries(template)) {
    if (key === "containerRegistryAuthId" || key === "volumeInGb" || key === "volumeMountPath") continue;
    const rename = RENAMES.find(([v1]) => v1 === key);
    out[rename === undefined ? key : rename[1]] = value;
  }
  const authId = template.containerRegistryAuthId;
  out["registry"] = typeof authId === "string" && authId.length > 0 ? authId : null;
  const size = template.volumeInGb;
  out["mounts"] =
    typeof size === "number" && size > 0
      ? { persistent: { size, path: template.volumeMountPath ?? "/workspace" } }
      : {};
  return out as TemplateV2;
}

/**
 * Turns v2 template fields back into v1 names — the inverse of {@link templateV1ToV2}.
 *
 * @example
 * templateV2ToV1({ id: "t1", name: "echo", image: "me/echo:1", disk: 10 })
 * // → { id: "t1", name: "echo", imageName: "me/echo:1", containerDiskInGb: 10 }
 */
export function templateV2ToV1(template: TemplateV2): TemplateV1 {
  const out: Loose = {};
  for (const [key, value] of Object.entries(template)) {
    if (key === "registry" || key === "mounts") continue;
    const rename = RENAMES.find(([, v2]) => v2 === key);
    out[rename === undefined ? key : rename[0]] = value;
  }
  if (typeof template.registry === "string") out["containerRegistryAuthId"] = template.registry;
  const persistent = (template.mounts as { persistent?: { size?: unknown; path?: unknown } } | undefined)
    ?.persistent;
  if (typeof persistent?.size === "number") {
    out["volumeInGb"] = persistent.size;
    if (typeof persistent.path === "string") out["volumeMountPath"] = persistent.path;
  }
  return out as TemplateV1;
}
