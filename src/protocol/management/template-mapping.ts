import type { TemplateV1, TemplateV2 } from "./template.js";

/**
 * Maps templates between v1 and v2 field names (docs/protocol.md, "Management API"). Only the four renamed fields
 * change; every other field keeps its name ("field-by-field mapping beyond the above: not
 * shown"), so it is copied as it is.
 */

type Loose = Record<string, unknown>;

/** v1 name → v2 name. */
const RENAMES = [
  ["imageName", "image"],
  ["containerDiskInGb", "disk"],
  ["isPublic", "public"],
] as const;

/**
 * Turns a v1 template into v2 fields: `imageName`→`image`, `containerDiskInGb`→`disk`,
 * `isPublic`→`public`, `containerRegistryAuthId`→`registry: {id}` (absent when null or empty).
 *
 * @example
 * templateV1ToV2({ id: "t1", name: "echo", imageName: "me/echo:1", isPublic: false })
 * // → { id: "t1", name: "echo", image: "me/echo:1", public: false }
 */
export function templateV1ToV2(template: TemplateV1): TemplateV2 {
  const out: Loose = {};
  for (const [key, value] of Object.entries(template)) {
    if (key === "containerRegistryAuthId") continue;
    const rename = RENAMES.find(([v1]) => v1 === key);
    out[rename === undefined ? key : rename[1]] = value;
  }
  const authId = template.containerRegistryAuthId;
  if (typeof authId === "string" && authId.length > 0) out["registry"] = { id: authId };
  return out as TemplateV2;
}

/**
 * Turns v2 template fields back into v1 names — the inverse of {@link templateV1ToV2}
 * (`registry.id`→`containerRegistryAuthId`).
 *
 * @example
 * templateV2ToV1({ id: "t1", name: "echo", image: "me/echo:1", disk: 10 })
 * // → { id: "t1", name: "echo", imageName: "me/echo:1", containerDiskInGb: 10 }
 */
export function templateV2ToV1(template: TemplateV2): TemplateV1 {
  const out: Loose = {};
  for (const [key, value] of Object.entries(template)) {
    if (key === "registry") continue;
    const rename = RENAMES.find(([, v2]) => v2 === key);
    out[rename === undefined ? key : rename[0]] = value;
  }
  const registry = template.registry;
  if (registry !== undefined && registry !== null) out["containerRegistryAuthId"] = registry.id;
  return out as TemplateV1;
}
