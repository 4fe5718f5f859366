import path from "node:path";
import Ajv2020 from "ajv/dist/2020";
import { expect } from "chai";
import ts from "typescript";
import openapi from "../../../docs/openapi.json";
import { type TestStack, startStack } from "../../../test/helpers/gateway";
import { SkillGateway } from "../src";

/**
 * The SDK's response types against the API's contract (docs/openapi.json, which a server test
 * keeps equal to what the gateway serves): each interface of src/types.ts that mirrors an API
 * object must declare exactly the schema's properties, optional where the schema does not
 * require them, with the same JSON types; and what the SDK returns from a real gateway must
 * satisfy the schema and carry exactly the interface's fields.
 */

type JsonSchema = Record<string, any>;
const schemas = (openapi as { components: { schemas: Record<string, JsonSchema> } }).components.schemas;

/** The SDK interfaces that are API objects, and the document's schema of each. */
const MIRRORED: Record<string, JsonSchema> = {
  Skill: schemas.Skill,
  Balance: schemas.Balance,
  UsageCall: schemas.UsageCall,
  KeyStatus: schemas.OwnKey,
  ApiKey: schemas.ApiKey,
};

/** A type as a comparable description: its JSON types, and its literals when it is a union of them. */
interface Shape {
  types: string[];
  literals?: string[];
  properties?: Record<string, { shape: Shape; optional: boolean }>;
}

function resolve(schema: JsonSchema): JsonSchema {
  if (typeof schema.$ref === "string") return resolve(schemas[schema.$ref.split("/").pop()!]);
  return schema;
}

function schemaShape(raw: JsonSchema): Shape {
  const schema = resolve(raw);
  if (schema.anyOf || schema.oneOf) {
    const parts = (schema.anyOf ?? schema.oneOf).map(schemaShape) as Shape[];
    return merge(parts);
  }
  if (Object.keys(schema).filter((k) => k !== "description").length === 0) return { types: ["any"] };
  const types = (Array.isArray(schema.type) ? schema.type : [schema.type]).map((t: string) => (t === "integer" ? "number" : t));
  const shape: Shape = { types: [...new Set<string>(types)].sort() };
  const literals = schema.enum ?? (schema.const !== undefined ? [schema.const] : undefined);
  if (literals) shape.literals = literals.map(String).sort();
  if (types.includes("object") && schema.properties && schema.additionalProperties === false) {
    const required = new Set<string>(schema.required ?? []);
    shape.properties = Object.fromEntries(
      Object.entries(schema.properties as Record<string, JsonSchema>).map(([name, property]) => [
        name,
        { shape: schemaShape(property), optional: !required.has(name) },
      ]),
    );
  }
  return shape;
}

function merge(parts: Shape[]): Shape {
  const types = [...new Set(parts.flatMap((p) => p.types))].sort();
  const literalParts = parts.filter((p) => !p.types.includes("null"));
  const literals = literalParts.every((p) => p.literals) ? literalParts.flatMap((p) => p.literals!).sort() : undefined;
  const properties = parts.find((p) => p.properties)?.properties;
  return { types, ...(literals ? { literals } : {}), ...(properties ? { properties } : {}) };
}

function typeShape(checker: ts.TypeChecker, type: ts.Type): Shape {
  if (type.flags & ts.TypeFlags.Unknown || type.flags & ts.TypeFlags.Any) return { types: ["any"] };
  if (type.isUnion()) {
    // `boolean` is the union true | false.
    if (type.types.every((t) => t.flags & ts.TypeFlags.BooleanLiteral)) return { types: ["boolean"] };
    // An optional property's `undefined` is its optionality, compared on its own.
    const members = type.types.filter((t) => !(t.flags & ts.TypeFlags.Undefined));
    if (members.length === 1) return typeShape(checker, members[0]);
    return merge(members.map((t) => typeShape(checker, t)));
  }
  if (type.isStringLiteral()) return { types: ["string"], literals: [type.value] };
  if (type.isNumberLiteral()) return { types: ["number"], literals: [String(type.value)] };
  if (type.flags & ts.TypeFlags.String) return { types: ["string"] };
  if (type.flags & ts.TypeFlags.Number) return { types: ["number"] };
  if (type.flags & (ts.TypeFlags.Boolean | ts.TypeFlags.BooleanLiteral)) return { types: ["boolean"] };
  if (type.flags & ts.TypeFlags.Null) return { types: ["null"] };
  if (checker.isArrayType(type)) return { types: ["array"] };
  if (type.flags & ts.TypeFlags.Object) {
    const properties: Shape["properties"] = {};
    for (const symbol of checker.getPropertiesOfType(type)) {
      const declaration = symbol.valueDeclaration ?? symbol.declarations?.[0];
      const optional = (symbol.flags & ts.SymbolFlags.Optional) !== 0;
      properties[symbol.name] = { shape: typeShape(checker, checker.getTypeOfSymbolAtLocation(symbol, declaration!)), optional };
    }
    return { types: ["object"], properties };
  }
  throw new Error(`a type this check does not know: ${checker.typeToString(type)}`);
}

