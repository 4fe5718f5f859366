-- Reads the running gateway repeats, bounded by what they read: SQLite version 30 (server/ledger/schema.ts,
-- server/x402/schema.ts, server/gateway/schema.ts, server/identity/schema.ts say which read each serves).
CREATE INDEX entries_deposits ON entries(id) WHERE kind = 'deposit';
CREATE INDEX entries_vouchers ON entries(id) WHERE kind IN ('voucher_withdrawal', 'voucher_return');
CREATE INDEX x402_payments_uncollected_by_payer ON x402_payments(payer) WHERE status IN ('reserved', 'collecting', 'settling');
CREATE INDEX idempotency_in_progress ON idempotency_keys(created_at) WHERE state = 'in_progress';
CREATE INDEX call_refusals_by_minute ON call_refusals(account_id, minute);
CREATE INDEX mcp_oauth_requests_by_client ON mcp_oauth_requests(client_id);
CREATE INDEX mcp_oauth_codes_by_client ON mcp_oauth_codes(client_id);
CREATE INDEX mcp_oauth_tokens_by_client ON mcp_oauth_tokens(client_id);
