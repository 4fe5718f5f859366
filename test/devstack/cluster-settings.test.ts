import { expect } from "chai";
import { ConfigError, configEnvNames } from "../../server/config";
import { CLUSTER_OWNED_SETTINGS, clusterUserSettings } from "../../server/devstack/cluster-settings";

describe("clusterUserSettings (what npm run start:cluster hands its replicas)", () => {
  it("passes every gateway setting set, and nothing else of the environment", () => {
    const { passed, ignored } = clusterUserSettings({
      RATE_LIMIT_PER_MIN: "1000000",
      FEE_MODE: "on_top",
      REQUEST_TIMEOUT_MS: "60000",
      GITHUB_CLIENT_ID: "id",
      GITHUB_CLIENT_SECRET: "secret",
      PATH: "/usr/bin",
      REPLICAS: "3",
    });
    expect(passed).to.deep.equal({
      RATE_LIMIT_PER_MIN: "1000000",
      FEE_MODE: "on_top",
      REQUEST_TIMEOUT_MS: "60000",
      GITHUB_CLIENT_ID: "id",
      GITHUB_CLIENT_SECRET: "secret",
    });
    expect(ignored).to.deep.equal([]);
  });

  it("takes an empty value as unset, as the config does", () => {
    expect(clusterUserSettings({ FEE_MODE: "", RATE_LIMIT_PER_MIN: "5" }).passed).to.deep.equal({ RATE_LIMIT_PER_MIN: "5" });
  });

  it("ignores, and names, the settings the cluster sets itself, whatever their values", () => {
    const { passed, ignored } = clusterUserSettings({
      DATABASE_URL: "not a url",
      PORT: "99999",
      SETTLER_PRIVATE_KEY: "0x11",
      FEE_BPS: "2500",
    });
    expect(passed).to.deep.equal({ FEE_BPS: "2500" });
    expect(ignored).to.have.members(["DATABASE_URL", "PORT", "SETTLER_PRIVATE_KEY"]);
  });

  it("refuses a setting the replicas would refuse, with the config's own error", () => {
    expect(() => clusterUserSettings({ RATE_LIMIT_PER_MIN: "lots" })).to.throw(
      ConfigError,
      'RATE_LIMIT_PER_MIN must be an integer, got "lots"',
    );
    expect(() => clusterUserSettings({ HEADERS_TIMEOUT_MS: "20000", REQUEST_TIMEOUT_MS: "10000" })).to.throw(
      ConfigError,
      "HEADERS_TIMEOUT_MS must not be above REQUEST_TIMEOUT_MS",
    );
    expect(() => clusterUserSettings({ GITHUB_CLIENT_ID: "id" })).to.throw(ConfigError, "must be set together");
  });

  it("owns only settings the config reads (a renamed setting cannot leave a stale name here)", () => {
    expect(configEnvNames()).to.include.members(Object.keys(CLUSTER_OWNED_SETTINGS));
  });
});
