export * from "../../server/devstack/serve-process";
