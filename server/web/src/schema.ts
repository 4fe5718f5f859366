/**
 * A skill's input schema, read for the "try it" form. Pure (no DOM), so the unit tests run it
 * under Node: the example input the form and the curl commands start with, the form's fields
 * (one per top-level property), and the reading of what a person typed into each field.
 * The schema is a stranger's: anything it does not say clearly falls back to the JSON editor,
 * and the gateway validates the input whatever the form let through.
 */

type Schema = { [key: string]: unknown };

const isObject = (value: unknown): value is Schema => typeof value === "object" && value !== null && !Array.isArray(value);

/** The text a string property starts with when its schema gives no example: sample text anyone recognises. */
export const SAMPLE_TEXT = "Hello, world";

/** Sample strings for the common formats, so a prefilled input passes a `format` check. */
const FORMAT_SAMPLES: Record<string, string> = {
  email: "ada@example.com",
  uri: "https://example.com",
  url: "https://example.com",
  date: "2025-01-31",
  "date-time": "2025-01-31T12:00:00Z",
  time: "12:00:00Z",
  uuid: "123e4567-e89b-12d3-a456-426614174000",
  ipv4: "192.0.2.1",
  hostname: "example.com",
};

/** The single type a schema declares (`["string", "null"]` counts as "string"); undefined for none or several. */
function declaredType(schema: Schema): string | undefined {
  if (typeof schema.type === "string") return schema.type;
  if (!Array.isArray(schema.type)) return undefined;
  const types = schema.type.filter((t) => t !== "null");
  return types.length === 1 && typeof types[0] === "string" ? types[0] : undefined;
}

const num = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined);

/** A number inside the schema's bounds: its step (`multipleOf`, else 1), raised to a minimum, lowered to a maximum. */
function sampleNumber(schema: Schema, integer: boolean): number {
  const step = num(schema.multipleOf) !== undefined && (schema.multipleOf as number) > 0 ? (schema.multipleOf as number) : 1;
  let value = step;
  const min = num(schema.minimum);
  const exclusiveMin = num(schema.exclusiveMinimum);
  const max = num(schema.maximum);
  const exclusiveMax = num(schema.exclusiveMaximum);
  if (min !== undefined && value < min) value = min;
  if (exclusiveMin !== undefined && value <= exclusiveMin) value = exclusiveMin + step;
  if (max !== undefined && value > max) value = max;
  if (exclusiveMax !== undefined && value >= exclusiveMax) value = exclusiveMax - step;
  return integer ? Math.ceil(value) : value;
}

/** A sample string: one for its format, else SAMPLE_TEXT fitted to its length bounds; "" under a `pattern` (no guess fits it). */
function sampleString(schema: Schema): string {
  if (typeof schema.format === "string" && schema.format in FORMAT_SAMPLES) return FORMAT_SAMPLES[schema.format];
  if (typeof schema.pattern === "string") return "";
  const min = num(schema.minLength) ?? 0;
  const max = num(schema.maxLength);
  const text = SAMPLE_TEXT.padEnd(min, ".");
  return max === undefined ? text : text.slice(0, max);
}

/** A value for one property schema: its example, default, const or first enum value, else a sensible value of its type. */
export function exampleValue(schema: unknown, depth = 0): unknown {
  if (!isObject(schema)) return "";
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if ("example" in schema) return schema.example;
  if ("default" in schema) return schema.default;
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  switch (declaredType(schema)) {
    case "integer":
      return sampleNumber(schema, true);
    case "number":
      return sampleNumber(schema, false);
    case "boolean":
      return false;
    case "array":
      // One sample item when the schema says what an item is; past a few levels, an empty list keeps the text short.
      return isObject(schema.items) && depth < 3 ? [exampleValue(schema.items, depth + 1)] : [];
    case "object":
      // Nested objects are filled a few levels deep; past that an empty object keeps the text short.
      return depth < 3 ? exampleInput(schema, depth + 1) : {};
    case "null":
      return null;
    default:
      return sampleString(schema);
  }
}

/**
 * An input object for a skill: the schema's own example of a whole input (`examples`, `default`) when it gives
 * one, else every top-level property with its example value; `{}` for no schema.
 */
export function exampleInput(schema: unknown, depth = 0): Record<string, unknown> {
  if (!isObject(schema)) return {};
  for (const candidate of [Array.isArray(schema.examples) ? schema.examples[0] : undefined, schema.example, schema.default])
    if (isObject(candidate)) return { ...candidate };
  const input: Record<string, unknown> = {};
  if (!isObject(schema.properties)) return input;
  for (const [name, property] of Object.entries(schema.properties)) input[name] = exampleValue(property, depth);
  return input;
}

/** How a field is edited: a text box, a number box, a checkbox, a list of choices, or JSON for anything nested. */
export type FieldKind = "text" | "number" | "integer" | "boolean" | "choice" | "json";

