import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";

/**
 * What an MCP client application keeps for the official SDK's OAuth support (its `OAuthClientProvider`): the
 * registration, tokens and PKCE verifier in memory, and the authorization URL it would open in a browser, kept for the
 * test to follow (with fetch and a session, or with Chromium).
 */
export class MemoryOAuthClient implements OAuthClientProvider {
  registration?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier?: string;
  /** The authorization URLs the SDK asked to open, last one last. */
  readonly authorizationUrls: URL[] = [];

  constructor(
    readonly redirectUrl: string,
    private readonly name = "Test MCP Client",
  ) {}

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.name,
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }

  clientInformation(): OAuthClientInformationMixed | undefined {
    return this.registration;
  }

  saveClientInformation(info: OAuthClientInformationMixed): void {
    this.registration = info;
  }

  tokens(): OAuthTokens | undefined {
    return this.saved;
  }

  saveTokens(tokens: OAuthTokens): void {
    this.saved = tokens;
  }

  redirectToAuthorization(url: URL): void {
    this.authorizationUrls.push(url);
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }

  codeVerifier(): string {
    if (!this.verifier) throw new Error("no code verifier saved");
    return this.verifier;
  }

  /** The last authorization URL the SDK asked to open. */
  lastAuthorizationUrl(): URL {
    const url = this.authorizationUrls.at(-1);
    if (!url) throw new Error("the SDK asked to open no authorization URL");
    return url;
  }
}
