import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import type { Address, PublicClient } from "viem";
import { testUsdcAbi } from "../chain/abi";
import type { Eip3009Authorization } from "./escrow-settlement";

/** A payment that verified, or why it did not (the protocol's reason code and a sentence for people). */
export type Verification = { valid: true } | { valid: false; reason: string; message: string };

/** What a payer's authorization can still pay, read from the token now. */
export interface PayerFunds {
  balanceMicros: bigint;
  /** The authorization's nonce was used (or cancelled) on-chain: it can no longer pay. */
  nonceUsed: boolean;
}

/** Checks an x402 `exact` payment against what a call asks for, before the call runs. */
export interface PaymentVerifier {
  verify(payload: PaymentPayload, requirements: PaymentRequirements, authorization: Eip3009Authorization): Promise<Verification>;
  /** The payer's USDC balance and the authorization's nonce state, as the token says them now. */
  funds(authorization: Eip3009Authorization): Promise<PayerFunds>;
}

/** What the protocol's reason codes mean, said for the payer. */
const REASONS: Record<string, string> = {
  invalid_exact_evm_signature: "the signature is not the payer's over this authorization",
  invalid_exact_evm_recipient_mismatch: "the authorization pays another address than the escrow",
  invalid_exact_evm_payload_authorization_valid_before: "the authorization expires too soon or has expired",
  invalid_exact_evm_payload_authorization_valid_after: "the authorization is not valid yet",
  invalid_exact_evm_payload_authorization_value_mismatch: "the authorization's value is not the price",
  invalid_exact_evm_network_mismatch: "the payment is for another network",
  invalid_exact_evm_nonce_already_used: "the authorization's nonce was already used or cancelled",
  invalid_exact_evm_insufficient_balance: "the payer's USDC balance is below the price",
  invalid_exact_evm_transaction_simulation_failed: "the token refused the transfer in simulation",
};

/**
 * The protocol's own verification (the `exact` EVM scheme's facilitator from @x402/evm: EIP-712 signature, with
 * ERC-1271 and ERC-6492 wallets; recipient; validity window; value; and a simulation of the transfer, which fails on
 * missing funds or a used nonce), run against this gateway's chain. It sends nothing: the payment is collected by the
 * escrow's collectX402 (escrow-settlement.ts), not the facilitator's direct transfer. When the simulation fails the
 * balance and the nonce are read here, since the package's own diagnosis needs Multicall3, which a local chain lacks.
 */
export class ExactPaymentVerifier implements PaymentVerifier {
  private readonly scheme: ExactEvmScheme;

  constructor(
    private readonly publicClient: PublicClient,
    usdc: Address,
    settlerAddress: Address,
  ) {
    const refuse = () => Promise.reject(new Error("the gateway's x402 verifier never sends transactions"));
    this.scheme = new ExactEvmScheme({
      getAddresses: () => [settlerAddress],
      readContract: (args) => publicClient.readContract(args as Parameters<PublicClient["readContract"]>[0]),
      verifyTypedData: (args) => publicClient.verifyTypedData(args as Parameters<PublicClient["verifyTypedData"]>[0]),
      getCode: (args) => publicClient.getCode(args),
      writeContract: refuse,
      sendTransaction: refuse,
      waitForTransactionReceipt: refuse,
    });
    this.usdc = usdc;
  }

  private readonly usdc: Address;

  async verify(payload: PaymentPayload, requirements: PaymentRequirements, authorization: Eip3009Authorization): Promise<Verification> {
    const answer = await this.scheme.verify(payload, requirements);
    if (answer.isValid) return { valid: true };
    let reason = answer.invalidReason ?? "invalid_payment";
    if (reason === "invalid_exact_evm_transaction_simulation_failed") reason = await this.diagnose(authorization, reason);
    return { valid: false, reason, message: REASONS[reason] ?? reason };
  }

  async funds(authorization: Eip3009Authorization): Promise<PayerFunds> {
    const [used, balance] = await Promise.all([
      this.publicClient.readContract({
        address: this.usdc,
        abi: testUsdcAbi,
        functionName: "authorizationState",
        args: [authorization.from, authorization.nonce],
      }),
      this.publicClient.readContract({ address: this.usdc, abi: testUsdcAbi, functionName: "balanceOf", args: [authorization.from] }),
    ]);
    return { balanceMicros: balance as bigint, nonceUsed: used as boolean };
  }

  private async diagnose(authorization: Eip3009Authorization, fallback: string): Promise<string> {
    try {
      const { balanceMicros, nonceUsed } = await this.funds(authorization);
      if (nonceUsed) return "invalid_exact_evm_nonce_already_used";
      if (balanceMicros < authorization.value) return "invalid_exact_evm_insufficient_balance";
    } catch {
      // The token cannot say; the simulation's failure stands.
    }
    return fallback;
  }
}
