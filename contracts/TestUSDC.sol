// SPDX-License-Identifier: UNLICENSED
pragma solidity 0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {ERC3009} from "@openzeppelin/contracts/token/ERC20/extensions/draft-ERC3009.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {Nonces} from "@openzeppelin/contracts/utils/Nonces.sol";

/// @title TestUSDC
/// @notice A stand-in for Circle's USDC on the local chain: 6 decimals, EIP-2612 `permit` and EIP-3009
///         `transferWithAuthorization` / `receiveWithAuthorization` / `cancelAuthorization`, mintable by its owner.
/// @dev The EIP-712 domain is the one USDC uses on Base (name "USD Coin", version "2"), so code that signs permits
///      and authorizations for the real token works unchanged against this one. OpenZeppelin's ERC20Permit pins the
///      domain version to "1", which is why `permit` is written out here instead of inherited. This contract is only
///      ever deployed on a local chain: the deploy script takes the real USDC address whenever it runs against a fork.
contract TestUSDC is ERC20, EIP712, ERC3009, IERC20Permit, Nonces, Ownable {
    /// @dev Permit deadline has passed (same name and arguments as OpenZeppelin's ERC20Permit).
    error ERC2612ExpiredSignature(uint256 deadline);

    /// @dev Permit signature does not come from `owner` (same name and arguments as OpenZeppelin's ERC20Permit).
    error ERC2612InvalidSigner(address signer, address owner);

    bytes32 private constant PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");

    /// @param initialOwner The only address allowed to mint.
    constructor(address initialOwner) ERC20("USD Coin", "USDC") EIP712("USD Coin", "2") Ownable(initialOwner) {}

    /// @notice USDC has 6 decimals: 1 USDC = 1_000_000 base units.
    function decimals() public pure override returns (uint8) {
        return 6;
    }

    /// @notice Creates `amount` base units for `to`. Only the owner can mint.
    /// @param to Receiver of the new tokens.
    /// @param amount Amount in base units (6 decimals).
    function mint(address to, uint256 amount) external onlyOwner {
        _mint(to, amount);
    }

    /// @notice EIP-2612: sets `spender`'s allowance over `owner`'s tokens from `owner`'s signature.
    /// @dev Reverts with ERC2612ExpiredSignature after `deadline` and ERC2612InvalidSigner on a wrong signature.
    function permit(
        address owner,
        address spender,
        uint256 value,
        uint256 deadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external {
        if (block.timestamp > deadline) revert ERC2612ExpiredSignature(deadline);
        bytes32 structHash = keccak256(abi.encode(PERMIT_TYPEHASH, owner, spender, value, _useNonce(owner), deadline));
        address signer = ECDSA.recover(_hashTypedDataV4(structHash), v, r, s);
        if (signer != owner) revert ERC2612InvalidSigner(signer, owner);
        _approve(owner, spender, value);
    }

    /// @notice EIP-3009 with a `bytes` signature, as USDC v2.2 offers: accepts ERC-1271 signatures from contract
    ///         wallets as well as 65-byte ECDSA signatures from EOAs.
    /// @dev Same checks as the (v, r, s) overload: validity window, single-use nonce, signature of `from`.
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external {
        bytes32 hash = _hashTypedDataV4(
            keccak256(abi.encode(TRANSFER_WITH_AUTHORIZATION_TYPEHASH, from, to, value, validAfter, validBefore, nonce))
        );
        if (!SignatureChecker.isValidSignatureNow(from, hash, signature)) revert ERC3009InvalidSignature();
        _transferWithAuthorization(from, to, value, validAfter, validBefore, nonce);
    }

    /// @notice The current permit nonce of `owner`.
    function nonces(address owner) public view override(IERC20Permit, Nonces) returns (uint256) {
        return super.nonces(owner);
    }

    /// @notice The EIP-712 domain separator shared by permits and EIP-3009 authorizations.
    // solhint-disable-next-line func-name-mixedcase
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }
}
