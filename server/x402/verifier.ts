import type { PaymentPayload, PaymentRequirements } from "@x402/core/types";
import { ExactEvmScheme } from "@x402/evm/exact/facilitator";
import type { Address, PublicClient } from "viem";
import { testUsdcAbi } from "../chain/abi";
import type { Eip3009Authorization } from "./escrow-settlement";

/** A payment that verified, or why it did not (the protocol's reason code and a sentence for people). */
export type Verification = { valid: true } | { valid: false; reason: string; message: string };

/** Checks an x402 `exact` payment against what a call asks for, before the call runs. */
export interface PaymentVerifier {
  verify(payload: PaymentPayload, requirements: PaymentRequirements, authorization: Eip3009Authorization): Promise<Verification>;
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
 * missing funds or a used nonce), run against this gateway's chain. It sends nothing: the settlement is the
 * escrow's settleX402 (escrow-settlement.ts), not the facilitator's direct transfer. When the simulation fails the
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

  private async diagnose(authorization: Eip3009Authorization, fallback: string): Promise<string> {
    try {
      const [used, balance] = await Promise.all([
        this.publicClient.readContract({
          address: this.usdc,
          abi: testUsdcAbi,
          functionName: "authorizationState",
          args: [authorization.from, authorization.nonce],
        }),
        this.publicClient.readContract({ address: this.usdc, abi: testUsdcAbi, functionName: "balanceOf", args: [authorization.from] }),
      ]);
      if (used) return "invalid_exact_evm_nonce_already_used";
      if ((balance as bigint) < authorization.value) return "invalid_exact_evm_insufficient_balance";
    } catch {
      // The token cannot say; the simulation's failure stands.
    }
    return fallback;
  }
}
