import { randomInt } from "node:crypto";
import type { Endpoint, TemplateV1 } from "../../protocol/management/index.js";

/**
 * The harness's in-memory management state: templates (kept in v1 form, the fuller one,
 * and mapped to v2 on the way out) and serverless endpoints. One API key is one user, so
 * "owned" means created by the caller or seeded as `owner: "self"`.
 */

/** Who a template belongs to, which decides what the v1 include flags reveal (docs/protocol.md, "v1 retirement"). */
export type TemplateOwner = "self" | "community" | "runpod";

/** A template given to the harness at start: v1 fields plus its owner. */
export interface TemplateSeed extends Partial<TemplateV1> {
  readonly name: string;
  readonly imageName: string;
  /** @default "self" */
  readonly owner?: TemplateOwner;
}

export interface StoredTemplate {
  template: TemplateV1;
  readonly owner: TemplateOwner;
}

/** A stored endpoint: the v2 record as it is answered. */
export type StoredEndpoint = Endpoint & { readonly createdAt: string };

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/** A random id of lowercase letters and digits. Endpoint ids are 14 long: no reserved `/v2/` segment is 14 letters and digits. */
export function randomId(length: number): string {
  let id = "";
  for (let i = 0; i < length; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}

/** Fills the template fields (docs/protocol.md, "Templates") a new template leaves out with the harness's defaults. */
export function withTemplateDefaults(
  id: string,
  fields: Partial<TemplateV1> & { name: string; imageName: string },
): TemplateV1 {
  return {
    category: "NVIDIA",
    containerDiskInGb: 10,
    volumeInGb: 0,
    volumeMountPath: "/workspace",
    dockerEntrypoint: [],
    dockerStartCmd: [],
    env: {},
    ports: [],
    readme: "",
    isPublic: false,
    isRunpod: false,
    isServerless: false,
    earned: 0,
    runtimeInMin: 0,
    ...fields,
    id,
  };
}

export class ManagementStore {
  readonly #templates = new Map<string, StoredTemplate>();
  readonly #endpoints = new Map<string, StoredEndpoint>();

  constructor(seeds: readonly TemplateSeed[] = []) {
    for (const { owner = "self", ...fields } of seeds) {
      const id = fields.id ?? randomId(10);
      const template = withTemplateDefaults(id, {
        ...fields,
        ...(owner === "runpod" ? { isRunpod: true, isPublic: true } : {}),
        ...(owner === "community" ? { isPublic: true } : {}),
      });
      this.#templates.set(id, { template, owner });
    }
  }

  template(id: string): StoredTemplate | undefined {
    return this.#templates.get(id);
  }

  /** The caller's own templates, in creation order. */
  ownTemplates(): TemplateV1[] {
    return [...this.#templates.values()].filter((t) => t.owner === "self").map((t) => t.template);
  }

  /** The id of a caller's template with this name, other than `exceptId`. */
  templateNamed(name: string, exceptId?: string): string | undefined {
    for (const [id, t] of this.#templates)
      if (t.owner === "self" && t.template.name === name && id !== exceptId) return id;
    return undefined;
  }

  putTemplate(template: TemplateV1): void {
    const existing = this.#templates.get(template.id);
    this.#templates.set(template.id, { template, owner: existing?.owner ?? "self" });
  }

  deleteTemplate(id: string): boolean {
    return this.#templates.delete(id);
  }

  /** Ids of endpoints that use the template: a bound template is hidden from v1 lookups without the flag. */
  endpointsUsing(templateId: string): string[] {
    return [...this.#endpoints.values()].filter((e) => e.templateId === templateId).map((e) => e.id);
  }

  endpoint(id: string): StoredEndpoint | undefined {
    return this.#endpoints.get(id);
  }

  endpoints(): StoredEndpoint[] {
    return [...this.#endpoints.values()];
  }

  putEndpoint(endpoint: StoredEndpoint): void {
    this.#endpoints.set(endpoint.id, endpoint);
  }

  deleteEndpoint(id: string): boolean {
    return this.#endpoints.delete(id);
  }
}
