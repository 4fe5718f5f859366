import fs from "node:fs/promises";
import express, { type Router } from "express";
import { type Asset, asset, once, sendAsset } from "./dashboard";

/**
 * The bundle's only address on another site: Redoc's own logo, an <img> in the menu's "API docs by Redocly" link.
 * It is replaced by an empty data: URL, which fails at once (Redoc then hides the image), so the page asks no other
 * site for anything; the CSP below would refuse it anyway.
 */
const REDOC_LOGO_URL = "https://cdn.redoc.ly/redoc/logo-mini.svg";

/**
 * The reference page's Content-Security-Policy: scripts, fonts, images and fetches from this origin only. Redoc
 * styles its components with inline <style> elements (styled-components), hence 'unsafe-inline' for styles alone,
 * and runs its search index in a worker made from a blob: URL.
 */
export const API_REFERENCE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self'; connect-src 'self'; worker-src blob:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Skill Gateway API reference</title>
    <link rel="icon" href="data:," />
  </head>
  <body>
    <div id="reference"><p>Loading the reference of <a href="/openapi.json">/openapi.json</a>...</p></div>
    <script src="/docs/assets/redoc.standalone.js"></script>
    <script src="/docs/assets/reference.js"></script>
  </body>
</html>
`;

/**
 * Starts Redoc on the gateway's own document. The fonts are the system's: Redoc's default names web fonts (Roboto,
 * Montserrat) that its own pages load from another site.
 */
const INIT = `"use strict";
(function () {
  var system = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';
  Redoc.init(
    "/openapi.json",
    {
      expandResponses: "200,201",
      jsonSampleExpandLevel: 3,
      requiredPropsFirst: true,
      hideHostname: true,
      theme: {
        typography: {
          fontFamily: system,
          headings: { fontFamily: system },
          code: { fontFamily: 'ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace' },
        },
      },
    },
    document.getElementById("reference"),
  );
})();
`;

/** Redoc's standalone bundle from node_modules (redoc on npm), with its logo's address taken out. */
async function redocBundle(): Promise<Asset> {
  const file = require.resolve("redoc/bundles/redoc.standalone.js");
  const source = await fs.readFile(file, "utf8");
  return asset(source.replaceAll(REDOC_LOGO_URL, "data:,"), "text/javascript; charset=utf-8");
}

/**
 * The API reference a person reads, rendered by Redoc (redoc.standalone.js) from GET /openapi.json:
 *   GET /docs                                the page, under the CSP above
 *   GET /docs/assets/redoc.standalone.js     the renderer, served by the gateway (nothing comes from another site)
 *   GET /docs/assets/reference.js            the few lines that start it (no inline script)
 * Public, like /openapi.json.
 */
export function apiReferenceRoutes(): Router {
  const router = express.Router();
  const bundle = once(redocBundle);
  const page = asset(PAGE, "text/html; charset=utf-8");
  const init = asset(INIT, "text/javascript; charset=utf-8");
  router.get("/docs", (req, res) => sendAsset(req, res, page, { "content-security-policy": API_REFERENCE_CSP, "x-frame-options": "DENY" }));
  router.get("/docs/assets/redoc.standalone.js", async (req, res) => sendAsset(req, res, await bundle()));
  router.get("/docs/assets/reference.js", (req, res) => sendAsset(req, res, init));
  return router;
}
