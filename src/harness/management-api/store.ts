import { randomInt } from "node:crypto";
import type { TemplateV1 } from "../../protocol/management/index.js";
import { templateV1ToV2 } from "../../protocol/management/template-mapping.js";

/**
 * The harness's in-memory management state: templates and serverless endpoints, each kept as the
 * v2 document's answer (`Template`, `Endpoint`: every required field filled). One API key is one
 * user, so "owned" means created by the caller or seeded as `owner: "self"`.
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

/** A template as the v2 document's `Template` answers it. */
export interface StoredTemplateRecord {
  readonly id: string;
  readonly name: string;
  readonly image: string;
  readonly args: string;
  readonly disk: number;
  readonly mounts: Readonly<Record<string, unknown>>;
  readonly ports: readonly string[];
  readonly env: Readonly<Record<string, string>>;
  readonly registry: string | null;
  readonly serverless: boolean;
  readonly public: boolean;
  readonly category: "CPU" | "NVIDIA" | "AMD";
  readonly startSsh: boolean;
  readonly startJupyter: boolean;
  readonly allowedCudaVersions: readonly string[];
  readonly [key: string]: unknown;
}

export interface StoredTemplate {
  template: StoredTemplateRecord;
  readonly owner: TemplateOwner;
}

/** A stored endpoint: the v2 `Endpoint` record as it is answered. */
export interface StoredEndpoint {
  readonly id: string;
  readonly name: string;
  readonly type: "QUEUE" | "LOAD_BALANCER";
  readonly workers: { readonly min: number; readonly max: number; readonly idleTimeout?: number };
  readonly timeout: number;
  readonly createdAt: string;
  readonly [key: string]: unknown;
}

/** One release of an endpoint (the document's `Release`), newest last here. */
export interface StoredRelease {
  readonly id: string;
  readonly version: number;
  /** When it was made, ms since the epoch: workers first seen from then on run it. */
  readonly at: number;
  readonly diff: readonly { readonly field: string; readonly old: unknown; readonly new: unknown }[];
}

const ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/** A random id of lowercase letters and digits. Endpoint ids are 14 long: no reserved `/v2/` segment is 14 letters and digits. */
export function randomId(length: number): string {
  let id = "";
  for (let i = 0; i < length; i++) id += ID_ALPHABET[randomInt(ID_ALPHABET.length)];
  return id;
}

/** Container disk of a template or endpoint created without `disk`, GB (the document shows no default; its examples answer 20). */
export const DEFAULT_DISK_GB = 20;

/**
 * Fills the fields of the document's `Template` that a create leaves out with the document's
 * defaults (`category` NVIDIA, `public` and `serverless` false, `startSsh` and `startJupyter` true).
 */
export function withTemplateDefaults(
  id: string,
  fields: Readonly<Record<string, unknown>> & { name: string; image: string },
): StoredTemplateRecord {
  return {
    args: "",
    disk: DEFAULT_DISK_GB,
    mounts: {},
    ports: [],
    env: {},
    registry: null,
    serverless: false,
    public: false,
    category: "NVIDIA",
    startSsh: true,
    startJupyter: true,
    allowedCudaVersions: [],
    ...fields,
    id,
  } as StoredTemplateRecord;
}

/** Most releases kept per endpoint; older ones are dropped from the history. */
export const MAX_RELEASES = 50;

export class ManagementStore {
  readonly #templates = new Map<string, StoredTemplate>();
  readonly #endpoints = new Map<string, StoredEndpoint>();
  /** The template an endpoint was created from (the document keeps no link in the answer; v1's flags need it). */
  readonly #boundTemplate = new Map<string, string>();
  readonly #releases = new Map<string, StoredRelease[]>();
  /** The release each worker that predates the newest one runs, by endpoint then worker id. */
  readonly #pinned = new Map<string, Map<string, number>>();