/** One field of the "try it" form: a top-level property of the input schema. */
export interface FormField {
  /** The property's name, the key in the input. */
  name: string;
  /** What the field is called on the page: the schema's `title`, else the name. */
  label: string;
  kind: FieldKind;
  required: boolean;
  /** The schema's description, shown under the field. */
  description?: string;
  /** The schema's default, said under the field ("Default: 3"). */
  defaultValue?: unknown;
  /** The values a `choice` offers, in the schema's order. */
  options?: unknown[];
  /** A long text (a `maxLength` over 200): a text area rather than one line. */
  multiline?: boolean;
  /** What the field starts with (the example input's value; undefined leaves it empty). */
  initial: unknown;
}

/** The kind of field for a property schema. */
function fieldKind(schema: Schema): FieldKind {
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return "choice";
  if ("const" in schema) return "choice";
  switch (declaredType(schema)) {
    case "string":
      return "text";
    case "integer":
      return "integer";
    case "number":
      return "number";
    case "boolean":
      return "boolean";
    default:
      return "json";
  }
}

/**
 * The form for an input schema: one field per top-level property, in the schema's order. Null when there is
 * nothing to build one from (no schema, or one without properties): the JSON editor is then the only way in.
 */
export function formFields(schema: unknown): FormField[] | null {
  if (!isObject(schema) || !isObject(schema.properties)) return null;
  const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : []);
  const start = exampleInput(schema);
  const fields = Object.entries(schema.properties).map(([name, raw]): FormField => {
    const property = isObject(raw) ? raw : {};
    const kind = fieldKind(property);
    return {
      name,
      label: typeof property.title === "string" && property.title.trim() !== "" ? property.title : name,
      kind,
      required: required.has(name),
      description: typeof property.description === "string" && property.description !== "" ? property.description : undefined,
      defaultValue: property.default,
      options: kind !== "choice" ? undefined : Array.isArray(property.enum) ? property.enum : [property.const],
      multiline: kind === "text" && (num(property.maxLength) ?? 0) > 200 ? true : undefined,
      initial: start[name],
    };
  });
  return fields.length > 0 ? fields : null;
}

/**
 * What an input control holds for a value: the text of a text, number or JSON box, "true"/"false" for a
 * checkbox, the option's index for a choice, "" for no value. Undefined when the field cannot show the value
 * (a number in a text field, a value outside the choices): it stays editable in JSON only.
 */
export function fieldText(field: FormField, value: unknown): string | undefined {
  if (value === undefined) return field.kind === "boolean" ? "false" : "";
  switch (field.kind) {
    case "text":
      return typeof value === "string" ? value : undefined;
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? String(value) : undefined;
    case "integer":
      return typeof value === "number" && Number.isInteger(value) ? String(value) : undefined;
    case "boolean":
      return typeof value === "boolean" ? String(value) : undefined;
    case "choice": {
      const index = (field.options ?? []).findIndex((option) => JSON.stringify(option) === JSON.stringify(value));
      return index < 0 ? undefined : String(index);
    }
    case "json":
      return JSON.stringify(value, null, 2);
  }
}

/** What a field's text means: a value, nothing (an optional field left empty: the key is left out), or why not. */
export type FieldReading = { ok: true; value: unknown } | { ok: true; omitted: true } | { ok: false; message: string };

const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/** Reads what a person put in a field (as `fieldText` writes it) back into a value of the field's type. */
export function readField(field: FormField, text: string): FieldReading {
  if (field.kind === "boolean") return { ok: true, value: text === "true" };
  const empty = field.kind === "text" ? text === "" : text.trim() === "";
  if (empty) {
    if (!field.required) return { ok: true, omitted: true };
    return { ok: false, message: `${field.kind === "choice" ? "Choose" : "Fill in"} ${field.label}: it is required.` };
  }
  switch (field.kind) {
    case "text":
      return { ok: true, value: text };
    case "number":
    case "integer": {
      const value = Number(text.trim());
      if (!NUMBER.test(text.trim()) || !Number.isFinite(value)) return { ok: false, message: `Enter a number for ${field.label}.` };
      if (field.kind === "integer" && !Number.isInteger(value)) return { ok: false, message: `Enter a whole number for ${field.label}.` };
      return { ok: true, value };
    }
    case "choice": {
      const options = field.options ?? [];
      const index = Number(text);
      return Number.isInteger(index) && index >= 0 && index < options.length
        ? { ok: true, value: options[index] }
        : { ok: false, message: `Choose one of the values for ${field.label}.` };
    }
    case "json":
      try {
        return { ok: true, value: JSON.parse(text) };
      } catch {
        return { ok: false, message: `${capitalize(field.label)} is not valid JSON.` };
      }
  }
}

const capitalize = (text: string) => text.charAt(0).toUpperCase() + text.slice(1);

/**
 * Reads the JSON editor's text as a skill input: a JSON object, or the sentence saying why it is not one
 * (the browser's parser's own words follow, since they name the position).
 */
export function readInputJson(text: string): { ok: true; value: Record<string, unknown> } | { ok: false; message: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    const detail = error instanceof Error && error.message ? ` (${error.message})` : "";
    return { ok: false, message: `The input is not valid JSON${detail}.` };
  }
  if (!isObject(value)) return { ok: false, message: 'The input must be a JSON object of the skill\'s parameters, like {"text": "hi"}.' };
  return { ok: true, value };
}
