import Ajv2020, { type ValidateFunction } from "ajv/dist/2020";

/**
 * Checks real HTTP answers against the gateway's OpenAPI document: the operation must exist,
 * declare the answer's status and content type, and the body must satisfy the declared
 * schema (Ajv, JSON Schema 2020-12, the dialect of OpenAPI 3.1). Records which operations
 * were exercised, so that a test can insist every one was.
 */

type Response = { $ref?: string; content?: Record<string, { schema: unknown }> };

type Doc = {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, Response> }>>;
  components?: { responses?: Record<string, Response> };
};

export interface Answer {
  status: number;
  contentType: string | null;
  body: unknown;
}

const METHODS = ["get", "put", "post", "delete", "patch"];

/** Validates the document itself against the OpenAPI 3.1 schema (throws on the first problem). */
export async function assertValidOpenApi(document: unknown): Promise<void> {
  const { Validator } = await import("@seriousme/openapi-schema-validator");
  const validator = new Validator();
  const result = await validator.validate(document as Parameters<typeof validator.validate>[0]);
  if (!result.valid) throw new Error(`not a valid OpenAPI document: ${JSON.stringify(result.errors).slice(0, 2_000)}`);
  if (validator.version !== "3.1") throw new Error(`expected OpenAPI 3.1, got ${validator.version}`);
}

export class ContractChecker {
  private readonly ajv: Ajv2020;
  private readonly compiled = new Map<string, ValidateFunction>();
  private readonly templates: { template: string; pattern: RegExp }[];
  /** "METHOD /template" of every operation answered at least once, with the statuses seen. */
  readonly exercised = new Map<string, Set<number>>();

  constructor(readonly document: Doc) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true });
    this.ajv.addFormat("date-time", /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/);
    this.ajv.addFormat("date", /^\d{4}-\d{2}-\d{2}$/);
    this.ajv.addFormat("email", /^[^\s@]+@[^\s@]+$/);
    this.ajv.addSchema(document as object, "openapi.json");
    // Literal paths first: /v1/usage/daily is not /v1/usage/{x}.
    this.templates = Object.keys(document.paths)
      .sort((a, b) => a.split("{").length - b.split("{").length)
      .map((template) => ({
        template,
        pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\\?\{[^}]+\\?\}/g, "[^/]+")}$`),
      }));
  }

  /** Every operation the document declares, as "METHOD /template". */
  operations(): string[] {
    return Object.entries(this.document.paths).flatMap(([template, item]) =>
      Object.keys(item)
        .filter((method) => METHODS.includes(method))
        .map((method) => `${method.toUpperCase()} ${template}`),
    );
  }

  /** The problems with one answer; empty when the document declares it exactly. */
  problems(method: string, url: string, answer: Answer): string[] {
    const pathname = new URL(url, "http://gateway.invalid").pathname;
    const template = this.templates.find((t) => t.pattern.test(pathname))?.template;
    if (!template) return [`${method} ${pathname}: no path of the document matches`];
    const lower = method.toLowerCase();
    const operation = this.document.paths[template][lower];
    const name = `${method.toUpperCase()} ${template}`;
    if (!operation) return [`${name}: the document declares no such operation`];
    const seen = this.exercised.get(name) ?? new Set<number>();
    seen.add(answer.status);
    this.exercised.set(name, seen);
    const declared = operation.responses[String(answer.status)];
    // A response shared by several operations is written once under components/responses and referred to.
    let where = ["paths", template, lower, "responses", String(answer.status)];
    let response: Response | undefined = declared;
    if (declared?.$ref !== undefined) {
      const component = /^#\/components\/responses\/([^/]+)$/.exec(declared.$ref)?.[1];
      response = component === undefined ? undefined : this.document.components?.responses?.[component];
      if (component === undefined || !response) return [`${name}: ${declared.$ref} names no response of the document`];
      where = ["components", "responses", component];
    }
    if (!response)
      return [`${name} answered ${answer.status}, which the document does not declare (${Object.keys(operation.responses).join(", ")})`];
    if (!response.content)
      return answer.contentType && answer.body !== "" ? [`${name} ${answer.status}: a body the document does not declare`] : [];
    const mediaType = (answer.contentType ?? "").split(";")[0].trim();
    if (!response.content[mediaType]) return [`${name} ${answer.status}: content type "${mediaType}", not one the document declares`];
    const pointer = [...where, "content", mediaType, "schema"].map((part) => part.replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
    const ref = `openapi.json#/${pointer}`;
    let validate = this.compiled.get(ref);
    if (!validate) {
      validate = this.ajv.compile({ $ref: ref });
      this.compiled.set(ref, validate);
    }
    if (validate(answer.body)) return [];
    return [
      `${name} ${answer.status}: the body does not match the document: ${this.ajv.errorsText(validate.errors)}; body ${JSON.stringify(answer.body).slice(0, 400)}`,
    ];
  }
}