  constructor(seeds: readonly TemplateSeed[] = []) {
    for (const { owner = "self", ...fields } of seeds) {
      const id = fields.id ?? randomId(10);
      const v2 = templateV1ToV2({
        ...fields,
        id,
        ...(owner === "runpod" ? { isRunpod: true, isPublic: true } : {}),
        ...(owner === "community" ? { isPublic: true } : {}),
      } as TemplateV1);
      this.#templates.set(id, { template: withTemplateDefaults(id, v2), owner });
    }
  }

  template(id: string): StoredTemplate | undefined {
    return this.#templates.get(id);
  }

  /** The caller's own templates, in creation order. */
  ownTemplates(): StoredTemplateRecord[] {
    return [...this.#templates.values()].filter((t) => t.owner === "self").map((t) => t.template);
  }

  /** The id of a caller's template with this name, other than `exceptId`. */
  templateNamed(name: string, exceptId?: string): string | undefined {
    for (const [id, t] of this.#templates)
      if (t.owner === "self" && t.template.name === name && id !== exceptId) return id;
    return undefined;
  }

  putTemplate(template: StoredTemplateRecord): void {
    const existing = this.#templates.get(template.id);
    this.#templates.set(template.id, { template, owner: existing?.owner ?? "self" });
  }

  deleteTemplate(id: string): boolean {
    return this.#templates.delete(id);
  }

  /** Ids of endpoints created from the template: a bound template is hidden from v1 lookups without the flag. */
  endpointsUsing(templateId: string): string[] {
    return [...this.#boundTemplate].filter(([, t]) => t === templateId).map(([e]) => e);
  }

  /** The template an endpoint was created from. */
  templateOf(endpointId: string): string | undefined {
    return this.#boundTemplate.get(endpointId);
  }

  endpoint(id: string): StoredEndpoint | undefined {
    return this.#endpoints.get(id);
  }

  endpoints(): StoredEndpoint[] {
    return [...this.#endpoints.values()];
  }

  putEndpoint(endpoint: StoredEndpoint, templateId?: string): void {
    this.#endpoints.set(endpoint.id, endpoint);
    if (templateId !== undefined) this.#boundTemplate.set(endpoint.id, templateId);
  }

  deleteEndpoint(id: string): boolean {
    this.#boundTemplate.delete(id);
    this.#releases.delete(id);
    this.#pinned.delete(id);
    return this.#endpoints.delete(id);
  }

  /** The endpoint's releases, oldest first. */
  releases(endpointId: string): readonly StoredRelease[] {
    return this.#releases.get(endpointId) ?? [];
  }

  /** Records a new release of the endpoint (its version is one past the last); keeps the newest {@link MAX_RELEASES}. */
  addRelease(endpointId: string, at: number, diff: StoredRelease["diff"]): StoredRelease {
    const list = this.#releases.get(endpointId) ?? [];
    const release = { id: `rel_${randomId(10)}`, version: (list.at(-1)?.version ?? 0) + 1, at, diff };
    list.push(release);
    if (list.length > MAX_RELEASES) list.splice(0, list.length - MAX_RELEASES);
    this.#releases.set(endpointId, list);
    return release;
  }

  /** Notes that a worker runs `version` (a release is about to be made; it keeps running the old one). */
  pinWorker(endpointId: string, workerId: string, version: number): void {
    let pins = this.#pinned.get(endpointId);
    if (pins === undefined) {
      pins = new Map();
      this.#pinned.set(endpointId, pins);
    }
    if (!pins.has(workerId)) pins.set(workerId, version);
  }

  /** The release a pinned worker runs; undefined for a worker started since the newest release. */
  pinnedVersion(endpointId: string, workerId: string): number | undefined {
    return this.#pinned.get(endpointId)?.get(workerId);
  }

  /** Forgets pins of workers no longer running, so the map stays as small as the fleet. */
  prunePins(endpointId: string, running: ReadonlySet<string>): void {
    const pins = this.#pinned.get(endpointId);
    if (pins === undefined) return;
    for (const id of pins.keys()) if (!running.has(id)) pins.delete(id);
  }
}
