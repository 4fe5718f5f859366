import { createHash } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import express, { type Request, type Response, type Router } from "express";

/** Where the dashboard's sources live: server/web (index.html, styles.css, src/). */
const WEB_DIR = path.join(__dirname, "..", "..", "web");

/**
 * The HTML's Content-Security-Policy: everything from this origin only, no inline script or
 * style, never framed. API data is put into the page as text, and this is the second wall if
 * that ever slips.
 */
export const DASHBOARD_CSP =
  "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/**
 * The single-page app's page paths: each is answered with index.html and the app routes itself.
 * /auth/email/callback is where a mailed sign-in link points: a page, so that opening (or a
 * mail scanner fetching) the link uses nothing up; /signin/oauth explains a GitHub/Google
 * sign-in that did not complete.
 */
const PAGE_PATHS = [
  "/",
  "/signin",
  "/signin/oauth",
  "/auth/email/callback",
  "/wallet",
  "/keys",
  "/marketplace",
  "/marketplace/:slug",
  "/usage",
  "/seller",
  "/settings",
  "/connect",
];

/** A file served as is, with its type and a strong ETag of its bytes. */
export interface Asset {
  body: Buffer;
  contentType: string;
  etag: string;
}

export const asset = (body: Buffer | string, contentType: string): Asset => {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  return { body: bytes, contentType, etag: `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 27)}"` };
};

/** Bundles the browser TypeScript in memory: one minified script, no build step to forget. */
async function bundleScript(): Promise<Asset> {
  // Loaded here, not at the top: a gateway that never serves the dashboard (the tests of the
  // call path) does not pay for loading esbuild.
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: [path.join(WEB_DIR, "src", "main.ts")],
    bundle: true,
    write: false,
    format: "iife",
    minify: true,
    target: "es2020",
    legalComments: "none",
    logLevel: "silent",
  });
  return asset(Buffer.from(result.outputFiles[0].contents), "text/javascript; charset=utf-8");
}

/** Memoizes one build per process; a failed one is forgotten so that the next request tries again. */
export function once(load: () => Promise<Asset>): () => Promise<Asset> {
  let pending: Promise<Asset> | undefined;
  return () => {
    pending ??= load().catch((error: unknown) => {
      pending = undefined;
      throw error;
    });
    return pending;
  };
}

/** Sends an asset revalidated on every load (no-cache with its ETag: an unchanged file costs a 304). */
export function sendAsset(req: Request, res: Response, file: Asset, extra: Record<string, string> = {}): void {
  res.set({
    "content-type": file.contentType,
    "cache-control": "no-cache",
    etag: file.etag,
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
    ...extra,
  });
  if (req.headers["if-none-match"] === file.etag) {
    res.status(304).end();
    return;
  }
  res.send(file.body);
}

/**
 * The dashboard (issue 6), a small single-page app with no framework:
 *   GET /assets/app.js    server/web/src/main.ts bundled by esbuild, once per process
 *   GET /assets/app.css   server/web/styles.css
 *   GET <page path>       server/web/index.html, with the strict CSP above
 * Assets are revalidated on every load (no-cache with an ETag): a restart with new code is
 * never hidden behind a stale cache, and an unchanged file costs a 304. Anything else falls
 * through to the JSON 404, so `/assets/../package.json` and `/v1/nope` are never pages.
 */
export function dashboardRoutes(): Router {
  const router = express.Router();
  const script = once(bundleScript);
  const styles = once(async () => asset(await fs.readFile(path.join(WEB_DIR, "styles.css")), "text/css; charset=utf-8"));
  const html = once(async () => asset(await fs.readFile(path.join(WEB_DIR, "index.html")), "text/html; charset=utf-8"));

  router.get("/assets/app.js", async (req, res) => sendAsset(req, res, await script()));
  router.get("/assets/app.css", async (req, res) => sendAsset(req, res, await styles()));
  router.get(PAGE_PATHS, async (req, res) =>
    sendAsset(req, res, await html(), { "content-security-policy": DASHBOARD_CSP, "x-frame-options": "DENY" }),
  );
  return router;
}