/** The differences between what the SDK declares and what the schema says, as sentences. */
function differences(where: string, sdk: Shape, api: Shape): string[] {
  if (api.types.includes("any") || sdk.types.includes("any")) {
    return sdk.types.includes("any") ? [] : [`${where}: the API leaves it open, the SDK says ${sdk.types.join(" | ")}`];
  }
  const out: string[] = [];
  if (sdk.types.join("|") !== api.types.join("|"))
    out.push(`${where}: the SDK says ${sdk.types.join(" | ")}, the API ${api.types.join(" | ")}`);
  // A literal union in the SDK must be exactly the API's enum; a plain string in the SDK for an enum is fine (wider).
  if (sdk.literals && sdk.literals.join("|") !== (api.literals ?? []).join("|")) {
    out.push(`${where}: the SDK allows ${sdk.literals.join(", ")}, the API ${api.literals?.join(", ") ?? "any value"}`);
  }
  if (sdk.properties && api.properties) {
    for (const name of new Set([...Object.keys(sdk.properties), ...Object.keys(api.properties)])) {
      const s = sdk.properties[name];
      const a = api.properties[name];
      if (!a) out.push(`${where}.${name}: declared by the SDK, not by the API`);
      else if (!s) out.push(`${where}.${name}: in the API, missing from the SDK`);
      else {
        if (s.optional !== a.optional) out.push(`${where}.${name}: ${s.optional ? "optional" : "required"} in the SDK, not in the API`);
        out.push(...differences(`${where}.${name}`, s.shape, a.shape));
      }
    }
  }
  return out;
}

function sdkInterfaces(): Record<string, Shape> {
  const file = path.join(__dirname, "..", "src", "types.ts");
  const program = ts.createProgram([file], { strict: true, noEmit: true });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(file)!;
  const shapes: Record<string, Shape> = {};
  ts.forEachChild(source, (node) => {
    if (ts.isInterfaceDeclaration(node) && node.name.text in MIRRORED) {
      shapes[node.name.text] = typeShape(checker, checker.getTypeAtLocation(node));
    }
  });
  return shapes;
}

describe("the TypeScript SDK's types against docs/openapi.json", function () {
  this.timeout(60_000);
  const shapes = sdkInterfaces();

  for (const [name, schema] of Object.entries(MIRRORED)) {
    it(`${name} declares exactly the API's fields and types`, () => {
      expect(schema, `docs/openapi.json has no components.schemas.${name}`).to.be.an("object");
      expect(shapes[name], `src/types.ts has no interface ${name}`).to.be.an("object");
      expect(differences(name, shapes[name], schemaShape(schema))).to.deep.equal([]);
    });
  }

  it("tells a difference when there is one", () => {
    const narrowed = structuredClone(schemaShape(schemas.Balance));
    delete narrowed.properties!.held;
    narrowed.properties!.currency.shape = { types: ["number"] };
    expect(differences("Balance", shapes.Balance, narrowed)).to.deep.equal([
      "Balance.currency: the SDK says string, the API number",
      "Balance.held: declared by the SDK, not by the API",
    ]);
  });

  describe("what the SDK returns from a real gateway", () => {
    let stack: TestStack;
    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    ajv.addSchema(openapi, "openapi.json");
    const conforms = (name: string, value: unknown, schemaName = name) => {
      const validate = ajv.compile({ $ref: `openapi.json#/components/schemas/${schemaName}` });
      expect(validate(value), ajv.errorsText(validate.errors)).to.equal(true);
      // Every field the answer carries is the type's, and every field the type does not mark optional is there.
      const properties = shapes[name].properties!;
      const present = Object.keys(value as object);
      expect(present.filter((field) => !(field in properties))).to.deep.equal([]);
      expect(Object.keys(properties).filter((field) => !properties[field].optional && !present.includes(field))).to.deep.equal([]);
    };

    before(async () => {
      stack = await startStack();
    });
    after(async () => {
      await stack?.close();
    });

    it("skills, balance and usage conform to the document and to the SDK's types", async () => {
      const client = new SkillGateway({ apiKey: stack.key, baseUrl: stack.url, maxRetries: 0 });
      await client.call("echo", { a: 1 });
      for (const skill of await client.skills.list()) conforms("Skill", skill);
      conforms("Skill", await client.skills.get("echo"));
      conforms("Balance", await client.balance());
      const page = await client.usage({ limit: 5 });
      expect(page.calls).to.not.be.empty;
      for (const call of page.calls) conforms("UsageCall", call);
      conforms("KeyStatus", await client.key(), "OwnKey");
      const limited = await stack.gw.keys.create(stack.buyerId, { spendLimit: { limitMicros: 5_000n, period: "day" } });
      conforms("KeyStatus", await new SkillGateway({ apiKey: limited.key, baseUrl: stack.url }).key(), "OwnKey");
    });

    it("keys conform to the document and to the SDK's types", async () => {
      const manager = await stack.gw.keys.create(stack.buyerId, { scopes: ["keys:manage"], metadata: { team: "ops" } });
      const client = new SkillGateway({ apiKey: manager.key, baseUrl: stack.url, maxRetries: 0 });
      const made = await client.keys.create({ name: "agent", spendLimitUsd: "1", spendLimitPeriod: "day", metadata: { agent: "a" } });
      const { key, ...listed } = made;
      expect(key).to.match(/^atom_/);
      conforms("ApiKey", listed);
      const keys = await client.keys.list();
      expect(keys).to.have.length.above(1);
      for (const each of keys) conforms("ApiKey", each);
      conforms("ApiKey", await client.keys.update(made.id, { metadata: null }));
    });
  });
});
