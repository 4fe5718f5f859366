import { expect } from "chai";
import { SAMPLE_TEXT, exampleInput, exampleValue, fieldText, formFields, readField, readInputJson } from "../../server/web/src/schema";
import type { FormField } from "../../server/web/src/schema";

/** A form field as formFields builds it, with overrides. */
const buildField = (overrides: Partial<FormField>): FormField => ({
  name: "x",
  label: "x",
  kind: "text",
  required: false,
  initial: undefined,
  ...overrides,
});

describe("dashboard try-it example input (server/web/src/schema.ts)", () => {
  it("fills every top-level property: examples and defaults first, else a sensible value of its type", () => {
    const schema = {
      type: "object",
      properties: {
        text: { type: "string", examples: ["hello"] },
        count: { type: "integer", default: 3 },
        mode: { enum: ["fast", "slow"] },
        flag: { type: "boolean" },
        tags: { type: "array" },
        ids: { type: "array", items: { type: "integer" } },
        name: { type: "string" },
      },
    };
    expect(exampleInput(schema)).to.deep.equal({
      text: "hello",
      count: 3,
      mode: "fast",
      flag: false,
      tags: [],
      ids: [1],
      name: SAMPLE_TEXT,
    });
  });

  it("never prefills an empty text: the demo uppercase skill's schema starts with words", () => {
    const uppercase = { type: "object", properties: { text: { type: "string", maxLength: 10_000 } }, required: ["text"] };
    expect(exampleInput(uppercase).text).to.be.a("string").and.not.equal("");
  });

  it("takes the schema's own example of a whole input over its properties", () => {
    const schema = { type: "object", examples: [{ hello: "world" }], properties: { text: { type: "string" } } };
    expect(exampleInput(schema)).to.deep.equal({ hello: "world" });
  });

  it("keeps sample values inside the schema's bounds and formats", () => {
    expect(exampleValue({ type: "integer", minimum: 5 })).to.equal(5);
    expect(exampleValue({ type: "integer", exclusiveMinimum: 5 })).to.equal(6);
    expect(exampleValue({ type: "number", maximum: 0.5 })).to.equal(0.5);
    expect(exampleValue({ type: "number", multipleOf: 0.25 })).to.equal(0.25);
    expect(exampleValue({ type: "string", maxLength: 5 })).to.equal("Hello");
    expect(exampleValue({ type: "string", minLength: 15 })).to.have.length(15);
    expect(exampleValue({ type: "string", format: "email" })).to.equal("ada@example.com");
    expect(exampleValue({ type: ["string", "null"] })).to.equal(SAMPLE_TEXT);
  });

  it("gives {} for a skill without a schema", () => {
    expect(exampleInput(null)).to.deep.equal({});
  });
});

describe("dashboard try-it form fields (server/web/src/schema.ts)", () => {
  const schema = {
    type: "object",
    properties: {
      city: { type: "string", title: "City", description: "Where, as a `name`.", examples: ["Lisbon"] },
      days: { type: "integer", default: 3 },
      units: { enum: ["metric", "imperial"] },
      alerts: { type: "boolean" },
      where: { type: "object", properties: { lat: { type: "number" } } },
    },
    required: ["city", "units"],
  };

  it("makes one field per property, with its kind, label, required marker, description, default and starting value", () => {
    const fields = formFields(schema)!;
    expect(fields.map((f) => [f.name, f.kind, f.required])).to.deep.equal([
      ["city", "text", true],
      ["days", "integer", false],
      ["units", "choice", true],
      ["alerts", "boolean", false],
      ["where", "json", false],
    ]);
    expect(fields[0]).to.include({ label: "City", description: "Where, as a `name`.", initial: "Lisbon" });
    expect(fields[1]).to.include({ defaultValue: 3, initial: 3 });
    expect(fields[2].options).to.deep.equal(["metric", "imperial"]);
    expect(fields[4].initial).to.deep.equal({ lat: 1 });
  });

  it("gives no form for a schema without properties: the JSON editor is the way in", () => {
    expect(formFields(null)).to.equal(null);
    expect(formFields({ type: "object" })).to.equal(null);
    expect(formFields({ type: "object", properties: {} })).to.equal(null);
  });

  it("reads each field's prefilled text back to the value it came from", () => {
    for (const field of formFields(schema)!) {
      const text = fieldText(field, field.initial);
      expect(text, field.name).to.be.a("string");
      expect(readField(field, text!), field.name).to.deep.equal({ ok: true, value: field.initial });
    }
  });

  it("reads numbers strictly, and says which field is wrong in a sentence", () => {
    const integer = buildField({ name: "days", label: "days", kind: "integer" });
    expect(readField(integer, " 7 ")).to.deep.equal({ ok: true, value: 7 });
    expect(readField(integer, "7.5")).to.deep.equal({ ok: false, message: "Enter a whole number for days." });
    expect(readField(integer, "7 days")).to.deep.equal({ ok: false, message: "Enter a number for days." });
    expect(readField(buildField({ kind: "number", label: "rate" }), "0x10")).to.deep.equal({
      ok: false,
      message: "Enter a number for rate.",
    });
    expect(readField(buildField({ kind: "number" }), "-1.5e2")).to.deep.equal({ ok: true, value: -150 });
  });

  it("leaves an empty optional field out, and refuses an empty required one", () => {
    expect(readField(buildField({ kind: "text" }), "")).to.deep.equal({ ok: true, omitted: true });
    expect(readField(buildField({ kind: "text", label: "City", required: true }), "")).to.deep.equal({
      ok: false,
      message: "Fill in City: it is required.",
    });
    expect(readField(buildField({ kind: "choice", label: "units", required: true, options: ["a"] }), "")).to.deep.equal({
      ok: false,
      message: "Choose units: it is required.",
    });
    // Spaces are text: the form sends exactly what was typed.
    expect(readField(buildField({ kind: "text" }), "  ")).to.deep.equal({ ok: true, value: "  " });
  });

  it("shows a value only in a field that can hold it", () => {
    expect(fieldText(buildField({ kind: "text" }), 5)).to.equal(undefined);
    expect(fieldText(buildField({ kind: "integer" }), 1.5)).to.equal(undefined);
    expect(fieldText(buildField({ kind: "choice", options: [1, 2] }), 3)).to.equal(undefined);
    expect(fieldText(buildField({ kind: "choice", options: [1, 2] }), 2)).to.equal("1");
    expect(fieldText(buildField({ kind: "boolean" }), undefined)).to.equal("false");
  });

  it("reads the JSON editor as an object, or says why not", () => {
    expect(readInputJson('{"city": "Porto"}')).to.deep.equal({ ok: true, value: { city: "Porto" } });
    const bad = readInputJson('{"city": ');
    expect(bad.ok).to.equal(false);
    expect(!bad.ok && bad.message).to.match(/^The input is not valid JSON/);
    expect(readInputJson("[1]")).to.deep.include({ ok: false });
  });
});
