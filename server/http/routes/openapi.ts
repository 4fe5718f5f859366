import express, { type Router } from "express";
import { buildOpenApiDocument } from "../contract/document";

/**
 *   GET /openapi.json   the API's contract, OpenAPI 3.1, made from the same declarations the
 *                       routes validate requests with (../contract/). Public, like the marketplace.
 * Built on first request and kept: it depends on nothing but the code.
 */
export function openApiRoutes(): Router {
  const router = express.Router();
  let document: string | undefined;
  router.get("/openapi.json", (_req, res) => {
    document ??= JSON.stringify(buildOpenApiDocument());
    res.set("cache-control", "no-cache").type("application/json").send(document);
  });
  return router;
}
