// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title EighteenDecimalsToken
/// @notice Test-only ERC-20 with 18 decimals: the deploy code must refuse it as the escrowed "USDC".
contract EighteenDecimalsToken is ERC20 {
    constructor() ERC20("Not USDC", "NUSD") {}
}
