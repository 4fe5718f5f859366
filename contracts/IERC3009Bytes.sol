// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

/// @title IERC3009Bytes
/// @notice The part of EIP-3009 that SkillEscrow needs from USDC to settle x402 payments: the
///         `transferWithAuthorization` overload taking the signature as `bytes`, which Circle's USDC offers from
///         version 2.2 on (and contracts/TestUSDC.sol reproduces), and the nonce state readers use.
/// @dev The `bytes` overload accepts both a 65-byte ECDSA signature from an EOA and an ERC-1271 signature from a
///      contract wallet, so a smart-wallet payer settles the same way as an EOA. OpenZeppelin's draft IERC3009
///      declares only the (v, r, s) overload, which cannot carry an ERC-1271 signature.
interface IERC3009Bytes {
    /// @notice Moves `value` from `from` to `to` with `from`'s signature of the EIP-712 struct
    ///         `TransferWithAuthorization(from, to, value, validAfter, validBefore, nonce)` over the token's domain.
    ///         Valid strictly after `validAfter` and strictly before `validBefore`; each `nonce` of `from` works
    ///         once. Anyone may submit it; the money can only go to `to`.
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes calldata signature
    ) external;

    /// @notice Whether `nonce` of `authorizer` has been used or cancelled.
    function authorizationState(address authorizer, bytes32 nonce) external view returns (bool);
}
