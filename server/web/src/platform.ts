/** GET /v1/platform, read once per page load: the bounds the forms state beside their fields. */

import { get } from "./api";
import type { Platform } from "./types";

let loaded: Promise<Platform | null> | undefined;

/** The gateway's platform settings, or null when they could not be read (forms then state no bounds). */
export function platformInfo(): Promise<Platform | null> {
  return (loaded ??= get<Platform>("/v1/platform").catch(() => {
    loaded = undefined;
    return null;
  }));
}
