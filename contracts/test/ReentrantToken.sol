// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title ReentrantToken
/// @notice Test-only attacker token. While armed, every transfer into or out of `target` makes the token call
///         `target` with `attackData` from inside the transfer, i.e. exactly where an escrow that pays before
///         updating its books would be exploitable. A failing re-entry bubbles its revert data up unchanged, so
///         the outer call fails with the inner error's name.
contract ReentrantToken is ERC20 {
    /// @notice Contract to re-enter; zero when disarmed.
    address public target;
    /// @notice Calldata sent to `target` from inside a transfer.
    bytes public attackData;
    /// @notice How many times the hook ran.
    uint256 public hookCalls;
    /// @notice Return data of the last successful re-entry (lets tests observe the state mid-transfer).
    bytes public lastReturnData;

    constructor() ERC20("Reentrant Token", "RNT") {}

    /// @notice Mints `amount` to `to` (anyone; test token).
    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Arms the hook: transfers touching `target_` will call it with `data`.
    function arm(address target_, bytes calldata data) external {
        target = target_;
        attackData = data;
    }

    /// @notice Makes this contract call `to` with `data` (so it can act as a seller or an escrow account),
    ///         bubbling up any revert.
    function execute(address to, bytes calldata data) external returns (bytes memory) {
        (bool ok, bytes memory returned) = to.call(data);
        if (!ok) {
            assembly ("memory-safe") {
                revert(add(returned, 0x20), mload(returned))
            }
        }
        return returned;
    }

    /// @notice EIP-3009's `bytes` overload with none of its checks (an attacker's token): moves `value` from `from`
    ///         to `to`, so the escrow's collectX402 runs the hook from inside its pull (and refundX402 and
    ///         reclaimX402 run it from inside their payout, an ordinary transfer).
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256,
        uint256,
        bytes32,
        bytes calldata
    ) external {
        _transfer(from, to, value);
    }

    /// @notice Disarms the hook.
    function disarm() external {
        target = address(0);
    }

    /// @notice 6, like USDC.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    function _update(address from, address to, uint256 value) internal override {
        super._update(from, to, value);
        address victim = target;
        if (victim != address(0) && (from == victim || to == victim)) {
            hookCalls += 1;
            (bool ok, bytes memory returned) = victim.call(attackData);
            if (!ok) {
                assembly ("memory-safe") {
                    revert(add(returned, 0x20), mload(returned))
                }
            }
            lastReturnData = returned;
        }
    }
}
