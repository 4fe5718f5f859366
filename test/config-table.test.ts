import fs from "node:fs";
import { expect } from "chai";
import { configEnvNames, configSettings } from "../server/config";
import { CONFIG_DOC, CONFIG_SOURCE, declaredFields, docConfigTable, renderConfigTable } from "../scripts/config-table";

describe("docs/configuration.md's settings table (npm run docs:config)", () => {
  it("is the one server/config.ts generates: run npm run docs:config after changing a setting", () => {
    const table = docConfigTable(fs.readFileSync(CONFIG_DOC, "utf8"));
    expect(table, "docs/configuration.md lacks the settings markers").to.be.a("string");
    expect(table, "docs/configuration.md's settings table differs from server/config.ts: run npm run docs:config").to.equal(
      renderConfigTable(),
    );
  });

  it("has a row for every variable loadConfig reads, each declared by its reader with a default and what it accepts", () => {
    const settings = configSettings();
    expect(settings.map((s) => s.name)).to.deep.equal(configEnvNames());
    for (const setting of settings) expect(setting.accepts, setting.name).to.not.equal("");
    const table = renderConfigTable();
    for (const name of configEnvNames()) expect(table).to.include(`| \`${name}\` |`);
  });

  it("gives every Config field a doc comment and the variable it is read from", () => {
    for (const field of declaredFields()) {
      expect(field.doc, `Config.${field.field} has no doc comment`).to.not.equal("");
      expect(field.variable, `loadConfig names no variable for ${field.field}`).to.be.a("string");
    }
    expect(declaredFields().map((f) => f.variable)).to.deep.equal(configEnvNames());
  });

  it("refuses to write a row without a meaning: a field whose doc comment is removed", () => {
    const source = fs.readFileSync(CONFIG_SOURCE, "utf8");
    const stripped = source.replace("  /** The platform's fee, in basis points of a call's price (1000: 10%). */\n", "");
    expect(stripped).to.not.equal(source);
    expect(() => renderConfigTable(stripped)).to.throw("Config.feeBps (FEE_BPS) has no doc comment");
  });

  it("takes each row's meaning from the field's doc comment and its bounds from the reader", () => {
    const row = renderConfigTable()
      .split("\n")
      .find((line) => line.startsWith("| `FEE_BPS` |"));
    expect(row).to.equal(
      "| `FEE_BPS` | `1000` | an integer from 0 to 10,000 | The platform's fee, in basis points of a call's price (1000: 10%). |",
    );
  });
});
