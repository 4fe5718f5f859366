// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

import {TestUSDC} from "../TestUSDC.sol";

/// @title SkewedTransferUSDC
/// @notice Test-only TestUSDC (same EIP-712 domain, same EIP-3009 functions) whose transfers between holders
///         deliver a different amount than asked: `skew` below zero burns that much of every transfer on the way
///         (a fee-on-transfer token), above zero mints that much extra to the receiver. With `skew` zero it
///         behaves exactly like TestUSDC. Used to show that the escrow credits x402 payments only when exactly
///         the signed value arrived.
contract SkewedTransferUSDC is TestUSDC {
    /// @notice What every transfer between holders adds to (positive) or takes from (negative) the amount received.
    int256 public skew;

    constructor(address initialOwner) TestUSDC(initialOwner) {}

    /// @notice Sets the skew of later transfers (anyone; test token).
    function setSkew(int256 skew_) external {
        skew = skew_;
    }

    function _update(address from, address to, uint256 value) internal override {
        int256 current = skew;
        // Mints, burns and unskewed transfers pass through unchanged.
        if (from == address(0) || to == address(0) || current == 0) return super._update(from, to, value);
        if (current < 0) {
            uint256 fee = uint256(-current);
            super._update(from, to, value - fee);
            super._update(from, address(0), fee);
        } else {
            super._update(from, to, value);
            super._update(address(0), to, uint256(current));
        }
    }
}
