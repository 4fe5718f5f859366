/**
 * A starting input for a skill's "try it" form, from its JSON Schema. Pure (no DOM).
 * Only the top-level properties are filled, each from the schema's own example or default
 * when it gives one, else a blank of the right type: the person edits it, the gateway validates.
 */

type Schema = { [key: string]: unknown };

const isObject = (value: unknown): value is Schema => typeof value === "object" && value !== null && !Array.isArray(value);

/** A value for one property schema: example, default, first enum value, or an empty value of its type. */
export function exampleValue(schema: unknown, depth = 0): unknown {
  if (!isObject(schema)) return "";
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if ("example" in schema) return schema.example;
  if ("default" in schema) return schema.default;
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== "null") : schema.type;
  switch (type) {
    case "integer":
    case "number":
      return typeof schema.minimum === "number" ? schema.minimum : 0;
    case "boolean":
      return false;
    case "array":
      return [];
    case "object":
      // Nested objects are filled a few levels deep; past that an empty object keeps the text short.
      return depth < 3 ? exampleInput(schema, depth + 1) : {};
    case "null":
      return null;
    default:
      return "";
  }
}

/** An input object with every top-level property of an object schema; `{}` for no schema. */
export function exampleInput(schema: unknown, depth = 0): Record<string, unknown> {
  const input: Record<string, unknown> = {};
  if (!isObject(schema) || !isObject(schema.properties)) return input;
  for (const [name, property] of Object.entries(schema.properties)) input[name] = exampleValue(property, depth);
  return input;
}
